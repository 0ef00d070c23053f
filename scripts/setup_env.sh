#!/usr/bin/env bash
# Create (or update) the virtual environment .venv with verl 0.9.1 on CPU torch, and install gdpo-verl
# into it with its test tools. For the demo and the tests; GPU nodes: see docs/install.md.
#
#   VENV=path     where the environment lives (default .venv in the repository)
#   PYTHON=exe    interpreter that creates it (default python3; 3.10 or newer)
#   TORCH=spec    the torch requirement installed with verl (default torch==2.13.0)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch is pinned in the same command as verl: left to itself, pip resolves verl's torch to a CUDA build
# of several GB. Never install verl's extras here: they pin a CUDA torch.
"$VENV/bin/python" -m pip install --quiet "$TORCH" "verl==0.9.1" -e ".[test]"
echo "environment ready: $VENV"
