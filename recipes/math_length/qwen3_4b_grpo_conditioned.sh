#!/usr/bin/env bash
# GRPO, conditioned length reward (length pays only correct answers): Qwen/Qwen3-4B-Instruct-2507 on DeepScaleR, 500 steps (paper section 4.2).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=grpo CONDITIONED=True
knob MODEL Qwen/Qwen3-4B-Instruct-2507
knob THINK none
knob EXPERIMENT qwen3_4b_grpo_conditioned
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${MATH_LENGTH[@]}" "$@"
