#!/usr/bin/env bash
# Set up .venv (scripts/setup_env.sh) and .venv-cpu-training (scripts/setup_cpu_training_env.sh, for the
# two-step training run in tests/e2e), then run the test suite. Extra arguments go to pytest.
# The training run needs vLLM's CPU build, which has wheels for Linux x86_64 only; elsewhere it is left
# out, and this script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
if [ "$(uname -s)/$(uname -m)" = "Linux/x86_64" ]; then
    bash scripts/setup_cpu_training_env.sh
    exec "$VENV/bin/python" -m pytest -q "$@"
fi
echo "test.sh: $(uname -s)/$(uname -m) has no CPU build of vLLM; leaving out the CPU training run (tests/e2e)." >&2
exec "$VENV/bin/python" -m pytest -q -m "not cpu_training" "$@"
