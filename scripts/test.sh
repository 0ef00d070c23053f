#!/usr/bin/env bash
# Set up .venv (scripts/setup_env.sh) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
exec "$VENV/bin/python" -m pytest -q "$@"
