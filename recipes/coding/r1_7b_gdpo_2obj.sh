#!/usr/bin/env bash
# GDPO, 2-obj (pass rate + conditioned length): deepseek-ai/DeepSeek-R1-Distill-Qwen-7B on Eurus-2-RL-Data's code
# split, 500 steps (paper section 4.3). Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=gdpo OBJECTIVES=2
knob MODEL deepseek-ai/DeepSeek-R1-Distill-Qwen-7B
knob EXPERIMENT r1_7b_gdpo_2obj
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${CODING[@]}" "$@"
