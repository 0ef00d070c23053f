#!/usr/bin/env bash
# GDPO on DeepSeek-R1-Distill-Qwen-7B with the plain length reward at length weights 0.75, 0.5 and 0.25
# (correctness weight 1.0): the paper's weight sweep (section 4.2), whose fourth point, weight 1.0, is
# r1_7b_gdpo.sh (r1_7b_grpo.sh for ESTIMATOR=grpo): run that once, not twice (WEIGHTS='1.0 0.75 0.5 0.25' runs all
# four here). Runs them one after the other, each in its own checkpoint directory; WEIGHTS='0.5 0.25' picks some;
# ESTIMATOR=grpo runs the same sweep for the baseline (the weights reach the summed score GRPO trains on). Knobs:
# see common.sh; with DRY_RUN=1 (../launch.sh) prints each composed config, separated by '---'.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
CONDITIONED=False
knob ESTIMATOR gdpo
knob MODEL deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
knob THINK required
knob TP 2
knob WEIGHTS "0.75 0.5 0.25"
EXPERIMENT=r1_7b_${ESTIMATOR}_sweep
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

separator=""
for LENGTH_WEIGHT in $WEIGHTS; do
    EXPERIMENT="r1_7b_${ESTIMATOR}_length_weight_${LENGTH_WEIGHT}"
    math_length_overrides
    if [ "${DRY_RUN:-0}" = 1 ]; then printf '%s' "$separator"; fi
    separator=$'---\n'
    launch "${MATH_LENGTH[@]}" "$@"
done
