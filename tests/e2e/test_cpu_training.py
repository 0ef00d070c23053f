"""Two steps of real GDPO training on the CPU, through verl's own main_ppo.

Nothing of verl is mocked: its V1 trainer, Ray, TransferQueue, the FSDP2 actor, the vLLM rollout server (vLLM's
CPU build), the bucketed weight sync and the checkpoint all run for real, with this plugin's estimator,
reward manager and math rewards. What lets verl run on a CPU at all is tests/e2e/verl_cpu.py (a verl platform
for the CPU, added through verl's platform registry) and the environment of
scripts/setup_cpu_training_env.sh; tests/e2e/README.md lists every such piece.

The run takes about 3 minutes on 2 cores. It needs .venv-cpu-training (scripts/test.sh creates it);
``pytest -m "not cpu_training"`` leaves it out.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e import check_run

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / os.environ.get("CPU_TRAINING_VENV", ".venv-cpu-training")  # as scripts/setup_cpu_training_env.sh
PYTHON = Path(os.environ.get("CPU_TRAINING_PYTHON", VENV / "bin" / "python"))
STEPS = 2

pytestmark = pytest.mark.cpu_training


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not PYTHON.is_file():
        pytest.fail(
            f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh, "
            "or leave this test out with -m 'not cpu_training'"
        )
    out = tmp_path_factory.mktemp("cpu_training")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    result = subprocess.run(
        ["bash", str(ROOT / "tests" / "e2e" / "run_cpu_training.sh")],
        env={**env, "CPU_TRAINING_PYTHON": str(PYTHON), "OUT": str(out), "STEPS": str(STEPS)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    log = result.stdout + result.stderr
    (out / "run.log").write_text(log)
    assert result.returncode == 0, f"the run failed (log: {out / 'run.log'}):\n{log[-6000:]}"
    return out, result.stdout


def test_both_steps_train_with_gdpo_and_change_the_weights(run):
    out, stdout = run
    lines, problems = check_run.check(out, STEPS)
    assert problems == []
    assert "GDPO CPU training run: OK (2 steps" in stdout
    assert lines[-1].startswith("weights: 21 of 21 tensors changed")


def test_each_step_scored_every_response_with_both_rewards(run):
    out, _ = run
    records = check_run.step_records(out)
    assert sorted(records) == [1, 2]
    for record in records.values():
        # 8 prompts x 4 responses; groups of 4 by uid; rewards from gdpo_verl.rewards.math_length
        assert len(record["uid"]) == 32 and len(set(record["uid"])) == 8
        assert set(record["rewards"]) == {"correct", "length"}
        assert all(value in (0.0, 1.0) for values in record["rewards"].values() for value in values)
        # the length reward is 1 exactly for responses of at most 8 tokens (max_length=8)
        assert record["rewards"]["length"] == [float(n <= 8) for n in record["response_length"]]


def test_the_trainer_logged_the_plugin_metrics_next_to_its_own(run):
    out, _ = run
    metrics = check_run.step_metrics(out)
    for step in (1, 2):
        data = metrics[step]
        assert data["training/global_step"] == step
        assert all(name in data for name in check_run.GDPO_METRICS)
        # the plugin's per-reward means agree with verl's reward log of the same step
        assert data["gdpo/correct/mean"] + data["gdpo/length/mean"] == pytest.approx(data["critic/score/mean"])
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
