"""`gdpo-verl demo`: GRPO and GDPO side by side (docs/collapse.md), through verl's real compute_advantage."""

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


def test_the_demo_output_docs_collapse_md_quotes_is_what_the_demo_prints(capsys):
    # docs/collapse.md quotes the shipped batch's summary: the numbers there come from this run of the demo
    doc = (Path(__file__).resolve().parents[3] / "docs" / "collapse.md").read_text()
    quoted = doc[doc.index("The shipped batch"):]
    quoted = quoted[quoted.index("```\n") + 4:]
    quoted = quoted[:quoted.index("```")].strip().splitlines()
    assert main(["demo"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert quoted and all(line in printed for line in quoted), (quoted, printed[-3:])


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
        ('{"uid": "a", "response_length": 3, "x": "1"}\n', "rewards must be finite numbers (null where one does not "
                                                           "apply); got {'x': '1'}"),
        ('{"uid": "a", "response_length": 3, "x": null}\n', "none of the GDPO reward components ['x'] applies to any "
                                                           "response of the batch"),
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


def test_demo_and_inspect_take_the_training_options_and_a_mixed_task_batch(tmp_path, capsys):
    # prompt m is a math prompt (no code test): "code" is null there, and left out of its statistics
    rows = [
        {"uid": "c", "response_length": 3, "correct": 1, "code": 1},
        {"uid": "c", "response_length": 5, "correct": 0, "code": 1},
        {"uid": "c", "response_length": 2, "correct": 1, "code": 0},
        {"uid": "m", "response_length": 4, "correct": 0, "code": None},
        {"uid": "m", "response_length": 2, "correct": 1, "code": None},
    ]
    path = write_rollouts(tmp_path / "mixed.jsonl", rows)
    args = ["demo", "--rollouts", str(path), "--conflict", "snr", "--conflict-threshold", "0.5",
            "--weights", '{"code": [[0, 0.0], [10, 2.0]]}', "--step", "5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(applies to 3 of 5)" in out
    # a schedule outside a step is refused with the fix
    assert main(args[:-2]) == 2
    assert "Give the step (gdpo-verl demo and inspect: --step)" in capsys.readouterr().err

    from gdpo_verl.core.advantage import gdpo_outcome_parts
    from gdpo_verl.records.steps import RecordWriter

    parts = gdpo_outcome_parts({"correct": [row["correct"] for row in rows], "code": [row["code"] for row in rows]},
                               [row["response_length"] for row in rows], [row["uid"] for row in rows])
    RecordWriter().append(tmp_path / "dump", parts, [row["uid"] for row in rows], step=4)
    assert main(["inspect", str(tmp_path / "dump"), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)[0]["metrics"]
    assert plain["gdpo/code/applies_frac"] == 0.6 and "gdpo/conflict_masked_frac" not in plain
    assert main(["inspect", str(tmp_path / "dump"), "--json", "--conflict", "hard", "--weights",
                 '{"code": [[0, 1.0], [8, 3.0]]}']) == 0
    changed = json.loads(capsys.readouterr().out)[0]["metrics"]
    assert changed["gdpo/code/weight"] == 2.0  # the schedule at the record's step, 4
    assert "gdpo/conflict_masked_frac" in changed
    # a threshold the record's conflict mode would ignore is refused, not dropped
    assert main(["inspect", str(tmp_path / "dump"), "--conflict-threshold", "0.5"]) == 2
    assert "is read by conflict=snr only" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "dump"), "--json", "--conflict", "snr", "--conflict-threshold", "0.5"]) == 0


def test_demo_and_inspect_take_corrgrpo(tmp_path, capsys):
    rows = [
        {"uid": "c", "response_length": 3, "correct": 1, "code": 1},
        {"uid": "c", "response_length": 5, "correct": 0, "code": 0.5},
        {"uid": "c", "response_length": 2, "correct": 1, "code": 0},
        {"uid": "m", "response_length": 4, "correct": 0, "code": None},
        {"uid": "m", "response_length": 2, "correct": 1, "code": None},
    ]
    path = write_rollouts(tmp_path / "mixed.jsonl", rows)
    from gdpo_verl.core.corrgrpo import corrgrpo_outcome_parts
    from gdpo_verl.records.steps import RecordWriter

    parts = corrgrpo_outcome_parts({"correct": [row["correct"] for row in rows], "code": [row["code"] for row in rows]},
                                   [row["response_length"] for row in rows], [row["uid"] for row in rows],
                                   {"correct": 1.0, "code": 2.0})
    for name in ("corrgrpo", "grpo_covariance_coefficient"):
        assert main(["demo", "--rollouts", str(path), "--estimator", name, "--weights", '{"code": 2.0}']) == 0
        out = capsys.readouterr().out
        assert "-> GRPO | CorrGRPO advantage" in out
        assert f"{parts.final[0].item():+.2f}" in out.splitlines()[out.splitlines().index(next(
            line for line in out.splitlines() if line.startswith("c ")))]
    # GDPO's options have no place in CorrGRPO: refused, naming them
    assert main(["demo", "--rollouts", str(path), "--estimator", "corrgrpo", "--conflict", "hard"]) == 2
    assert "algorithm.gdpo.conflict=hard belong(s) to GDPO's steps" in capsys.readouterr().err

    RecordWriter().append(tmp_path / "dump", parts, [row["uid"] for row in rows], step=3)
    assert main(["inspect", str(tmp_path / "dump"), "--json"]) == 0
    recorded = json.loads(capsys.readouterr().out)[0]["metrics"]
    assert recorded["gdpo/code/weight"] == 2.0 and recorded["gdpo/unrewarded_frac"] == 0.0
    # the record says CorrGRPO: inspect recomputes CorrGRPO, and --estimator gdpo recomputes the step as GDPO
    assert main(["inspect", str(tmp_path / "dump"), "--json", "--estimator", "gdpo"]) == 0
    as_gdpo = json.loads(capsys.readouterr().out)[0]["metrics"]
    assert as_gdpo["gdpo/code/adv_contribution_std"] != pytest.approx(recorded["gdpo/code/adv_contribution_std"])
    assert main(["inspect", str(tmp_path / "dump"), "--conflict", "hard"]) == 2
    assert "computed with CorrGRPO" in capsys.readouterr().err
