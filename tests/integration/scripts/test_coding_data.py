"""scripts/prepare_coding_data.py on a fixture in Eurus-2-RL-Data's layout (tests/fixtures/coding: written for the
tests, a train and a validation file under data/ with code rows of each source, a call-based one, and a math row);
the rows it writes score a reference solution as perfect with gdpo_verl.rewards.coding, in the sandbox."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from gdpo_verl.rewards.coding import CodingReward

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "coding"


def prepare(*arguments):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_coding_data.py"), *map(str, arguments)],
        capture_output=True, text=True, timeout=300,
    )


def test_the_code_rows_are_kept_checked_and_written_in_verl_layout(tmp_path):
    result = prepare("--out", tmp_path, "--eurus", FIXTURE)
    assert result.returncode == 0, result.stderr
    assert "train: 4 rows written" in result.stdout and "validation: 1 rows written" in result.stdout
    assert "1 train: left out, not coding" in result.stdout and "1 train: taco" in result.stdout
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert sorted(train.data_source) == ["apps", "codecontests", "codeforces", "taco"]
    assert set(train.ability) == {"coding"}
    call_based = train[train.data_source == "taco"].iloc[0]
    assert call_based.extra_info["call_based"] and call_based.extra_info["test_cases"] == 2


def test_each_written_row_scores_its_reference_solution_as_perfect(tmp_path):
    assert prepare("--out", tmp_path, "--eurus", FIXTURE).returncode == 0
    solutions = json.loads((FIXTURE / "solutions.json").read_text())
    rows = pd.concat([pd.read_parquet(tmp_path / f"{split}.parquet") for split in ("train", "validation")])
    with CodingReward(workers=2) as reward:
        for row in rows.itertuples():
            question = row.prompt[-1]["content"].split("\n\n")[0]
            response = f"thinking</think>```python\n{solutions[question]}\n```"
            result = reward(row.data_source, response, row.reward_model["ground_truth"], {"response_length": 50})
            assert (result["pass_rate"], result["no_bug"], result["length"]) == (1.0, 1.0, 1.0), question


def test_a_ground_truth_the_reward_cannot_read_stops_the_script_by_row_or_is_skipped(tmp_path):
    rows = [json.loads(line) for line in (FIXTURE / "data" / "train-00000-of-00001.jsonl").read_text().splitlines()]
    rows[1]["reward_model"]["ground_truth"] = json.dumps({"inputs": ["1"], "outputs": []})
    source = tmp_path / "train.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    stopped = prepare("--out", tmp_path / "out", "--eurus", source)
    assert stopped.returncode == 2
    assert "train row 2: ground truth the coding reward cannot read" in stopped.stderr
    assert "1 inputs and 0 outputs" in stopped.stderr and not (tmp_path / "out").exists()
    skipped = prepare("--out", tmp_path / "out", "--eurus", source, "--skip-bad-rows")
    assert skipped.returncode == 0 and "train: 3 rows written" in skipped.stdout
    assert "1 train: skipped, ground truth the coding reward cannot read" in skipped.stdout


def test_a_source_without_coding_rows_or_files_is_refused(tmp_path):
    math_only = tmp_path / "train.jsonl"
    math_only.write_text(json.dumps({"ability": "math", "prompt": [{"role": "user", "content": "1+1"}]}) + "\n")
    result = prepare("--out", tmp_path / "out", "--eurus", math_only)
    assert result.returncode == 2 and "train: no coding rows among 1" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = prepare("--out", tmp_path / "out", "--eurus", empty)
    assert result.returncode == 2 and "no train*.parquet or validation*.parquet below it" in result.stderr
