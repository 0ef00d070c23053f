#!/usr/bin/env bash
# `gdpo-verl demo` on its embedded default: a shipped multi-reward rollout batch through verl's real advantage stage,
# GRPO next to GDPO. It runs in the environment scripts/train_cpu.sh makes (.venv-cpu-training, set up here if it
# is not yet; Linux x86_64), which also holds the gdpo-verl command and runs the recipes' DRY_RUN; elsewhere, where
# vLLM's CPU build has no wheels, in .venv (scripts/setup_env.sh: verl without vLLM), and it says so.
# Extra arguments go to `gdpo-verl demo` (for example --rollouts my_rollouts.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(uname -s)/$(uname -m)" = "Linux/x86_64" ]; then
    bash scripts/setup_cpu_training_env.sh
    VENV=${CPU_TRAINING_VENV:-.venv-cpu-training}
else
    echo "demo.sh: vLLM's CPU build has no wheels for $(uname -s)/$(uname -m); setting up .venv (verl without vLLM)"
    bash scripts/setup_env.sh
    VENV=${VENV:-.venv}
fi
echo "demo.sh: gdpo-verl demo in $VENV (source $VENV/bin/activate for the gdpo-verl command)"
exec "$VENV/bin/gdpo-verl" demo "$@"
