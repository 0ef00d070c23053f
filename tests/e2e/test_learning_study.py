"""scripts/learning_study.sh: bad requests are refused before anything starts; a tiny real study of the default
task (1 seed, GRPO and GDPO, 3 steps of verl's main_ppo each) writes summary.json, curves.png and results.md that
agree with the runs' own metrics files; the first task still runs. Which estimator learns better is not asserted
anywhere."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cpu_training import PYTHON, ROOT

SCRIPT = ROOT / "scripts" / "learning_study.sh"
REWARDS = ("correct", "length", "format")


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


@pytest.mark.cpu_training
def test_a_tiny_study_writes_outputs_that_agree_with_the_runs_metrics(tmp_path):
    out = tmp_path / "study"
    result = study(out, timeout=1500, STEPS="3", SEEDS="7", ESTIMATORS="grpo,gdpo")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # one progress line per run and step
    for estimator in ("grpo", "gdpo"):
        for step in (1, 2, 3):
            assert f"{estimator} seed 7 step {step}/3: correct " in result.stdout

    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["seeds"] == [7] and summary["task_name"] == "conditioned"
    assert "comparison" not in summary  # one seed: nothing to pair
    assert [(run["estimator"], run["seed"]) for run in summary["runs"]] == [("grpo", 7), ("gdpo", 7)]
    for run in summary["runs"]:
        lines = (out / "runs" / f"{run['estimator']}-seed7" / "metrics.jsonl").read_text().splitlines()
        logged = {entry["step"]: entry["data"] for entry in map(json.loads, lines)}
        assert [step["step"] for step in run["steps"]] == sorted(logged) == [1, 2, 3]
        for step in run["steps"]:
            data = logged[step["step"]]
            assert step["rewards"] == {key: data[f"gdpo/{key}/mean"] for key in REWARDS}
            assert step["distinct_adv_per_group"] == {
                "gdpo": data["gdpo/distinct_adv_per_group"], "grpo": data["gdpo/grpo_distinct_adv_per_group"]
            }
            assert step["grpo_collapsed_group_frac"] == data["gdpo/grpo_collapsed_group_frac"]
            assert step["seconds"] == data["timing_s/step"]
            # the score GRPO trained on is the sum of the three rewards
            assert sum(step["rewards"].values()) == pytest.approx(data["critic/score/mean"])

    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = (out / "results.md").read_text()
    for run in summary["runs"]:
        final = run["steps"][-1]["rewards"]  # 3 steps: the final window is the last step
        label = {"grpo": "GRPO", "gdpo": "GDPO"}[run["estimator"]]
        row = next(line for line in results.splitlines() if line.startswith(f"| {label} |"))
        for key in REWARDS:
            assert f"{final[key]:.3f} [{final[key]:.3f}, {final[key]:.3f}]" in row
        first = run["steps"][0]["grpo_collapsed_group_frac"]
        collapsed = statistics.fmean(step["grpo_collapsed_group_frac"] for step in run["steps"])
        assert f"| {first:.0%} / {collapsed:.0%} |" in row
        wall = json.loads((out / "runs" / f"{run['estimator']}-seed7" / "run.json").read_text())["wall_seconds"]
        assert f"| {wall:.0f} s ({sum(step['seconds'] for step in run['steps']):.0f} s) |" in row


@pytest.mark.cpu_training
def test_the_first_task_still_runs(tmp_path):
    out = tmp_path / "study"
    result = study(out, timeout=1500, TASK="copy", STEPS="2", SEEDS="3", ESTIMATORS="gdpo")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "gdpo seed 3 step 2/2: correct " in result.stdout and " short " in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task_name"] == "copy" and summary["reward_keys"] == ["correct", "short", "format"]
    logged = json.loads((out / "runs" / "gdpo-seed3" / "metrics.jsonl").read_text().splitlines()[-1])["data"]
    assert summary["runs"][0]["steps"][-1]["rewards"]["short"] == logged["gdpo/short/mean"]
