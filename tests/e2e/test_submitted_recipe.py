"""A recipe submitted to a Ray cluster with recipes/cluster/submit.sh and its default upload (the checkout as the job's
working directory, which Ray keeps in a temporary copy), as a GPU user submits one: the run trains, and its curves and
checkpoints land under the TENSORBOARD_DIR and CHECKPOINT_DIR roots set in the submitting shell, in the run's own
directories, where ``gdpo-verl plot`` reads them afterwards. Not in Ray's copy of the checkout, where verl's relative
``tensorboard_log/`` went.

The cluster is a local Ray head started with recipes/cluster/head.sh in the CPU training environment, with the CPU
platform's environment that every process of a CPU run needs (scripts/cpu_main_ppo.sh) and one placeholder GPU; the
recipe is tests/fixtures/cpu_recipe/tiny_gdpo.sh: recipes/launch.sh with the CPU run's tiny task."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.runs import PYTHON, ROOT
from tests.ray_cluster import free_port, stop_cluster

pytestmark = pytest.mark.cpu_training

RECIPE = "tests/fixtures/cpu_recipe/tiny_gdpo.sh"
# what scripts/cpu_main_ppo.sh exports for every process of a CPU run (it says why each), here for every process
# the head's raylet starts: the job's driver and its actors
CPU_PLATFORM = {"VERL_USE_EXTERNAL_MODULES": "gdpo_verl.verl_adapter.for_cpu_run.cpu_platform", "VERL_PLATFORM": "cpu",
                "VERL_ENGINE_DEVICE": "cuda", "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": "1",
                "TORCH_COMPILE_DISABLE": "1", "RAY_worker_niceness": "0"}


def test_a_submitted_recipe_trains_and_its_curves_and_checkpoints_land_under_the_roots_set_at_submission(tmp_path):
    if not PYTHON.is_file():
        pytest.fail(f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh")
    model, data = tmp_path / "model", tmp_path / "data"
    subprocess.run([str(PYTHON), "-m", "gdpo_verl.cpu_run.tiny_model", str(model)], check=True, capture_output=True,
                   timeout=600)
    subprocess.run([str(PYTHON), str(ROOT / "scripts" / "prepare_data.py"), "--out", str(data), "--local",
                    f"deepscaler={ROOT / 'gdpo_verl' / 'data' / 'cpu_training_math.jsonl'}"], check=True,
                   capture_output=True, timeout=600)
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    base = {**inherited, "HOME": str(tmp_path), "PATH": f"{PYTHON.parent}{os.pathsep}{os.environ['PATH']}"}
    ray_port, dashboard_port = free_port(), free_port()
    head = {**base, **CPU_PLATFORM, "HEAD_IP": "127.0.0.1", "RAY_PORT": str(ray_port), "DASHBOARD_HOST": "127.0.0.1",
            "DASHBOARD_PORT": str(dashboard_port), "NUM_CPUS": "8", "NUM_GPUS": "1"}
    checkpoints, curves = tmp_path / "ckpt", tmp_path / "tb"
    before = set(ROOT.glob("tensorboard_log"))
    try:
        started = subprocess.run(["bash", str(ROOT / "recipes" / "cluster" / "head.sh"),
                                  f"--dashboard-agent-listen-port={free_port()}"],
                                 capture_output=True, text=True, env=head, timeout=300)
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        submit = {**base, "RAY_ADDRESS": f"http://127.0.0.1:{dashboard_port}", "MODEL": str(model),
                  "TRAIN_FILE": str(data / "deepscaler_train.parquet"), "CHECKPOINT_DIR": str(checkpoints),
                  "TENSORBOARD_DIR": str(curves)}
        result = subprocess.run(["bash", "recipes/cluster/submit.sh", RECIPE], cwd=ROOT, capture_output=True,
                                text=True, env=submit, timeout=1500)
    finally:
        stop_cluster(ray_port)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "succeeded" in output  # Ray's "Job 'raysubmit_...' succeeded"
    run = curves / "gdpo_submitted" / "tiny"
    assert list(run.glob("events.out.tfevents*")), f"no tensorboard events in {run}: {output[-3000:]}"
    saved = checkpoints / "gdpo_submitted" / "tiny"
    assert (saved / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert json.loads((saved / "gdpo_verl_run.json").read_text()) == {"project": "gdpo_submitted",
                                                                       "experiment": "tiny"}
    assert set(ROOT.glob("tensorboard_log")) == before  # nothing in the checkout either
    plotted = subprocess.run([str(PYTHON), "-m", "gdpo_verl.tools.cli", "plot", str(run), "--json",
                              "--out", str(tmp_path / "curves.png")], capture_output=True, text=True, timeout=600)
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    drawn = json.loads(plotted.stdout)["tiny"]  # {tag: [[step, value], ...]} of the run, labelled by its directory
    assert (tmp_path / "curves.png").is_file()
    assert drawn and all([step for step, _ in points] == [1, 2] for points in drawn.values()), plotted.stdout[:2000]
