#!/usr/bin/env bash
# The test suite. Extra arguments go to pytest (the main run).
#
# 1. tests/unit (the core and the reward functions) in .venv-unit: an environment holding only torch, numpy,
#    pytest, hypothesis and math-verify, with gdpo-verl installed without its dependencies. This proves that
#    the math and the rewards need none of verl, Ray, TransferQueue, hydra, omegaconf or vLLM.
# 2. Every other test in .venv (scripts/setup_env.sh), with .venv-cpu-training (scripts/setup_cpu_training_env.sh)
#    for the CPU training runs in tests/e2e. tests/unit, which step 1 ran, is left out of this run unless the
#    arguments name tests (a path under tests/). vLLM's CPU build has wheels for Linux x86_64 only; elsewhere those
#    runs are left out, and this script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

UNIT_VENV=${UNIT_VENV:-.venv-unit}
if [ ! -x "$UNIT_VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$UNIT_VENV"
fi
# torch pinned, so pip takes the CPU build (see scripts/setup_env.sh)
"$UNIT_VENV/bin/python" -m pip install --quiet "torch==2.13.0" numpy pytest hypothesis "math-verify>=0.9"
"$UNIT_VENV/bin/python" -m pip install --quiet --no-deps -e .
"$UNIT_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit

bash scripts/setup_env.sh
VENV=${VENV:-.venv}
# tests/unit ran in step 1: left out here unless the arguments name tests to run (a path under tests/)
NAMES_TESTS=0
for argument in "$@"; do
    case "$argument" in tests/* | ./tests/*) NAMES_TESTS=1 ;; esac
done
if [ "$NAMES_TESTS" = 0 ]; then
    set -- --ignore=tests/unit "$@"
fi
if [ "$(uname -s)/$(uname -m)" = "Linux/x86_64" ]; then
    bash scripts/setup_cpu_training_env.sh
    exec "$VENV/bin/python" -m pytest -q "$@"
fi
echo "test.sh: $(uname -s)/$(uname -m) has no CPU build of vLLM; leaving out the CPU training run (tests/e2e)." >&2
exec "$VENV/bin/python" -m pytest -q -m "not cpu_training" "$@"
