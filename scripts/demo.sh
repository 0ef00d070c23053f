#!/usr/bin/env bash
# Set up .venv (scripts/setup_env.sh) and run the main job on its embedded default: `gdpo-verl demo`,
# a shipped multi-reward rollout batch through verl's real advantage stage, GRPO next to GDPO.
# Extra arguments go to `gdpo-verl demo` (for example --rollouts my_rollouts.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
exec "$VENV/bin/gdpo-verl" demo "$@"
