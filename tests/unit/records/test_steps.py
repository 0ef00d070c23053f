"""Per-step records: what the estimator appends is what inspect reads back, and its metrics are the live ones."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gdpo_verl.records import steps as records
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core import gdpo_outcome_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.jsonl import read_jsonl
from gdpo_verl.records.steps import RECORD_FILE, SUPERSEDED_FILE, RecordWriter, load_steps, step_report


def test_a_record_round_trips_and_reports_the_live_metrics(tmp_path):
    scores = {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0]), "length": torch.tensor([0.0, 1.0, 1.0, 1.0])}
    valid = torch.tensor([3.0, 4.0, 2.0, 5.0])
    parts = gdpo_outcome_parts(scores, valid, ["a", "a", "b", "b"], {"correct": 1.0, "length": 0.5},
                               options=GdpoOptions(batch_norm="sequence"))
    RecordWriter().append(tmp_path, parts, ["a", "a", "b", "b"], 7)
    (record,) = load_steps(tmp_path)
    assert (record.step, record.uid, record.response_length) == (7, ["a", "a", "b", "b"], [3, 4, 2, 5])
    assert record.weights == {"correct": 1.0, "length": 0.5} and record.recorded["batch_norm"] == "sequence"
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


class Run:
    """A run appending records: one RecordWriter for its life, as a trainer holds one."""

    def __init__(self):
        self.writer = RecordWriter()

    def append(self, directory, step):
        self.writer.append(directory, _parts(), ["a", "a", "b", "b"], step)


def _append(directory, step):
    """A step appended by a run of its own."""
    Run().append(directory, step)


def test_a_resumed_run_records_each_step_once_and_keeps_the_earlier_records_of_rerun_steps(tmp_path, caplog):
    # the first run recorded steps 1-3 and was killed in step 3, after its record, before its checkpoint
    first = Run()
    for step in (1, 2, 3):
        first.append(tmp_path, step)
    # the resumed run starts from the step-2 checkpoint: step 3 again, then 4
    resumed = Run()
    resumed.append(tmp_path, 3)
    resumed.append(tmp_path, 4)
    assert [record.step for record in load_steps(tmp_path)] == [1, 2, 3, 4]
    assert [row["step"] for _, row in read_jsonl(tmp_path / SUPERSEDED_FILE)] == [3]
    assert "this run records step 3 on, so the 1 record(s) of step(s) 3 already there" in caplog.text


def test_a_new_run_in_the_same_directory_moves_the_old_records_aside(tmp_path):
    first = Run()
    for step in (1, 2):
        first.append(tmp_path, step)
    Run().append(tmp_path, 1)
    assert [record.step for record in load_steps(tmp_path)] == [1]
    assert [row["step"] for _, row in read_jsonl(tmp_path / SUPERSEDED_FILE)] == [1, 2]


def test_a_torn_last_line_is_left_out_by_readers_and_dropped_by_the_next_run(tmp_path, caplog):
    _append(tmp_path, 1)
    path = tmp_path / RECORD_FILE
    with path.open("a") as handle:  # killed while writing step 2
        handle.write('{"format": "gdpo-verl/steps-v1", "step": 2, "uid": ["a", "a", "b"')
    assert [record.step for record in load_steps(tmp_path)] == [1]
    assert "left out a torn last line" in caplog.text
    _append(tmp_path, 2)  # the next run
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


# ----------------------------------------------------------------------------- hostile files and records

ROOT = Path(__file__).resolve().parents[3]


def run_python(code, *, timeout=60):
    """``code`` in a fresh interpreter on this checkout; a former hang shows as TimeoutExpired, never a stuck suite."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


APPEND = """
import sys, torch
from gdpo_verl.core import gdpo_outcome_parts
from gdpo_verl.records.steps import RecordWriter
parts = gdpo_outcome_parts({"c": torch.tensor([1.0, 0.0, 1.0, 0.0])}, torch.ones(4), ["a", "a", "b", "b"])
try:
    RecordWriter().append(sys.argv[1] if len(sys.argv) > 1 else %r, parts, ["a", "a", "b", "b"], 3)
except OSError as exc:
    print(exc)
    sys.exit(2)
"""


@pytest.mark.parametrize("reader", [False, True], ids=["fifo", "fifo-with-a-reader"])
def test_a_fifo_where_the_record_file_belongs_is_refused_not_waited_on(tmp_path, reader):
    fifo = tmp_path / RECORD_FILE
    os.mkfifo(fifo)
    # With a reader on the other end, writing would feed the pipe instead of a file: refused too.
    descriptor = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if reader else None
    try:
        result = run_python(APPEND % str(tmp_path))
    finally:
        if descriptor is not None:
            os.close(descriptor)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in result.stdout
    assert "set algorithm.gdpo.dump_dir" in result.stdout


def test_a_fifo_where_the_superseded_records_go_is_refused_not_waited_on(tmp_path):
    _append(tmp_path, 5)
    os.mkfifo(tmp_path / SUPERSEDED_FILE)
    result = run_python(APPEND % str(tmp_path))  # a new process recording step 3 moves step 5 aside
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{tmp_path / SUPERSEDED_FILE} is a FIFO (named pipe), not a regular file" in result.stdout
    assert [record.step for record in load_steps(tmp_path)] == [5]  # left as it was


def _record(**fields):
    record = {"format": "gdpo-verl/steps-v1", "step": 1, "uid": ["a", "a", "b", "b"],
              "rewards": {"correct": [1.0, 0.0, 1.0, 0.5], "length": [0, 1, 1, 1]}}
    record.update(fields)
    return json.dumps(record)


BIG = "1" + "0" * 4000  # a 4,001-digit integer: valid JSON, too large for a float


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_record(step=None), "step must be a whole number from 0 to 2^53; got None"),
        (_record(step=[1]), "step must be a whole number from 0 to 2^53; got [1]"),
        (_record().replace('"step": 1', '"step": 1e400'), "step must be a whole number from 0 to 2^53; got inf"),
        (_record(step=True), "step must be a whole number from 0 to 2^53; got True"),
        (_record(eps=None), "eps must be a finite number; got None"),
        (_record(eps=2.0), "eps must be at most 1; got 2.0"),
        (_record(norm_by_std="false"), "norm_by_std must be true or false; got 'false'"),
        (_record(batch_norm=["token"]), "batch_norm must be one of ('token', 'sequence', 'none'); got ['token']"),
        (_record().replace("[0, 1, 1, 1]", f"[0, {BIG}, 1, 1]"),
         "reward 'length' must hold finite numbers (null where it does not apply); got an integer of about 4,001 digits"),
        (_record().replace("[0, 1, 1, 1]", "[0, NaN, 1, 1]"), "reward 'length' must hold finite numbers (null where it does not apply); got nan"),
        (_record(weights={"correct": 1.0, "length": None}), "weights must be finite numbers; got None"),
        (_record(response_length=[1, 2, -3, 4]), "response_length must be a whole number from 0 to 2^53; got -3"),
        (_record(response_length=[1, 2]), "response_length must be a list of 4 token counts"),
        (_record(uid=["a", None, "b", "b"]),
         "uid must hold one group id per response, a string (or a whole number); got None"),
        (_record(uid=[1, "1", "b", "b"]), "uid mixes strings and whole numbers"),
        (_record(uid="aabb"), "uid must be a non-empty list with one group id per response; got 'aabb'"),
        (_record(rewards=[]), "rewards must be a mapping of reward name -> list of numbers; got []"),
        (_record().replace("[0, 1, 1, 1]", "[0, 1" + "0" * 5000 + ", 1, 1]"),
         "not valid JSON (Exceeds the limit (4300 digits) for integer string conversion"),
        ("[" * 100_000, "not valid JSON (nested too deeply)"),
        ("[1]", "not a gdpo-verl record (\"format\": \"gdpo-verl/steps-v1\") like line 1"),
        # GDPO's own refusals, after the record's checks: still the file and line
        (_record(uid=["a"], rewards={"correct": [1.0]}), "batch_norm='token' needs at least 2 valid response tokens"),
    ],
)
def test_a_bad_record_is_refused_naming_the_file_the_line_and_the_field(tmp_path, line, message):
    path = tmp_path / RECORD_FILE
    path.write_text(_record(step=0) + "\n\n" + line + "\n")  # the bad record is on line 3
    with pytest.raises(ValueError) as error:
        records.reports(path)
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_later_line_of_another_kind_is_refused_naming_its_line(tmp_path):
    path = tmp_path / RECORD_FILE
    path.write_text(_record() + "\n" + json.dumps({"input": "q", "step": 1, "correct": 1}) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:2: not a gdpo-verl record .* like line 1"):
        load_steps(path)


def test_verl_dump_errors_name_the_line(tmp_path):
    path = tmp_path / "3.jsonl"
    rows = [{"input": "q", "step": 3, "correct": 1}, {"input": "q", "step": 3, "correct": "yes"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(ValueError, match=rf"^{path}:2: reward 'correct' must be a finite number \(null where it "
                                         rf"does not apply\); got 'yes'"):
        load_steps(path, ["correct"])
    # null: the reward does not apply to that response (a mixed-task batch)
    rows[1]["correct"] = None
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert load_steps(path, ["correct"])[0].rewards["correct"] == [1.0, None]
    path.write_text(json.dumps({"input": "q", "step": None, "correct": 1}) + "\n")
    with pytest.raises(ValueError, match=rf"^{path}:1: step must be a whole number"):
        load_steps(path, ["correct"])


def test_rewards_near_the_float64_limit_give_metrics_or_a_message_naming_the_line(tmp_path):
    path = tmp_path / RECORD_FILE
    path.write_text(_record(rewards={"correct": [1e308, -1e308, 1e308, 0.0], "length": [0, 1, 1, 1]}) + "\n")
    try:
        (report,) = records.reports(path)
    except ValueError as error:
        assert str(error).startswith(f"{path}:1: ")
    else:
        assert report["metrics"]["gdpo/correct/mean"] == pytest.approx(2.5e307)


@pytest.mark.parametrize("setup", ["fifo file", "fifo in a directory", "fifo dump"])
def test_a_fifo_to_read_is_refused_naming_it(tmp_path, setup):
    fifo = tmp_path / (RECORD_FILE if setup != "fifo dump" else "7.jsonl")
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=rf"^{fifo} is a FIFO \(named pipe\), not a regular file"):
        load_steps(fifo if setup == "fifo file" else tmp_path, ["correct"])
    with pytest.raises(ValueError, match=rf"^{fifo} is a FIFO"):
        read_jsonl(fifo)


def test_inspect_reads_a_large_record_file_in_bounded_memory(tmp_path):
    # 60 MB of records (steps of 4,096 responses): the old reader held the text, its lines and every parsed
    # record at once (about 2.3 times the file on top of the interpreter); now one line at a time.
    uid = [f"prompt-{i // 8:04d}-{'x' * 24}" for i in range(4096)]
    line = _record(step=0, uid=uid, rewards={"correct": [float(i % 2) for i in range(4096)],
                                           "length": [float(i % 3 == 0) for i in range(4096)]},
                   response_length=[100 + i % 7 for i in range(4096)])
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_text(line + "\n")
    with large.open("w") as handle:
        for step in range(60 * 2**20 // len(line) + 1):
            handle.write(line.replace('"step": 0', f'"step": {step}', 1) + "\n")
    size = large.stat().st_size
    assert size > 55 * 2**20

    def peak_kb(path):
        code = ("import resource, subprocess, sys\n"
                f"done = subprocess.run([sys.executable, '-m', 'gdpo_verl.tools.cli', 'inspect', {str(path)!r}, '--json'],"
                " stdout=subprocess.DEVNULL)\n"
                "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
        result = run_python(code, timeout=300)
        code, peak = result.stdout.split()
        assert code == "0", result.stderr
        return int(peak)

    growth_mb = (peak_kb(large) - peak_kb(small)) / 1024
    large.unlink()
    assert growth_mb < 25, f"inspect grew by {growth_mb:.0f} MB more on a {size / 2**20:.0f} MB file than on one line"
