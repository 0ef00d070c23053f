"""scripts/learning_study.py report: summary.json, curves.png and results.md from hand-written run metrics
(the real runs are in tests/e2e/test_learning_study.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "learning_study.py"
REWARDS = ("correct", "short", "format")


def write_study(out: Path, finals: dict, steps: int = 4) -> None:
    """finals: {(estimator, seed): correct value of every step}; short 1.0, format 0.5 throughout."""
    seeds = sorted({seed for _, seed in finals})
    estimators = list(dict.fromkeys(estimator for estimator, _ in finals))
    (out / "study.json").write_text(json.dumps({"task": "t", "steps": steps, "seeds": seeds, "estimators": estimators}))
    for (estimator, seed), correct in finals.items():
        run = out / "runs" / f"{estimator}-seed{seed}"
        run.mkdir(parents=True)
        lines = []
        for step in range(1, steps + 1):
            data = {"gdpo/correct/mean": correct, "gdpo/short/mean": 1.0, "gdpo/format/mean": 0.5,
                    "gdpo/distinct_adv_per_group": 3.0, "gdpo/grpo_distinct_adv_per_group": 2.0,
                    "gdpo/grpo_collapsed_group_frac": 0.25 * step, "timing_s/step": 2.0, "actor/loss": 0.1}
            lines.append(json.dumps({"step": step, "data": data}))
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        (run / "run.json").write_text(json.dumps({"wall_seconds": 100.0 + seed}))


def report(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "report", "--out", str(out)], capture_output=True, text=True,
                          timeout=120)


def test_results_give_the_median_and_range_over_seeds_of_the_final_window(tmp_path):
    write_study(tmp_path, {("grpo", 1): 0.1, ("grpo", 2): 0.3, ("grpo", 3): 0.2, ("gdpo", 1): 0.6, ("gdpo", 2): 0.4,
                           ("gdpo", 3): 0.5})
    result = report(tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(run["estimator"], run["seed"]) for run in summary["runs"]] == [
        ("grpo", 1), ("grpo", 2), ("grpo", 3), ("gdpo", 1), ("gdpo", 2), ("gdpo", 3)]
    assert summary["runs"][0]["steps"][1] == {
        "step": 2, "rewards": {"correct": 0.1, "short": 1.0, "format": 0.5},
        "distinct_adv_per_group": {"gdpo": 3.0, "grpo": 2.0}, "grpo_collapsed_group_frac": 0.5, "seconds": 2.0}
    rows = {line.split("|")[1].strip(): line for line in (tmp_path / "results.md").read_text().splitlines()
            if line.startswith("| GRPO |") or line.startswith("| GDPO |")}
    assert "| 0.200 [0.100, 0.300] | 1.000 [1.000, 1.000] | 0.500 [0.500, 0.500] | 1.700 [1.600, 1.800] |" in rows["GRPO"]
    assert "| 0.500 [0.400, 0.600] |" in rows["GDPO"]
    # collapse 0.25 at step 1 (the first quarter), 0.25..1.0 averaged; wall 101..103 s, 4 steps of 2 s
    assert "| 25% / 62% | 102 s (8 s) |" in rows["GDPO"]
    assert "All 6 runs: 10.2 minutes." in (tmp_path / "results.md").read_text()
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_that_stopped_early_is_named(tmp_path):
    write_study(tmp_path, {("gdpo", 1): 0.5})
    metrics = tmp_path / "runs" / "gdpo-seed1" / "metrics.jsonl"
    metrics.write_text("\n".join(metrics.read_text().splitlines()[:2]) + "\n")
    result = report(tmp_path)
    assert result.returncode == 2
    assert f"{metrics} holds steps [1, 2], not 1..4" in result.stderr
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize("missing", ["runs/gdpo-seed1/metrics.jsonl", "runs/gdpo-seed1/run.json", "study.json"])
def test_missing_inputs_are_named(tmp_path, missing):
    write_study(tmp_path, {("gdpo", 1): 0.5})
    target = tmp_path / missing
    target.unlink()
    result = report(tmp_path)
    assert result.returncode == 2
    assert str(target) in result.stderr


def test_gdpo_minus_grpo_is_paired_by_seed_with_its_bootstrap_interval_and_the_decision(tmp_path):
    grpo = {1: 0.1, 2: 0.3, 3: 0.2, 4: 0.2, 5: 0.4}
    gdpo = {1: 0.6, 2: 0.4, 3: 0.5, 4: 0.5, 5: 0.7}
    write_study(tmp_path, {**{("grpo", s): v for s, v in grpo.items()}, **{("gdpo", s): v for s, v in gdpo.items()}})
    assert report(tmp_path).returncode == 0
    comparison = json.loads((tmp_path / "summary.json").read_text())["comparison"]
    assert comparison["seeds"] == [1, 2, 3, 4, 5]
    assert comparison["differences"] == pytest.approx([0.5, 0.1, 0.3, 0.3, 0.3])
    assert comparison["mean"] == pytest.approx(0.3)
    low, high = comparison["interval"]
    # resampled means of positive differences lie between the smallest and the largest
    assert 0.1 <= low < 0.3 < high <= 0.5 and comparison["decision"] == "GDPO better"
    results = (tmp_path / "results.md").read_text()
    assert "seed 1: +0.500, seed 2: +0.100, seed 3: +0.300, seed 4: +0.300, seed 5: +0.300): mean +0.300" in results
    assert f"[{low:+.3f}, {high:+.3f}]" in results and "**GDPO better**" in results
    # the other rewards: the same paired difference, reported without a decision
    assert set(comparison["secondary"]) == {"short", "format"}
    assert comparison["secondary"]["short"]["differences"] == [0.0] * 5
    assert "decision" not in comparison["secondary"]["short"]
    assert "Reported, not decided on: GDPO - GRPO, mean of short over all 4 step(s): mean +0.000" in results


def test_differences_of_both_signs_show_no_difference(tmp_path):
    grpo = {1: 0.5, 2: 0.3, 3: 0.4, 4: 0.6, 5: 0.2}
    gdpo = {1: 0.4, 2: 0.45, 3: 0.35, 4: 0.7, 5: 0.25}
    write_study(tmp_path, {**{("grpo", s): v for s, v in grpo.items()}, **{("gdpo", s): v for s, v in gdpo.items()}})
    assert report(tmp_path).returncode == 0
    comparison = json.loads((tmp_path / "summary.json").read_text())["comparison"]
    assert comparison["interval"][0] < 0 < comparison["interval"][1]
    assert comparison["decision"] == "no difference shown"


def test_fewer_seeds_than_the_design_give_an_interval_but_no_decision(tmp_path):
    # three positive differences: the interval lies above 0, but 3 seeds are too few to decide on
    write_study(tmp_path, {("grpo", 1): 0.1, ("grpo", 2): 0.3, ("grpo", 3): 0.2, ("gdpo", 1): 0.6, ("gdpo", 2): 0.4,
                           ("gdpo", 3): 0.5})
    assert report(tmp_path).returncode == 0
    comparison = json.loads((tmp_path / "summary.json").read_text())["comparison"]
    assert comparison["interval"][0] > 0
    assert comparison["decision"] == "too few seeds to decide (the design asks for 5)"


def test_one_seed_or_one_estimator_gives_no_comparison(tmp_path):
    write_study(tmp_path, {("grpo", 1): 0.5, ("gdpo", 1): 0.4})
    assert report(tmp_path).returncode == 0
    assert "comparison" not in json.loads((tmp_path / "summary.json").read_text())
    assert "GDPO - GRPO" not in (tmp_path / "results.md").read_text()


def test_a_study_of_the_second_task_reads_its_own_rewards(tmp_path):
    write_study(tmp_path, {("gdpo", 1): 0.5})
    study = json.loads((tmp_path / "study.json").read_text())
    (tmp_path / "study.json").write_text(json.dumps({**study, "task_name": "conditioned"}))
    metrics = tmp_path / "runs" / "gdpo-seed1" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace("gdpo/short/mean", "gdpo/length/mean"))
    assert report(tmp_path).returncode == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["reward_keys"] == ["correct", "length", "format"]
    assert summary["runs"][0]["steps"][0]["rewards"] == {"correct": 0.5, "length": 1.0, "format": 0.5}
    assert "| estimator | correct | length | format | sum |" in (tmp_path / "results.md").read_text()
    (tmp_path / "study.json").write_text(json.dumps({**study, "task_name": "poetry"}))
    result = report(tmp_path)
    assert result.returncode == 2 and "names task 'poetry', which is not one of copy, conditioned" in result.stderr


def test_the_request_is_checked_without_numpy(tmp_path):
    # scripts/learning_study.sh checks the request with the machine's python3 before it sets up the environment;
    # -S leaves out site-packages (numpy, torch, gdpo-verl's dependencies), as on a fresh machine
    check = [sys.executable, "-S", str(SCRIPT), "run", "--out", str(tmp_path / "study"), "--seeds", "1",
             "--estimators", "gdpo", "--check-only"]
    assert subprocess.run(check, capture_output=True, text=True, timeout=60).returncode == 0
    refused = subprocess.run([*check, "--task", "poetry"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "unknown TASK 'poetry'" in refused.stderr
