#!/usr/bin/env bash
# GRPO, plain length reward: Qwen/Qwen3-4B-Instruct-2507 on DeepScaleR, 500 steps (paper section 4.2).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=grpo CONDITIONED=False
knob MODEL Qwen/Qwen3-4B-Instruct-2507
knob THINK none
knob EXPERIMENT qwen3_4b_grpo
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${MATH_LENGTH[@]}" "$@"
