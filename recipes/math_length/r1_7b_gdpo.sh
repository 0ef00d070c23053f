#!/usr/bin/env bash
# GDPO, plain length reward: deepseek-ai/DeepSeek-R1-Distill-Qwen-7B on DeepScaleR, 500 steps (paper section 4.2).
# Knobs and DRY_RUN=1: see common.sh. Extra arguments are hydra overrides.
MODEL=${MODEL:-deepseek-ai/DeepSeek-R1-Distill-Qwen-7B}
ESTIMATOR=gdpo
CONDITIONED=False
THINK=${THINK:-required}
TP=${TP:-2}
EXPERIMENT=${EXPERIMENT:-r1_7b_gdpo}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe "$@"
