#!/usr/bin/env bash
# A GRPO-vs-GDPO learning study on the CPU (docs/learning-study.md): verl's real main_ppo, the CPU set-up of
# scripts/train_cpu.sh, a tiny task with three rewards, each estimator over several seeds with the same data and
# budget. Writes OUT/summary.json, OUT/curves.png and OUT/results.md (with GDPO - GRPO paired by seed and its
# bootstrap interval); each run's verl metrics and log stay in OUT/runs/<estimator>-seed<seed>/. About 30 minutes
# on 2 cores by default.
#
#   TASK=name          conditioned (the default: correct, length only when correct, format, from a warm start) or
#                      copy (the first study's task: correct, short, format)
#   STEPS=n            training steps per run (default: the task's, conditioned 20, copy 40)
#   SEEDS=list         seeds, e.g. 1,2,3 (default 1,2,3,4,5): the model's initial weights (and warm start) and the
#                      sampling
#   ESTIMATORS=list    from grpo, gdpo, grpo_no_std (default all three)
#   OUT=dir            a new or empty folder (default outputs/learning_study)
#   STALL_TIMEOUT=s    stop a run when no step finishes for s seconds (default 300)
# Extra arguments are hydra overrides for every run, e.g. actor_rollout_ref.actor.optim.lr=5e-3.
set -euo pipefail
OUT=${OUT:-outputs/learning_study}
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")  # a relative OUT is taken from where the script was started
cd "$(dirname "$0")/.."
PYTHON=${CPU_TRAINING_VENV:-.venv-cpu-training}/bin/python
REQUEST=(--out "$OUT" --task "${TASK:-conditioned}" --seeds "${SEEDS:-1,2,3,4,5}"
         --estimators "${ESTIMATORS:-grpo,gdpo,grpo_no_std}")
if [ -n "${STEPS:-}" ]; then REQUEST+=(--steps "$STEPS"); fi
# The request is checked before the environment is set up and before anything is written.
CHECK=python3
if [ -x "$PYTHON" ]; then CHECK=$PYTHON; fi
"$CHECK" scripts/learning_study.py run "${REQUEST[@]}" --check-only "$@"
bash scripts/setup_cpu_training_env.sh
exec "$PYTHON" scripts/learning_study.py run "${REQUEST[@]}" "$@"
