"""vLLM's CPU build, loaded and then reloaded with new weights the way verl's weight sync does it, on each GEMM
path vLLM can choose: the CPU run's piece (cpu_platform.keep_vllm_linear_weights_reloadable) must make generation use
the new weights whichever path this CPU would get, and vLLM's own dispatch must still be what needs it.

Each case runs tests/e2e/vllm_reload_probe.py in .venv-cpu-training (about 15 s): vLLM is in one process
(no engine-core process), so the capabilities the probe forces are what the model loader sees. A path this CPU
or this vLLM build cannot run is skipped with the reason.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.runs import PYTHON, ROOT

pytestmark = pytest.mark.cpu_training
PROBE = ROOT / "tests" / "e2e" / "vllm_reload_probe.py"
CANNOT_RUN = 3


def probe(tmp_path, gemm: str, dispatch: str) -> dict:
    if not PYTHON.is_file():
        pytest.fail(f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh")
    result = subprocess.run(
        [str(PYTHON), str(PROBE), str(tmp_path), "--gemm", gemm, "--dispatch", dispatch],
        capture_output=True, text=True, timeout=600,
    )
    if result.returncode == CANNOT_RUN:
        pytest.skip(f"the {gemm} path cannot run here: {json.loads(result.stdout.splitlines()[-1])['cannot_run']}")
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("gemm", ["fallback", "onednn", "sgl"])
def test_generation_uses_reloaded_weights_on_every_gemm_path(tmp_path, gemm):
    result = probe(tmp_path, gemm, "cpu-run")
    assert result["reload_error"] is None, (result["reload_error"], result["kernels"])
    # vLLM (bf16) agrees with transformers (float32) on the loaded weights before and on the new ones after;
    # the two sets of weights give log-probabilities some nats apart.
    assert result["old_vs_new"] > 1.0
    assert result["before_vs_old"] < 0.05 * result["old_vs_new"]
    assert result["after_vs_new"] < 0.05 * result["old_vs_new"]
    assert result["after_vs_old"] > 0.5 * result["old_vs_new"]


@pytest.mark.parametrize("gemm", ["onednn", "sgl"])
def test_vllm_own_dispatch_packs_weights_that_verl_cannot_reload(tmp_path, gemm):
    """Why the piece exists; when a vLLM release keeps these weights reloadable, this fails and the piece can go."""
    result = probe(tmp_path, gemm, "vllm")
    assert "torch linear (weight kept)" not in result["kernels"].values()
    assert result["reload_error"] is not None


def test_doctor_names_the_gemm_path_vllm_takes_on_this_cpu(tmp_path):
    kernels = set(probe(tmp_path, "native", "vllm")["kernels"].values())
    doctor = subprocess.run(
        [str(PYTHON), "-m", "gdpo_verl.tools.cli", "doctor", "--no-ray"], capture_output=True, text=True, timeout=600
    )
    line = next(line for line in doctor.stdout.splitlines() if "vLLM CPU GEMM" in line)
    assert line.startswith("OK") and "the CPU training run supports it" in line
    # the kernel vLLM used, by precedence: zentorch, then SGL (with oneDNN for large weights), oneDNN, torch
    taken = next(kernel for kernel in ("zentorch_linear_unary", "weight_packed_linear", "onednn_mm", "linear")
                 if kernel in kernels)
    named = {"zentorch_linear_unary": "zentorch", "weight_packed_linear": "SGL", "onednn_mm": "oneDNN",
             "linear": "torch's linear"}[taken]
    assert line.split(": ", 1)[1].startswith(named), (kernels, line)
