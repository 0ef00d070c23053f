#!/usr/bin/env bash
# GDPO, conditioned length reward (length pays only correct answers): deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B on DeepScaleR, 500 steps (paper section 4.2).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=gdpo CONDITIONED=True
knob MODEL deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B
knob THINK required
knob EXPERIMENT r1_1.5b_gdpo_conditioned
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${MATH_LENGTH[@]}" "$@"
