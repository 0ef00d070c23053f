#!/usr/bin/env bash
# GRPO, conditioned length reward (length pays only correct answers): deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B on DeepScaleR, 500 steps (paper section 4.2).
# Knobs and DRY_RUN=1: see common.sh. Extra arguments are hydra overrides.
MODEL=${MODEL:-deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B}
ESTIMATOR=grpo
CONDITIONED=True
THINK=${THINK:-required}
EXPERIMENT=${EXPERIMENT:-r1_1.5b_grpo_conditioned}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe "$@"
