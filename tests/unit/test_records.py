"""Per-step records: what the estimator appends is what inspect reads back, and its metrics are the live ones."""

import json

import pytest
import torch

from gdpo_verl.core import gdpo_outcome_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.jsonl import read_jsonl
from gdpo_verl.records import RECORD_FILE, append_record, load_steps, step_report


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
