"""check_run.py fails a run for each thing that can go wrong, on hand-written outputs (no training run)."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from gdpo_verl.tools import check_run

ADVANTAGES = [1.5, -0.5, -1.0, 0.0]


def write_run(out, *, metrics=None, advantages=ADVANTAGES, trained=None):
    """A finished one-step run as scripts/run_cpu_training.sh leaves it; keyword arguments spoil one part of it."""
    initial = {"a.weight": torch.zeros(2, 2), "b.weight": torch.ones(3)}
    trained = trained if trained is not None else {name: value + 0.01 for name, value in initial.items()}
    (out / "model").mkdir(parents=True)
    save_file(initial, out / "model" / "model.safetensors")
    shard = out / "checkpoints" / "global_step_1" / "actor"
    shard.mkdir(parents=True)
    torch.save(trained, shard / "model_world_size_1_rank_0.pt")
    data = {name: 0.5 for name in check_run.GDPO_METRICS}
    data.update({
        "critic/advantages/min": min(advantages),
        "critic/advantages/max": max(advantages),
        "training/rollout_probs_diff_max": 0.001,
        "timing_s/step": 1.0,
    })
    data.update(metrics or {})
    (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": data}) + "\n")
    (out / "gdpo").mkdir()
    (out / "gdpo" / "gdpo_steps.jsonl").write_text(json.dumps({"step": 1, "advantage": advantages}) + "\n")


def test_a_run_that_trained_passes(tmp_path):
    write_run(tmp_path)
    lines, problems = check_run.check(tmp_path, 1)
    assert problems == []
    assert lines[-1] == "weights: 2 of 2 tensors changed, largest change 0.0100"
    assert check_run.main([str(tmp_path), "--steps", "1"]) == 0


@pytest.mark.parametrize(
    ("spoil", "problem"),
    [
        ({"metrics": {"training/rollout_probs_diff_max": 0.15}}, "the weight sync did not reach the rollout server"),
        ({"advantages": [0.0, 0.0, 0.0, 0.0]}, "every GDPO advantage is 0"),
        (
            {"metrics": {"critic/advantages/max": 2.0}},
            "verl trained on advantages in [-1.000000, 2.000000], the estimator's record says [-1.000000, 1.500000]",
        ),
        (
            {"trained": {"a.weight": torch.zeros(2, 2), "b.weight": torch.ones(3) * 2}},
            "weights unchanged after 1 steps: ['a.weight']",
        ),
    ],
)
def test_each_failure_is_named(tmp_path, spoil, problem):
    write_run(tmp_path, **spoil)
    _, problems = check_run.check(tmp_path, 1)
    assert len(problems) == 1 and problem in problems[0]
    assert check_run.main([str(tmp_path), "--steps", "1"]) == 1


def test_a_run_without_the_plugin_metrics_or_steps_fails(tmp_path):
    write_run(tmp_path)
    metrics = json.loads((tmp_path / "metrics.jsonl").read_text())
    del metrics["data"]["gdpo/cancelled_group_frac"]
    (tmp_path / "metrics.jsonl").write_text(json.dumps(metrics) + "\n")
    _, problems = check_run.check(tmp_path, 2)
    assert problems == [
        "step 1: gdpo metrics missing: ['gdpo/cancelled_group_frac'] (the plugin's estimator did not run)",
        f"step 2: not in {tmp_path / 'metrics.jsonl'} (the run stopped before it)",
        f"no checkpoint for step 2 under {tmp_path / 'checkpoints'}",
    ]
