"""scripts/bench_advantage.py runs and prints its table (timings are its output, never asserted here)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "bench_advantage.py"


def bench(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=300)


def test_benchmark_prints_one_row_per_cell_for_all_three_methods():
    result = bench("--batch-sizes", "64,128", "--length", "16", "--rewards", "2,3", "--repeats", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "verl builtin gdpo ms" in lines[1] and "verl grpo_vectorized ms" in lines[1]
    rows = [line.split("|") for line in lines[3:]]
    assert [(row[0].split()[0], row[0].split()[1]) for row in rows] == [("64", "2"), ("64", "3"), ("128", "2"), ("128", "3")]
    assert all(row[4].strip().endswith("x") for row in rows)
    assert "metrics ms" in lines[1] and all(row[-3].strip().endswith("%") for row in rows)
    assert "every option/grpo_vec" in lines[1] and all(row[-1].strip().endswith("x") for row in rows)


def test_benchmark_rejects_bad_sizes_with_exit_code_2():
    result = bench("--batch-sizes", "8k")
    assert result.returncode == 2
    assert "expected comma-separated integers" in result.stderr


def test_v1_stage_mode_times_verls_stage_for_gdpo_and_grpo_and_checks_what_it_wrote():
    # starts its own local Ray cluster and TransferQueue, like verl's trainer process
    result = bench("--v1-stage", "--batch-sizes", "64", "--length", "16", "--repeats", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    header = next(line for line in result.stdout.splitlines() if "gdpo ms" in line)
    assert "grpo ms" in header and "gdpo/grpo" in header
    row = next(line for line in result.stdout.splitlines() if line.split("|")[0].split() == ["64", "3"])
    assert row.split("|")[-1].strip().endswith("x")


def test_v1_stage_mode_is_refused_on_cuda_with_exit_code_2():
    result = bench("--v1-stage", "--device", "cuda")
    assert result.returncode == 2
