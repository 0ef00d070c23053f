#!/usr/bin/env bash
# GRPO without std (mean-centred only): Qwen/Qwen2.5-1.5B-Instruct on ToolRL's data, format and correctness rewards (paper section 4.1).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=grpo_no_std
knob MODEL Qwen/Qwen2.5-1.5B-Instruct
knob EXPERIMENT qwen2.5_1.5b_grpo_no_std
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${TOOL_CALLING[@]}" "$@"
