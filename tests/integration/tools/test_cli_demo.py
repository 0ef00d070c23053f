"""`gdpo-verl demo`: the README's main job, through verl's real compute_advantage."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gdpo_verl.tools.cli import main


def test_installed_console_script_runs_the_shipped_demo():
    executable = Path(sys.executable).with_name("gdpo-verl")
    assert executable.is_file(), f"the gdpo-verl console script is not installed beside {sys.executable}"
    result = subprocess.run([str(executable), "demo", "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert "rewards: correct, length" in result.stdout
    # The shipped batch has (1,0) and (0,1) rollouts in one group: GRPO merges them, GDPO keeps most apart.
    assert summary["grpo_merged_pairs"] > summary["gdpo_merged_pairs"]
    assert summary["gdpo_distinct_advantages"] > summary["grpo_distinct_advantages"]


def write_rollouts(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_demo_on_user_rollouts_reports_collapse(tmp_path, capsys):
    # The paper's example: totals (0,1) and (0,2).
    rows = [
        {"uid": "a", "response_length": 3, "correct": 0, "format": 0},
        {"uid": "a", "response_length": 5, "correct": 1, "format": 0},
        {"uid": "b", "response_length": 4, "correct": 0, "format": 0},
        {"uid": "b", "response_length": 2, "correct": 1, "format": 1},
    ]
    assert main(["demo", "--rollouts", str(write_rollouts(tmp_path / "r.jsonl", rows)), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["grpo_distinct_advantages"] == 2
    assert summary["gdpo_distinct_advantages"] == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"uid": "a", "correct": 1}\n', "missing ['response_length']"),
        ('{"uid": "a", "response_length": 3}\n', "no reward fields"),
        ("not json\n", ":1: not valid JSON"),
        ("", "no rollouts"),
        (
            '{"uid": "a", "response_length": 3, "x": 1}\n{"uid": "a", "response_length": 3, "y": 1}\n',
            "rollout 2 has rewards",
        ),
        ('{"uid": "a", "response_length": 3, "x": 1}\n3\n', ":2: expected a JSON object"),
        ("null\n", ":1: expected a JSON object"),
        ('{"uid": "a", "response_length": 3, "x": null}\n', "rewards must be finite numbers; got {'x': None}"),
        ('{"uid": "a", "response_length": 3, "x": [1]}\n', "rewards must be finite numbers"),
        ('{"uid": "a", "response_length": 3, "x": NaN}\n', "rewards must be finite numbers"),
        ('{"uid": "a", "response_length": 99999999999, "x": 1}\n', "response_length must be a whole number from 1 to"),
        ('{"uid": "a", "response_length": 2.5, "x": 1}\n', "response_length must be a whole number"),
    ],
)
def test_demo_rejects_bad_rollout_files_with_exit_code_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert main(["demo", "--rollouts", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_demo_rejects_a_missing_file_with_exit_code_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--rollouts", str(tmp_path / "nope.jsonl")])
    assert exit_info.value.code == 2
    assert "no such file" in capsys.readouterr().err
