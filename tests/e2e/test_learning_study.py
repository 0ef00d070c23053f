"""scripts/learning_study.sh: bad requests are refused before anything starts; a tiny real study of each task, one
run each (the default task under GDPO for 3 steps, the first task under verl's GRPO for 2), writes summary.json,
curves.png and results.md that agree with the run's own metrics file. Which estimator learns better is not asserted
anywhere; the report over several estimators and seeds is tested on hand-written metrics
(tests/integration/scripts/test_learning_study_report.py), as the real runs write them here.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest

from tests.e2e.runs import PYTHON, ROOT

SCRIPT = ROOT / "scripts" / "learning_study.sh"


def study(out: Path, timeout: float, **knobs: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    env.update(OUT=str(out), CPU_TRAINING_VENV=str(PYTHON.parents[1]), **knobs)
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"ESTIMATORS": "gdpo,ppo"}, "unknown estimator(s) ['ppo'] in ESTIMATORS; choose from grpo, gdpo, grpo_no_std"),
        ({"SEEDS": " "}, "SEEDS is empty"),
        ({"SEEDS": "1,one"}, "SEEDS must be non-negative integers; got 'one'"),
        ({"STEPS": "0"}, "STEPS must be at least 1; got 0"),
        ({"ESTIMATORS": "gdpo,gdpo"}, "ESTIMATORS lists ['gdpo'] more than once"),
        ({"TASK": "poetry"}, "unknown TASK 'poetry'; choose from copy, conditioned"),
    ],
)
def test_a_bad_request_is_refused_before_anything_starts(tmp_path, knobs, message):
    out = tmp_path / "study"
    result = study(out, timeout=120, **knobs)
    assert result.returncode == 2
    assert message in result.stderr
    assert not out.exists()
    assert "environment ready" not in result.stdout  # refused before the set-up


def test_an_out_holding_another_study_is_left_alone(tmp_path):
    (tmp_path / "study.json").write_text('{"steps": 40}')
    result = study(tmp_path, timeout=120)
    assert result.returncode == 2
    assert "already holds an earlier study's files (study.json); nothing was started or overwritten" in result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["study.json"]
    assert (tmp_path / "study.json").read_text() == '{"steps": 40}'


def check_study(out: Path, result: subprocess.CompletedProcess, task: str, estimator: str, seed: int,
                steps: int, rewards: tuple[str, ...]) -> None:
    """A study of one run: its progress lines, and summary.json, curves.png and results.md agreeing with the run's
    metrics.jsonl and run.json."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for step in range(1, steps + 1):  # one progress line per step
        assert f"{estimator} seed {seed} step {step} of {steps}: {rewards[0]} " in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == steps and summary["seeds"] == [seed] and summary["task_name"] == task
    assert summary["reward_keys"] == list(rewards)
    assert "comparison" not in summary  # one seed: nothing to pair
    [run] = summary["runs"]
    assert (run["estimator"], run["seed"]) == (estimator, seed)
    name = f"{estimator}-seed{seed}"
    lines = (out / "runs" / name / "metrics.jsonl").read_text().splitlines()
    logged = {entry["step"]: entry["data"] for entry in map(json.loads, lines)}
    assert [step["step"] for step in run["steps"]] == sorted(logged) == list(range(1, steps + 1))
    for step in run["steps"]:
        data = logged[step["step"]]
        assert step["rewards"] == {key: data[f"gdpo/{key}/mean"] for key in rewards}
        assert step["distinct_adv_per_group"] == {
            "gdpo": data["gdpo/distinct_adv_per_group"], "grpo": data["gdpo/grpo_distinct_adv_per_group"]
        }
        assert step["grpo_collapsed_group_frac"] == data["gdpo/grpo_collapsed_group_frac"]
        assert step["seconds"] == data["timing_s/step"]
        # the score verl logs (and GRPO trains on) is the sum of the rewards
        assert sum(step["rewards"].values()) == pytest.approx(data["critic/score/mean"])

    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = (out / "results.md").read_text()
    final = run["steps"][-1]["rewards"]  # fewer steps than the final window: it is the last step
    label = {"grpo": "GRPO", "gdpo": "GDPO"}[estimator]
    row = next(line for line in results.splitlines() if line.startswith(f"| {label} |"))
    for key in rewards:
        assert f"{final[key]:.3f} [{final[key]:.3f}, {final[key]:.3f}]" in row
    first = run["steps"][0]["grpo_collapsed_group_frac"]
    collapsed = statistics.fmean(step["grpo_collapsed_group_frac"] for step in run["steps"])
    assert f"| {first:.0%} / {collapsed:.0%} |" in row
    wall = json.loads((out / "runs" / name / "run.json").read_text())["wall_seconds"]
    assert f"| {wall:.0f} s ({sum(step['seconds'] for step in run['steps']):.0f} s) |" in row


@pytest.mark.cpu_training
def test_a_tiny_study_of_the_default_task_writes_outputs_that_agree_with_the_runs_metrics(tmp_path):
    out = tmp_path / "study"
    result = study(out, timeout=1500, STEPS="3", SEEDS="7", ESTIMATORS="gdpo")
    check_study(out, result, "conditioned", "gdpo", 7, 3, ("correct", "length", "format"))


@pytest.mark.cpu_training
def test_the_first_task_still_runs_and_grpo_trains_on_the_summed_score(tmp_path):
    out = tmp_path / "study"
    result = study(out, timeout=1500, TASK="copy", STEPS="2", SEEDS="3", ESTIMATORS="grpo")
    check_study(out, result, "copy", "grpo", 3, 2, ("correct", "short", "format"))
