#!/usr/bin/env bash
# A GRPO-vs-GDPO learning study on the CPU (docs/learning-study.md): verl's real main_ppo, the CPU set-up of
# scripts/train_cpu.sh, one tiny task with three rewards (correct, short, format), each estimator over several
# seeds with the same data and budget. Writes OUT/summary.json, OUT/curves.png and OUT/results.md; each run's
# verl metrics and log stay in OUT/runs/<estimator>-seed<seed>/. About 20 minutes on 2 cores by default.
#
#   STEPS=n            training steps per run (default 40)
#   SEEDS=list         seeds, e.g. 1,2,3 (default 1,2,3): the model's initial weights and the sampling
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
REQUEST=(--out "$OUT" --steps "${STEPS:-40}" --seeds "${SEEDS:-1,2,3}" --estimators "${ESTIMATORS:-grpo,gdpo,grpo_no_std}")
# The request is checked before the environment is set up and before anything is written.
CHECK=python3
if [ -x "$PYTHON" ]; then CHECK=$PYTHON; fi
"$CHECK" scripts/learning_study.py run "${REQUEST[@]}" --check-only "$@"
bash scripts/setup_cpu_training_env.sh
exec "$PYTHON" scripts/learning_study.py run "${REQUEST[@]}" "$@"
