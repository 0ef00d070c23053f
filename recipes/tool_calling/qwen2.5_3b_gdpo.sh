#!/usr/bin/env bash
# GDPO: Qwen/Qwen2.5-3B-Instruct on ToolRL's data, format and correctness rewards (paper section 4.1).
# Knobs: see common.sh; DRY_RUN=1 and LIST_KNOBS=1: see ../launch.sh. Extra arguments are hydra overrides.
source "$(dirname "${BASH_SOURCE[0]}")/../launch.sh"
ESTIMATOR=gdpo
knob MODEL Qwen/Qwen2.5-3B-Instruct
knob EXPERIMENT qwen2.5_3b_gdpo
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
launch "${TOOL_CALLING[@]}" "$@"
