#!/usr/bin/env bash
# GDPO on DeepSeek-R1-Distill-Qwen-7B with the plain length reward at length weights 1.0, 0.75, 0.5 and
# 0.25 (correctness weight 1.0): the paper's weight sweep (section 4.2). Runs them one after the other;
# WEIGHTS='0.5 0.25' picks some. With DRY_RUN=1 prints each composed config, separated by '---'.
MODEL=${MODEL:-deepseek-ai/DeepSeek-R1-Distill-Qwen-7B}
ESTIMATOR=gdpo
CONDITIONED=False
THINK=${THINK:-required}
TP=${TP:-2}
WEIGHTS=${WEIGHTS:-1.0 0.75 0.5 0.25}
EXPERIMENT=r1_7b_gdpo_sweep
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

first=1
for LENGTH_WEIGHT in $WEIGHTS; do
    EXPERIMENT="r1_7b_gdpo_length_weight_${LENGTH_WEIGHT}"
    CHECKPOINT_DIR="$HOME/checkpoints/$PROJECT/$EXPERIMENT"
    if [ "${DRY_RUN:-0}" = 1 ] && [ $first = 0 ]; then echo '---'; fi
    first=0
    run_recipe "$@"
done
