#!/usr/bin/env bash
# GRPO, plain length reward: deepseek-ai/DeepSeek-R1-Distill-Qwen-7B on DeepScaleR, 500 steps (paper section 4.2).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=grpo CONDITIONED=False
knob MODEL deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
knob THINK required
knob TP 2
knob EXPERIMENT r1_7b_grpo
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${MATH_LENGTH[@]}" "$@"
