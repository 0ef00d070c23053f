"""What the CPU training runs of tests/e2e share: starting a run (``start_run``), killing it inside a step
(``run_killed_in_step``, ``kill_and_resume``), waiting for it (``finish_run``) and checking a resumed run
(``check_resumed``, ``check_mixed_task_steps``); the environment they run in (``PYTHON``, ``ROOT``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gdpo_verl.cpu_run import check_run
from gdpo_verl.cpu_run.check_run import step_metrics, step_records
from gdpo_verl.verl_adapter.checkpoint_owner import OWNER_FILE

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / os.environ.get("CPU_TRAINING_VENV", ".venv-cpu-training")  # as scripts/setup_cpu_training_env.sh
PYTHON = Path(os.environ.get("CPU_TRAINING_PYTHON", VENV / "bin" / "python"))
STEPS = 2
# The tiny model has 21 weight tensors (gdpo_verl/cpu_run/tiny_model.py): what a weight sync sends.
TENSORS = 21
OTHER_VERL = ROOT / "tests" / "fixtures" / "other_verl"

def start_run(out: Path, steps: int, *overrides: str, resume: bool = False, busy: int = 0,
              env: dict[str, str] | None = None) -> subprocess.Popen:
    """scripts/run_cpu_training.sh in a session of its own; with ``busy``, that many busy processes started in the
    same session first (their pids in OUT/busy.pids; stop_busy ends them)."""
    if not PYTHON.is_file():
        pytest.fail(
            f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh, "
            "or leave this test out with -m 'not cpu_training'"
        )
    command = ["bash", str(ROOT / "scripts" / "run_cpu_training.sh"), *overrides]
    if busy:
        # in the run's session, as when a user starts them from the shell that runs the job: the kernel shares a
        # CPU between sessions first (autogroups), so busy processes of another session leave the run half the
        # machine whatever their priorities, and only those of its own session compete with it process by process
        hogs = (f'for _ in $(seq {busy}); do {sys.executable} -c "while True: pass" </dev/null >/dev/null 2>&1 & '
                f'echo $! >> "{out}/busy.pids"; done')
        command = ["bash", "-c", f'{hogs}; exec "$@"', "busy", *command]
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    # by default a run puts a few lines on stdout (its phases, a line per step), its whole output in OUT/run.log
    # alone. A test that polls the run reads its stdout only at the end, and the pipe holds 64 KiB: a run printing
    # more (verl's experimental trainers print their whole config) would block on it and stall
    return subprocess.Popen(
        command,
        env={**inherited, "LABEL": out.name, **(env or {}), "CPU_TRAINING_PYTHON": str(PYTHON), "OUT": str(out),
             "STEPS": str(steps), "RESUME": "1" if resume else "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a test that fails can still stop the whole run
    )


def stop_run(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # the supervisor stops what the run started
        process.communicate(timeout=120)


def stop_busy(out: Path) -> None:
    listed = out / "busy.pids"
    for pid in (map(int, listed.read_text().split()) if listed.is_file() else ()):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def title(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # it ended meanwhile
        return ""


def wait_for(process: subprocess.Popen, reached, what: str, minutes: int = 15) -> None:
    """Poll every 0.1 s (a CPU step takes 1 to 3 s) until ``reached()``; fail if the run ends or time runs out."""
    deadline = time.monotonic() + 60 * minutes
    while not reached():
        assert process.poll() is None, f"the run ended before {what}:\n{process.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {minutes} minutes"
        time.sleep(0.1)


def running(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


# ----------------------------------------------------------------------------- resume after a crash


def finish_run(process: subprocess.Popen, what: str) -> str:
    try:
        stdout, stderr = process.communicate(timeout=900)
    finally:
        stop_run(process)
    assert process.returncode == 0, f"{what} failed:\n{stdout[-2000:]}\n{stderr[-3000:]}"
    return stdout


def is_driver(process: psutil.Process) -> bool:
    """verl's entry point itself (``python -m verl.trainer.main_ppo``, or an experimental trainer's), not the
    supervisor that names it."""
    try:
        command = process.cmdline()
    except psutil.Error:
        return False
    return command[1:2] == ["-m"] and command[2:3] != [] and command[2].startswith("verl.")


def latest_checkpoint(out: Path) -> int:
    return int((out / "checkpoints" / "latest_checkpointed_iteration.txt").read_text())


# A run to be killed inside a step: its trainer pauses right after the record of that step
# (tests/fixtures/other_verl/sitecustomize.py), before the step's update and checkpoint, long enough for the test to
# see the record and kill the run there however busy the machine is. Without it the window was the update's second
# or so, which a test polling for the record once missed on a busy machine.
PAUSE_S = 120


def run_killed_in_step(out: Path, steps: int, step: int, *overrides: str, resume: bool = False,
                       env: dict[str, str] | None = None, kill: str = "driver") -> str:
    """Start a run of ``steps`` steps (``start_run``'s arguments) whose trainer pauses after the record of ``step``,
    wait for that record (the advantage step of ``step`` has run; its checkpoint is not yet written), SIGKILL a part
    of the run there and return the run's stderr. ``kill``: ``driver``, verl's driver (no clean shutdown), or
    ``engine``, vLLM's engine core, which the run's supervisor must see die and stop the run for, naming it, with
    every process the run started."""
    paused = {**(env or {}), "PYTHONPATH": str(OTHER_VERL), "PAUSE_AFTER_RECORD": f"{step}:{PAUSE_S}"}
    process = start_run(out, steps, *overrides, resume=resume, env=paused)
    run_processes: list[psutil.Process] = []
    try:
        wait_for(process, lambda: step in check_run.step_records(out), f"the run's record of step {step}")
        run_processes = psutil.Process(process.pid).children(recursive=True)
        if kill == "driver":
            victim = next(p for p in run_processes if is_driver(p))
        else:
            victim = next(p for p in run_processes if title(p).startswith("VLLM::EngineCore"))
        victim.kill()
        killed_at = time.monotonic()
        _, stderr = process.communicate(timeout=180)
        seconds = time.monotonic() - killed_at
        left = running(run_processes)
    finally:
        stop_run(process)
        for leftover in running(run_processes):
            leftover.kill()
    assert process.returncode != 0
    if kill == "driver":
        # the supervisor names the killed driver's exit (and a Ray part that went down with it, if it saw that first)
        assert "exited with code -9" in stderr
    else:
        # the engine core named, in the step it died in (its record written, its metrics not yet logged); when verl
        # brings the run down within a look of the kill, its other parts are found dead with it and all are named
        # (tests/integration/cpu_run/test_supervise.py: test_parts_found_dead_in_the_same_look_are_all_named)
        assert re.search(rf"VLLM::EngineCore \(pid {victim.pid}, the vLLM engine core\)[^\n]*? died[^\n]*? during step "
                         rf"{step} of {steps}", stderr), stderr[-3000:]
        assert f"Log: {out / 'run.log'}" in stderr
        assert seconds < 180
        assert left == [], f"processes of the run still running: {left}"
    recorded = [line["step"] for line in check_run.read_jsonl(out / "gdpo" / "gdpo_steps.jsonl")]
    assert recorded == list(range(1, step + 1))
    assert latest_checkpoint(out) == step - 1, (
        f"step {step}'s checkpoint was written before the kill; the test missed its window")
    return stderr


def check_resumed(out: Path, steps: int, killed: tuple[int, ...], stdout: str, unlogged: tuple[int, ...] = ()) -> None:
    """The run resumed after its driver was killed in the steps ``killed`` (one per killed run) finished: check_run
    passed (every step once, with its gdpo/ metrics and a record equal to what verl trained on), each step logged
    and recorded once, and the killed runs' records of the steps they did not finish moved aside. ``unlogged``:
    steps verl's metrics lack by design (check_run accepts them, naming them)."""
    assert f"GDPO CPU training run: OK ({steps} steps" in stdout
    assert latest_checkpoint(out) == steps
    # the run that first saved there is recorded as the directory's owner, and a resume of the same run passes it
    # (another run is refused the directory: tests/integration/recipes/test_recipe_checks.py)
    owner = json.loads((out / "checkpoints" / OWNER_FILE).read_text())
    assert owner == {"project": "gdpo_cpu", "experiment": "tiny"}
    # verl's file logger started its file afresh at each start: the earlier runs' lines were kept beside it
    logged = [step for step, _ in check_run.step_lines(out)]
    recorded = [line["step"] for line in check_run.read_jsonl(out / "gdpo" / "gdpo_steps.jsonl")]
    assert recorded == list(range(1, steps + 1))
    assert logged == [step for step in recorded if step not in unlogged]
    # the killed runs' records of those steps were moved aside, not left beside the ones verl trained on
    superseded = check_run.read_jsonl(out / "gdpo" / "gdpo_steps.superseded.jsonl")
    assert [line["step"] for line in superseded] == list(killed)
    assert "were moved to gdpo_steps.superseded.jsonl" in (out / "run.log").read_text()


# The resumed runs train on a mixed-task batch (tests/fixtures/mixed_task/reward.py: the length component does not
# apply to half the prompts: None), with GD2PO's snr masking and the length
# weight on a schedule, 0.5 at step 0 rising to 1.0 at step 8: a resumed run must read it at the step it resumes at.
MIXED_TASK = ("algorithm.gdpo.conflict=snr",
              f"reward.custom_reward_function.path={ROOT / 'tests' / 'fixtures' / 'mixed_task' / 'reward.py'}",
              "algorithm.gdpo_reward_weights={correct:1.0,length:[[0,0.5],[8,1.0]]}")


def check_mixed_task_steps(out: Path, steps: list[int]) -> None:
    """The steps trained with MIXED_TASK: length applied to the even-numbered prompts alone (to every response of a
    prompt or to none; a batch of the synchronous trainers holds the 8 prompts, half of them even, one an asynchronous
    trainer assembles may hold another mix), snr masking logged, and the scheduled weight read at each step's global
    step."""
    metrics, records = check_run.step_metrics(out), check_run.step_records(out)
    seen: set[bool] = set()
    for step in steps:
        data, record = metrics[step], records[step]
        lengths = record["rewards"]["length"]
        applies = [value is not None for value in lengths]
        by_prompt: dict[str, set[bool]] = {}
        for uid, applied in zip(record["uid"], applies, strict=True):
            by_prompt.setdefault(uid, set()).add(applied)
        assert all(len(applied) == 1 for applied in by_prompt.values()), by_prompt
        assert data["gdpo/length/applies_frac"] == pytest.approx(sum(applies) / len(applies))
        assert data["gdpo/correct/applies_frac"] == 1.0
        assert all(value in (0.0, 1.0) for value in lengths if value is not None)
        seen |= set(applies)
        assert "gdpo/conflict_masked_frac" in data and record["conflict"] == "snr"
        assert data["gdpo/length/weight"] == record["weights"]["length"] == 0.5 + 0.5 * step / 8
        # verl logs its own gdpo/<key>/mean from the batch; over the responses the component applies to, not NaN
        if any(applies):
            assert 0.0 <= data["gdpo/length/mean"] <= 1.0
    assert seen == {True, False}  # the batches mixed both tasks


NODES_CHECKED = "gdpo-verl: \"gdpo\" is gdpo-verl's estimator on all 1 Ray node(s)"
# A checkpoint after each step
EVERY_STEP = ("trainer.save_freq=1", *MIXED_TASK)


def kill_and_resume(out, trainer, steps, *overrides, unlogged=()):
    """A run of ``steps`` steps through ``trainer``, its driver killed in its last step (after that step's record,
    before its checkpoint), then resumed: the metrics of the killed run's steps, then those of both runs, as verl
    logged them, and the resumed run's stdout. ``unlogged``: the steps verl never logs (check_resumed)."""
    env = {"TRAINER": trainer}
    run_killed_in_step(out, steps, steps, *EVERY_STEP, *overrides, env=env)
    log = (out / "run.log").read_text()
    # the per-node check ran in the driver before verl's TaskRunner (the first Ray actor of the run) started
    assert NODES_CHECKED in log
    before = step_metrics(out)
    assert sorted(before) == [step for step in range(1, steps) if step not in unlogged]
    stdout = finish_run(start_run(out, steps, *EVERY_STEP, *overrides, resume=True, env=env),
                        f"TRAINER={trainer} resumed after the kill")
    check_resumed(out, steps, (steps,), stdout, unlogged)
    assert sorted(step_records(out)) == list(range(1, steps + 1))
    check_mixed_task_steps(out, [step for step in range(1, steps + 1) if step not in unlogged])
    return before, step_metrics(out), stdout
