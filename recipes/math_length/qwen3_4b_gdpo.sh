#!/usr/bin/env bash
# GDPO, plain length reward: Qwen/Qwen3-4B-Instruct-2507 on DeepScaleR, 500 steps (paper section 4.2).
# Knobs and DRY_RUN=1: see common.sh. Extra arguments are hydra overrides.
MODEL=${MODEL:-Qwen/Qwen3-4B-Instruct-2507}
ESTIMATOR=gdpo
CONDITIONED=False
THINK=${THINK:-none}
EXPERIMENT=${EXPERIMENT:-qwen3_4b_gdpo}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
run_recipe "$@"
