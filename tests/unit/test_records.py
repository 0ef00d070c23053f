"""Per-step records: what the estimator appends is what inspect reads back, and its metrics are the live ones."""

import json

import pytest
import torch

from gdpo_verl import records
from gdpo_verl.core import gdpo_outcome_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.jsonl import read_jsonl
from gdpo_verl.records import RECORD_FILE, SUPERSEDED_FILE, append_record, load_steps, step_report


def test_a_record_round_trips_and_reports_the_live_metrics(tmp_path):
    scores = {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0]), "length": torch.tensor([0.0, 1.0, 1.0, 1.0])}
    valid = torch.tensor([3.0, 4.0, 2.0, 5.0])
    parts = gdpo_outcome_parts(scores, valid, ["a", "a", "b", "b"], {"correct": 1.0, "length": 0.5}, batch_norm="sequence")
    append_record(tmp_path, parts, ["a", "a", "b", "b"], 7, norm_by_std=True, batch_norm="sequence", eps=1e-6)
    (record,) = load_steps(tmp_path)
    assert (record.step, record.uid, record.response_length) == (7, ["a", "a", "b", "b"], [3, 4, 2, 5])
    assert record.weights == {"correct": 1.0, "length": 0.5} and record.batch_norm == "sequence"
    assert step_report(record)["metrics"] == pytest.approx(advantage_metrics(parts))
    line = json.loads((tmp_path / RECORD_FILE).read_text())
    assert line["advantage"] == pytest.approx(parts.final.tolist(), abs=1e-6)


def test_json_lines_errors_name_the_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{broken\n')
    with pytest.raises(ValueError, match=r"x.jsonl:3: not valid JSON"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n\n[2]\n')
    assert read_jsonl(path) == [(1, {"a": 1}), (3, [2])]
    with pytest.raises(ValueError, match="no such file"):
        read_jsonl(tmp_path / "absent.jsonl")


def _parts():
    scores = {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0]), "length": torch.tensor([0.0, 1.0, 1.0, 1.0])}
    return gdpo_outcome_parts(scores, torch.tensor([3.0, 4.0, 2.0, 5.0]), ["a", "a", "b", "b"])


def _append(directory, step):
    append_record(directory, _parts(), ["a", "a", "b", "b"], step, norm_by_std=True, batch_norm="token", eps=1e-6)


def _new_process(monkeypatch):
    monkeypatch.setattr(records, "_opened", set())


def test_a_resumed_run_records_each_step_once_and_keeps_the_earlier_records_of_rerun_steps(tmp_path, monkeypatch, caplog):
    # the first run recorded steps 1-3 and was killed in step 3, after its record, before its checkpoint
    for step in (1, 2, 3):
        _append(tmp_path, step)
    # the resumed run starts from the step-2 checkpoint: step 3 again, then 4
    _new_process(monkeypatch)
    _append(tmp_path, 3)
    _append(tmp_path, 4)
    assert [record.step for record in load_steps(tmp_path)] == [1, 2, 3, 4]
    assert [row["step"] for _, row in read_jsonl(tmp_path / SUPERSEDED_FILE)] == [3]
    assert "this run records step 3 on, so the 1 record(s) of step(s) 3 already there" in caplog.text


def test_a_new_run_in_the_same_directory_moves_the_old_records_aside(tmp_path, monkeypatch):
    for step in (1, 2):
        _append(tmp_path, step)
    _new_process(monkeypatch)
    _append(tmp_path, 1)
    assert [record.step for record in load_steps(tmp_path)] == [1]
    assert [row["step"] for _, row in read_jsonl(tmp_path / SUPERSEDED_FILE)] == [1, 2]


def test_a_torn_last_line_is_left_out_by_readers_and_dropped_by_the_next_run(tmp_path, monkeypatch, caplog):
    _append(tmp_path, 1)
    path = tmp_path / RECORD_FILE
    with path.open("a") as handle:  # killed while writing step 2
        handle.write('{"format": "gdpo-verl/steps-v1", "step": 2, "uid": ["a", "a", "b"')
    assert [record.step for record in load_steps(tmp_path)] == [1]
    assert "left out a torn last line" in caplog.text
    _new_process(monkeypatch)
    _append(tmp_path, 2)
    assert "dropped a torn last line" in caplog.text
    assert [record.step for record in load_steps(tmp_path)] == [1, 2]
    assert path.read_text().endswith("\n") and not (tmp_path / SUPERSEDED_FILE).exists()


def test_a_broken_line_that_is_not_the_torn_tail_is_still_an_error(tmp_path):
    _append(tmp_path, 1)
    path = tmp_path / RECORD_FILE
    path.write_text("{broken\n" + path.read_text())
    with pytest.raises(ValueError, match=r"gdpo_steps.jsonl:1: not valid JSON"):
        load_steps(tmp_path)


def test_an_unwritable_dump_dir_names_the_setting(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=r"Set algorithm.gdpo.dump_dir to a writable directory"):
        _append(tmp_path / "file" / "records", 1)
