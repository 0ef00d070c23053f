#!/usr/bin/env bash
# The main job on its embedded default: a real two-step GDPO training run on the CPU. verl's main_ppo (V1
# trainer, Ray, FSDP2 actor, vLLM's CPU build for rollouts) trains a tiny model, built here, on 8 shipped math
# questions with the paper's two rewards (correct, length), then prints what each step learned and checks that
# the weights changed. About 2 minutes after the set-up, which takes 2 to 5 minutes and 4 GB the first time.
#
#   OUT=dir   outputs (default outputs/cpu_training): model, data, metrics.jsonl, gdpo/ records, checkpoints
#   STEPS=n   training steps (default 2)
#   REWARD=my_reward.py[:name]  your own reward function (REWARD_KEYS=correct,length: its components)
#   VERBOSE=1 verl's whole output on the terminal (it always goes to OUT/run.log)
# Extra arguments are hydra overrides for verl, e.g. actor_rollout_ref.rollout.n=8.
set -euo pipefail
if [ -n "${OUT:-}" ]; then  # a relative OUT is taken from where the script was started
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd)
    export OUT
fi
if [ -n "${REWARD:-}" ] && [ -f "${REWARD%%:*}" ]; then  # so is a relative REWARD
    REWARD="$(cd "$(dirname "${REWARD%%:*}")" && pwd)/$(basename "$REWARD")"
    export REWARD
fi
cd "$(dirname "$0")/.."
bash scripts/setup_cpu_training_env.sh
exec bash scripts/run_cpu_training.sh "$@"
