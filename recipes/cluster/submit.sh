#!/usr/bin/env bash
# Submit a recipe (or any command) to the Ray cluster as a Ray job, and follow its output.
#
#   RAY_ADDRESS=http://10.0.0.1:8265 NNODES=2 bash recipes/cluster/submit.sh \
#       recipes/math_length/r1_1.5b_gdpo.sh trainer.val_before_train=False
#   bash recipes/cluster/submit.sh python3 -c "import verl"         # a command instead of a recipe
#
# The recipe runs on the cluster, not here, so the recipe's knobs that are set in this shell (MODEL, NNODES,
# DATA_DIR, ...: what the recipe declares with `knob`, listed by LIST_KNOBS=1, recipes/launch.sh) are passed to
# the job's environment; with a command instead of a recipe, the knobs of every recipe. So are WANDB_*, HF_* and
# NCCL_* where set here (the W&B key, the Hugging Face token and cache, NCCL's interface).
# WORKING_DIR (default: this checkout) is uploaded as the job's working directory, without the virtual
# environments, .git and run outputs; WORKING_DIR= runs from the nodes' own copy instead. NO_WAIT=1 returns
# after submitting. A head started moments ago may not take jobs yet (Ray: "No available agent to submit job"):
# submit.sh tries again every 5 s for up to AGENT_WAIT_S seconds (default 120), then gives up with Ray's error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RAY_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:8265}
WORKING_DIR=${WORKING_DIR-$ROOT}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}

if [ $# -eq 0 ]; then
    echo "usage: submit.sh RECIPE.sh [hydra overrides...] | submit.sh COMMAND [ARGS...]" >&2
    exit 2
fi
if [[ "$1" == *.sh ]]; then
    if [ ! -f "$1" ]; then
        echo "submit.sh: recipe $1 not found" >&2
        exit 2
    fi
    recipes=("$1")
    set -- bash "$@"
else
    recipes=()
    while IFS= read -r recipe; do
        recipes+=("$recipe")
    done < <(find "$ROOT/recipes" -name '*.sh' ! -name launch.sh ! -name common.sh ! -path '*/cluster/*' | sort)
fi

# The recipe knobs that are set here travel with the job, and so do the variables a cluster run needs from this
# shell: Weights & Biases' (WANDB_*: the key, the entity), Hugging Face's (HF_*: the token, the cache, offline mode)
# and NCCL's (NCCL_*: the interface, InfiniBand).
knobs=""
for recipe in "${recipes[@]}"; do
    knobs+=$(env -i PATH="$PATH" HOME="$HOME" LIST_KNOBS=1 bash "$recipe")$'\n'
done
knobs+=$(compgen -e | grep -E '^(WANDB|HF|NCCL)_' || true)$'\n'
env_vars=""
for name in $(printf '%s' "$knobs" | sort -u); do
    if [ -n "${!name+set}" ]; then
        value=${!name//\\/\\\\}
        env_vars+="${env_vars:+,}\"${name}\": \"${value//\"/\\\"}\""
    fi
done
runtime_env="{\"env_vars\": {${env_vars}}"
if [ -n "$WORKING_DIR" ]; then
    runtime_env+=", \"working_dir\": \"${WORKING_DIR}\""
    runtime_env+=", \"excludes\": [\".venv\", \".venv-cpu-training\", \".venv-unit\", \".git\", \"outputs\", \"tensorboard_log\", \"tensorboard\", \"checkpoints\", \"*.parquet\"]"
fi
runtime_env+="}"

deadline=$((SECONDS + ${AGENT_WAIT_S:-120}))
output=$(mktemp)
trap 'rm -f "$output"' EXIT
while true; do
    set +e
    ray job submit --address "$RAY_ADDRESS" --runtime-env-json "$runtime_env" ${NO_WAIT:+--no-wait} -- "$@" 2>&1 \
        | tee "$output"
    code=${PIPESTATUS[0]}
    set -e
    if [ "$code" != 0 ] && grep -q "No available agent to submit job" "$output" && [ "$SECONDS" -lt "$deadline" ]; then
        echo "submit.sh: the cluster's job agent is not up yet; trying again in 5 s" >&2
        sleep 5
        continue
    fi
    exit "$code"
done
