#!/usr/bin/env bash
# GRPO, conditioned length reward (length pays only correct answers): Qwen/Qwen3-4B-Instruct-2507 on DeepScaleR, 500 steps (paper section 4.2).
# Knobs and DRY_RUN=1: see common.sh. Extra arguments are hydra overrides.
MODEL=${MODEL:-Qwen/Qwen3-4B-Instruct-2507}
ESTIMATOR=grpo
CONDITIONED=True
THINK=${THINK:-none}
EXPERIMENT=${EXPERIMENT:-qwen3_4b_grpo_conditioned}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe "$@"
