#!/usr/bin/env bash
# A real GDPO training run on the CPU: verl's main_ppo (V1 trainer, Ray, TransferQueue, FSDP2 actor, vLLM
# CPU rollout server, weight sync) with this plugin's estimator, reward manager and math length-constrained
# rewards (two components: correct, length), on a tiny model and tokenizer built here and an 8-question
# fixture dataset, through scripts/cpu_main_ppo.sh (the CPU settings, and a supervisor that stops the whole run,
# Ray and vLLM included, with a message when a part of it dies or a step stalls). Then gdpo_verl/cpu_run/check_run.py
# reads what the run wrote and says whether it trained.
#
# Needs the environment of scripts/setup_cpu_training_env.sh; scripts/train_cpu.sh does both.
#
#   CPU_TRAINING_PYTHON=exe  the environment's interpreter (default $CPU_TRAINING_VENV/bin/python, where
#                            CPU_TRAINING_VENV defaults to .venv-cpu-training)
#   OUT=dir                  where the model, data, metrics, per-step records and checkpoint go
#                            (default outputs/cpu_training; the run's own subfolders in it are replaced)
#   STEPS=n                  training steps (default 2)
#   TRAINER=name             which of verl's trainers (default sync; scripts/cpu_main_ppo.sh lists them), also told
#                            to check_run
#   REWARD=file[:name]       your own reward function instead of the paper's math rewards: a Python file and its
#                            function (default compute_score), loaded as verl loads it (the gdpo_verl reward manager
#                            passes extra_info["response_length"]); REWARD_KEYS=a,b (default correct,length) names its
#                            components, for algorithm.gdpo_reward_keys
#   CONFIG=name              gdpo (default: gdpo-verl's packaged config) or verl (verl's own ppo_trainer.yaml, the GDPO
#                            keys given with +: the README's second route)
#   VERBOSE=1                the run's whole output on the terminal (it always goes to OUT/run.log)
#   RESUME=1                 go on with the run already in OUT from its latest checkpoint, up to STEPS (its
#                            model, data, records and metrics are kept; add trainer.save_freq=1 to the first
#                            run to checkpoint every step)
#   STALL_TIMEOUT=s          stop the run when no step finishes and its processes are idle for s seconds (default
#                            300); STEP_TIMEOUT=s: when a step takes s seconds, working or not (3600; cpu_main_ppo.sh)
# Anything after the script name is passed to verl as extra hydra overrides.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${CPU_TRAINING_PYTHON:-${CPU_TRAINING_VENV:-$ROOT/.venv-cpu-training}/bin/python}
OUT=${OUT:-$ROOT/outputs/cpu_training}
STEPS=${STEPS:-2}

if [ ! -x "$PYTHON" ]; then
    echo "run_cpu_training.sh: no interpreter at $PYTHON; create the environment with" \
         "bash scripts/setup_cpu_training_env.sh (or set CPU_TRAINING_PYTHON)." >&2
    exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # gdpo-verl from this checkout (the model, the checks)
RESUME_ARGS=()
if [ "${RESUME:-0}" = 1 ]; then
    # the same run again, from its latest checkpoint: its model, data, records and metrics are kept
    if [ ! -f "$OUT/checkpoints/latest_checkpointed_iteration.txt" ]; then
        echo "run_cpu_training.sh: RESUME=1 but $OUT/checkpoints holds no checkpoint to resume from." >&2
        exit 2
    fi
    RESUME_ARGS=(trainer.resume_mode=auto)
    START_STEP=$(cat "$OUT/checkpoints/latest_checkpointed_iteration.txt")
    # verl's file logger starts metrics.jsonl afresh: keep what the runs before logged (check_run.py reads both)
    if [ -f "$OUT/metrics.jsonl" ]; then
        cat "$OUT/metrics.jsonl" >> "$OUT/metrics.earlier.jsonl"
        rm "$OUT/metrics.jsonl"
    fi
else
    rm -rf "$OUT/model" "$OUT/data" "$OUT/checkpoints" "$OUT/gdpo" "$OUT"/metrics*.jsonl "$OUT/run.log" \
        "$OUT/tensorboard" "$OUT/hydra"
    echo "building the tiny model and the 8-question data in $OUT"
    "$PYTHON" -m gdpo_verl.cpu_run.tiny_model "$OUT/model" > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log" >&2; exit 1; }
    "$PYTHON" "$ROOT/scripts/prepare_data.py" --out "$OUT/data" \
        --local "deepscaler=$ROOT/gdpo_verl/data/cpu_training_math.jsonl" >> "$OUT/setup.log" 2>&1 \
        || { cat "$OUT/setup.log" >&2; exit 1; }
fi

TRAIN="$OUT/data/deepscaler_train.parquet"
# The GDPO keys: under gdpo-verl's packaged config as they are, under verl's own config added (+) with the estimator and
# the reward manager
case "${CONFIG:-gdpo}" in
    gdpo) ADD="" GDPO=() ;;
    verl) ADD="+" GDPO=(algorithm.adv_estimator=gdpo reward.reward_manager.name=gdpo_verl) ;;
    *) echo "run_cpu_training.sh: CONFIG must be gdpo or verl; got '$CONFIG'" >&2; exit 2 ;;
esac
if [ -n "${REWARD:-}" ]; then
    # the user's reward: a file (made absolute, as verl's reward workers load it) and its function
    FILE=${REWARD%%:*} NAME=compute_score
    case "$REWARD" in *:*) NAME=${REWARD#*:} ;; esac
    if [ ! -f "$FILE" ]; then
        echo "run_cpu_training.sh: REWARD=$REWARD: no file $FILE (give a Python file, and :name for a function" \
             "other than compute_score)" >&2
        exit 2
    fi
    FILE=$(cd "$(dirname "$FILE")" && pwd)/$(basename "$FILE")
    REWARD_ARGS=("reward.custom_reward_function.path=$FILE" "reward.custom_reward_function.name=$NAME")
else
    REWARD_ARGS=(
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"
        "+reward.custom_reward_function.reward_kwargs.max_length=8"
        "+reward.custom_reward_function.reward_kwargs.think=none"
    )
fi
TASK=(
    # GDPO on the reward's components (the paper's two math rewards by default); the per-step records feed check_run.py
    "${GDPO[@]}"
    "${ADD}algorithm.gdpo_reward_keys=[${REWARD_KEYS:-correct,length}]"
    "${ADD}algorithm.gdpo.dump_dir=$OUT/gdpo"
    "${REWARD_ARGS[@]}"
    # data: all 8 prompts x 4 responses of up to 16 tokens per step (8 groups: some reward varies in some group)
    "data.train_files=$TRAIN" "data.val_files=$TRAIN"
    data.train_batch_size=8 data.max_prompt_length=64 data.max_response_length=16
    # A large learning rate and no weight decay: every weight change comes from the GDPO policy gradient, and a
    # weight sync that did not reach vLLM shows in training/rollout_probs_diff_max.
    "actor_rollout_ref.model.path=$OUT/model"
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
    actor_rollout_ref.actor.optim.lr=1e-2 actor_rollout_ref.actor.optim.weight_decay=0.0
    actor_rollout_ref.actor.use_kl_loss=False
    actor_rollout_ref.rollout.n=4
    actor_rollout_ref.rollout.max_model_len=128 actor_rollout_ref.rollout.max_num_batched_tokens=512
    actor_rollout_ref.rollout.max_num_seqs=32 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16
    trainer.project_name=gdpo_cpu trainer.experiment_name=tiny
)
echo "training: verl's main_ppo with GDPO, $STEPS step(s) (TRAINER=${TRAINER:-sync}); its whole output: $OUT/run.log" \
     "(VERBOSE=1 shows it here)"
OUT="$OUT" STEPS="$STEPS" START_STEP="${START_STEP:-0}" bash "$ROOT/scripts/cpu_main_ppo.sh" "${TASK[@]}" "${RESUME_ARGS[@]}" "$@"
# the step lines were shown as each step ended (unless VERBOSE=1)
BRIEF=(--brief)
if [ "${VERBOSE:-0}" = 1 ]; then BRIEF=(); fi
"$PYTHON" -m gdpo_verl.cpu_run.check_run "$OUT" --steps "$STEPS" --trainer "${TRAINER:-sync}" \
    --resumed-from "${START_STEP:-0}" "${BRIEF[@]}"
