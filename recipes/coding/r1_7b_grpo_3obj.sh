#!/usr/bin/env bash
# GRPO, 3-obj (pass rate + conditioned length + bug): deepseek-ai/DeepSeek-R1-Distill-Qwen-7B on Eurus-2-RL-Data's code
# split, 500 steps (paper section 4.3). Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=grpo OBJECTIVES=3
knob MODEL deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
knob EXPERIMENT r1_7b_grpo_3obj
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${CODING[@]}" "$@"
