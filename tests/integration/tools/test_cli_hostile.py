"""Hostile inputs to the command line: FIFOs where files belong, records that used to raise, a Ray check that must
not outlive the doctor, and the demo's merge count on one large group. Every command here is bounded: a former
hang runs in a subprocess with a timeout."""

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from gdpo_verl.tools.cli import main
from gdpo_verl.tools.demo import merged_pairs

ROOT = Path(__file__).resolve().parents[3]
EXECUTABLE = Path(sys.executable).with_name("gdpo-verl")


def gdpo_verl(*arguments, timeout=120, env=None):
    """The installed console script on this checkout, in its own process, with a bound."""
    env = {**(env or os.environ), "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(EXECUTABLE), *map(str, arguments)], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


def one_line_error(result, *parts):
    """Exit 2, one line on stderr naming every part, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("gdpo-verl ")]
    assert len(lines) == 1, result.stderr
    for part in parts:
        assert part in lines[0], lines[0]


# ----------------------------------------------------------------------------- plot and inspect on FIFOs


def test_plot_refuses_a_fifo_event_file_instead_of_waiting_on_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    fifo = run / "events.out.tfevents.1700000000.host.1.0"
    os.mkfifo(fifo)
    result = gdpo_verl("plot", run, "--out", tmp_path / "curves.png")
    one_line_error(result, str(fifo), "is a FIFO (named pipe), not a regular event file")


def test_plot_and_inspect_refuse_a_fifo_as_their_png(tmp_path):
    fifo = tmp_path / "out.png"
    os.mkfifo(fifo)
    result = gdpo_verl("inspect", "--plot", fifo)
    assert result.returncode == 2 and "exists and is not a regular file" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("where", ["file", "directory"])
def test_inspect_refuses_a_fifo_record_naming_it(tmp_path, where):
    fifo = tmp_path / "gdpo_steps.jsonl"
    os.mkfifo(fifo)
    result = gdpo_verl("inspect", fifo if where == "file" else tmp_path)
    one_line_error(result, f"{fifo} is a FIFO (named pipe), not a regular file")


# ----------------------------------------------------------------------------- inspect on records that used to raise


def record(**fields):
    line = {"format": "gdpo-verl/steps-v1", "step": 1, "uid": ["a", "a", "b", "b"],
            "rewards": {"correct": [1.0, 0.0, 1.0, 0.0], "length": [0, 1, 1, 1]}}
    line.update(fields)
    return json.dumps(line)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (record(step=None), "step must be a whole number"),
        (record(step=[1]), "step must be a whole number"),
        (record().replace('"step": 1', '"step": 1e400'), "step must be a whole number"),
        (record(eps=None), "eps must be a finite number"),
        (record(norm_by_std="false"), "norm_by_std must be true or false; got 'false'"),
        (record().replace("[0, 1, 1, 1]", "[0, 1" + "0" * 4000 + ", 1, 1]"), "reward 'length' must hold finite numbers"),
        (record().replace("[0, 1, 1, 1]", "[0, 1" + "0" * 5000 + ", 1, 1]"), "not valid JSON (Exceeds the limit"),
        ("[" * 50_000, "not valid JSON (nested too deeply)"),
    ],
)
def test_inspect_refuses_a_bad_record_with_one_line_naming_the_file_line_and_field(capsys, tmp_path, line, field):
    path = tmp_path / "gdpo_steps.jsonl"
    path.write_text(record(step=0) + "\n" + line + "\n")
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gdpo-verl inspect: {path}:2: ") and field in err and err.count("\n") == 1


def test_inspect_on_rewards_of_1e308_prints_metrics_not_a_traceback(tmp_path):
    path = tmp_path / "gdpo_steps.jsonl"
    path.write_text(record(rewards={"correct": [1e308, -1e308, 1e308, 0.0], "length": [0, 1, 1, 1]}) + "\n")
    result = gdpo_verl("inspect", path, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    if result.returncode == 2:  # refused: then with the file and line
        one_line_error(result, f"{path}:1:")
    else:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)[0]["metrics"]["gdpo/correct/mean"] == pytest.approx(2.5e307)


# ----------------------------------------------------------------------------- demo


def merged_pairs_pair_by_pair(uids, combos, values):
    """The demo's former count, every pair of a prompt's rollouts in turn (the reference)."""
    merged = 0
    members = defaultdict(list)
    for i, uid in enumerate(uids):
        members[uid].append(i)
    for rows in members.values():
        for a, i in enumerate(rows):
            for j in rows[a + 1:]:
                merged += int(combos[i] != combos[j] and round(values[i], 4) == round(values[j], 4))
    return merged


def test_merged_pairs_counts_what_the_pair_by_pair_count_did():
    generator = np.random.default_rng(7)
    for trial in range(500):
        size = int(generator.integers(1, 30))
        uids = np.array([f"p{value}" for value in generator.integers(0, 4, size)], dtype=object)
        combos = [tuple(row) for row in generator.integers(0, 2, (size, 2)).tolist()]
        if trial % 3 == 0:
            values = generator.integers(-3, 4, size) * 0.5
        elif trial % 3 == 1:  # ties at the fifth decimal, where rounding decides
            values = (generator.integers(-20_000, 20_000, size) + 0.5) / 1e4
        else:
            values = generator.normal(size=size).round(int(generator.integers(2, 6)))
        values[generator.random(size) < 0.2] = -0.0
        assert merged_pairs(uids, combos, values) == merged_pairs_pair_by_pair(uids, combos, values), trial


def test_demo_refuses_a_4000_digit_reward_naming_the_line(capsys, tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text('{"uid": "a", "response_length": 3, "c": 1}\n{"uid": "a", "response_length": 3, "c": 1' + "0" * 4000 + "}\n")
    assert main(["demo", "--rollouts", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gdpo-verl demo: {path}:2: rewards must be finite numbers (null where one does not apply); got {{'c': 1000") and err.count("\n") == 1


def test_demo_on_3000_rollouts_of_one_prompt_takes_well_under_a_second_beyond_verls_import(tmp_path, capsys):
    generator = random.Random(0)
    rows = [{"uid": "g", "response_length": generator.randint(1, 50), "correct": generator.randint(0, 1),
             "length": generator.randint(0, 1), "format": generator.randint(0, 1)} for _ in range(3000)]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["demo", "--rollouts", str(path), "--json"]) == 0  # verl imported and warmed up
    capsys.readouterr()
    start = time.perf_counter()
    assert main(["demo", "--rollouts", str(path), "--json"]) == 0
    elapsed = time.perf_counter() - start
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # pair by pair, this took about 95 s (two counts of 4.5 million pairs each)
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert summary["gdpo_merged_pairs"] == 0 and summary["grpo_merged_pairs"] > 0


# ----------------------------------------------------------------------------- doctor


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "0", "five"])
def test_doctor_refuses_a_ray_timeout_that_is_not_a_positive_finite_number(value, doctor_processes):
    env = {**os.environ, "GDPO_VERL_DOCTOR_RAY_TIMEOUT_S": value, "RAY_ADDRESS": "127.0.0.1:1", **doctor_processes}
    result = gdpo_verl("doctor", timeout=240, env=env)
    one_line_error(result, f"GDPO_VERL_DOCTOR_RAY_TIMEOUT_S={value!r}", "number of seconds above 0")
    assert not live(marked(doctor_processes))


@pytest.fixture
def doctor_processes():
    """An environment marker for the doctor and everything it starts; at the end, whatever still carries it is
    killed (by process group), so a failing test leaves nothing behind."""
    marker = {"GDPO_VERL_TEST_DOCTOR": uuid.uuid4().hex}
    yield marker
    for pid in marked(marker):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def marked(marker):
    """Processes whose environment carries ``marker``."""
    (key, value), = marker.items()
    needle = f"{key}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def live(pids):
    """The processes among ``pids`` still running (a zombie waiting for a parent to reap it does not run)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.append(pid)
    return running


def still_running(marker, within):
    """The processes carrying ``marker`` still running after up to ``within`` seconds (a SIGKILL lands at once, but
    not in the same instant)."""
    deadline = time.monotonic() + within
    while (running := live(marked(marker))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return running


def ray_check_child(doctor, marker, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for pid in live(marked(marker)):
            try:
                if b"ray_worker_resolution" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
            except OSError:
                pass
        assert doctor.poll() is None, doctor.communicate()
        time.sleep(0.2)
    raise AssertionError(f"the doctor started no Ray check within {within} s")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the doctor's processes through /proc")
@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM),
                                              (signal.SIGKILL, -signal.SIGKILL)], ids=["ctrl-c", "sigterm", "sigkill"])
def test_a_stopped_doctor_leaves_no_ray_check_behind(doctor_processes, number, code):
    # RAY_ADDRESS that never answers: ray.init in the check's child waits without end and ignores SIGTERM.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "127.0.0.1:1",
           "GDPO_VERL_DOCTOR_RAY_TIMEOUT_S": "600", **doctor_processes}
    doctor = subprocess.Popen(
        [str(EXECUTABLE), "doctor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's Ctrl-C finds it
    )
    try:
        child = ray_check_child(doctor, doctor_processes, within=240)
        time.sleep(3)  # inside ray.init
        os.kill(doctor.pid, number)
        out, err = doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
            doctor.communicate()
    assert doctor.returncode == code, out + err
    assert "Traceback" not in err, err
    if number == signal.SIGINT:
        assert err.strip().splitlines()[-1] == "gdpo-verl doctor: interrupted"
    assert not still_running(doctor_processes, within=30), f"left running after the doctor (its Ray check was {child})"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the doctor's processes through /proc")
def test_a_ray_check_past_its_limit_is_stopped_with_its_whole_process_group(doctor_processes):
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "GDPO_VERL_DOCTOR_RAY_TIMEOUT_S": "3", **doctor_processes}
    result = gdpo_verl("doctor", timeout=240, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'FAIL  "gdpo" in Ray workers: cluster 127.0.0.1:1 did not answer within 3 s' in result.stdout
    # SIGTERM, a grace period, then SIGKILL to the group: nothing of the check is left once the doctor is done
    assert not still_running(doctor_processes, within=10)
