#!/usr/bin/env bash
# BFCL's environment (.venv-bfcl, or $BFCL_VENV): the Berkeley Function Calling Leaderboard's package, bfcl-eval, at
# the last release whose data and scoring are BFCL v3's (gdpo_verl/experiments/bfcl_execution.py, BFCL_RELEASE), with
# gdpo-verl installed without its dependencies (the evaluation's prompt and scoring steps need neither verl nor torch).
# bfcl-eval pins numpy 1.26.4, which verl's stack cannot take: hence an environment of its own.
#
# bfcl-eval's checker imports every model handler of BFCL, among them qwen-agent, which imports soundfile without
# declaring it: soundfile is added here.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${BFCL_VENV:-.venv-bfcl}
RELEASE=$(sed -n 's/^BFCL_RELEASE = "\(.*\)"$/\1/p' gdpo_verl/experiments/bfcl_execution.py)
if [ -z "$RELEASE" ]; then
    echo "setup_bfcl_env.sh: no BFCL_RELEASE in gdpo_verl/experiments/bfcl_execution.py" >&2
    exit 2
fi

source scripts/stamped_env.sh
if env_is_set_up "$VENV" scripts/setup_bfcl_env.sh gdpo_verl/experiments/bfcl_execution.py; then
    echo "environment ready: $VENV (already set up by this script)"
    exit 0
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "bfcl-eval==$RELEASE" "soundfile" "pytest>=8"
"$VENV/bin/python" -m pip install --quiet --no-deps -e .
"$VENV/bin/python" -c "import gdpo_verl.experiments.bfcl as b; b.bfcl(); print('bfcl-eval', b.BFCL_RELEASE, 'imports')"
mark_set_up "$VENV" scripts/setup_bfcl_env.sh gdpo_verl/experiments/bfcl_execution.py
echo "environment ready: $VENV"
