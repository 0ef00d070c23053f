"""Real GDPO training on the CPU, through verl's own main_ppo: the main job (two steps, beside a busy process per
core); and a run killed inside a step and resumed from its checkpoint, with no step lost or doubled, through verl's
legacy trainer (without TransferQueue, its vLLM engine core killed) and the V1 trainer's three modes (its driver
killed in separate_async), each resumed from the checkpoint the one before left (the resumed runs on a mixed-task
batch, with GD2PO's snr masking and a weight schedule). test_trainers.py resumes verl's experimental trainers.

Nothing of verl is mocked: its V1 trainer, Ray, TransferQueue, the FSDP2 actor, the vLLM rollout server (vLLM's
CPU build), the bucketed weight sync and the checkpoint all run for real, with this plugin's estimator,
reward manager and math rewards. What lets verl run on a CPU at all is
gdpo_verl/verl_adapter/for_cpu_run/cpu_platform.py (a verl platform for the CPU, added through verl's platform
registry) and the environment of scripts/setup_cpu_training_env.sh; docs/cpu-training.md lists every such piece.

Each start of a run costs about 150 to 180 CPU-seconds (its processes import torch, verl and vLLM;
docs/development.md, "Where the time goes"); a step, seconds. So runs are shared where the checks need the same
steps: the resume goes on from a copy of the main job's run (which checkpoints after each step) through the legacy
trainer and the V1 trainer's asynchronous modes. Four starts in all.
They need .venv-cpu-training (scripts/test.sh creates it); ``pytest -m "not cpu_training"`` leaves them out.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gdpo_verl.cpu_run import check_run
from gdpo_verl.cpu_run.check_run import MAX_PROBS_DIFF, PROBS_DIFF, SENT, STALENESS
from gdpo_verl.cpu_run import supervise
from gdpo_verl.verl_adapter.checkpoint_owner import OWNER_FILE

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / os.environ.get("CPU_TRAINING_VENV", ".venv-cpu-training")  # as scripts/setup_cpu_training_env.sh
PYTHON = Path(os.environ.get("CPU_TRAINING_PYTHON", VENV / "bin" / "python"))
STEPS = 2
# The tiny model has 21 weight tensors (gdpo_verl/cpu_run/tiny_model.py): what a weight sync sends.
TENSORS = 21
OTHER_VERL = ROOT / "tests" / "fixtures" / "other_verl"

pytestmark = pytest.mark.cpu_training


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
        hogs = f'for _ in $(seq {busy}); do {sys.executable} -c "while True: pass" </dev/null >/dev/null 2>&1 & echo $! >> "{out}/busy.pids"; done'
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


# The main job's start-up made slow on purpose, where the run's supervisor once did not see it: with the test-only
# switch in tests/e2e/slow_actor_start (a sitecustomize first on PYTHONPATH), the Ray worker that becomes verl's
# TaskRunner computes for SLOW_START_S before it loads the class, still titled ray::IDLE, while the rest of the run
# waits for it. That alone is longer than the STALL_TIMEOUT the run gets and than the supervisor's 30 s window.
STALL_TIMEOUT_S = 20
SLOW_START_S = STALL_TIMEOUT_S + supervise.WORK_WINDOW_S + 10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The main job, run once for the tests below, beside as many busy processes as the machine has cores, in its
    own session, and with a start-up slower than its STALL_TIMEOUT: a run on a busy machine, or whose start-up is
    slow, may be slower, never stopped for it (test_the_run_finishes_beside_..., test_a_start_up_...)."""
    out = tmp_path_factory.mktemp("cpu_training")
    cores = len(os.sched_getaffinity(0))
    slow_start = {
        "SLOW_ACTOR_START": f"TaskRunnerV1:{SLOW_START_S:g}:{out / 'slow_start.json'}",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "slow_actor_start"),
                                       *filter(None, [os.environ.get("PYTHONPATH")])]),
        "STALL_TIMEOUT": str(STALL_TIMEOUT_S),
        # where torch's inductor would keep what it compiled, in any process of the run
        "TORCHINDUCTOR_CACHE_DIR": str(out / "torchinductor"),
    }
    process = None
    try:
        started = time.monotonic()
        # a checkpoint after each step, for the V1 resume test to go on from (the default job saves after its last)
        process = start_run(out, STEPS, "trainer.save_freq=1", busy=cores, env=slow_start)
        stdout, stderr = process.communicate(timeout=2400)
    finally:
        if process is not None:
            stop_run(process)
        stop_busy(out)
    minutes = (time.monotonic() - started) / 60
    log = out / "run.log"  # written by gdpo_verl/cpu_run/supervise.py
    assert process.returncode == 0, (
        f"the run failed beside {cores} busy processes (log: {log}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
    )
    print(f"CPU training run beside {cores} busy processes: {minutes:.1f} minutes")
    return out, stdout


def test_both_steps_train_with_gdpo_and_change_the_weights(run):
    out, stdout = run
    lines, problems, no_signal = check_run.check(out, STEPS)
    assert problems == [] and no_signal is None
    assert "GDPO CPU training run: OK (2 steps" in stdout
    assert lines[-1].startswith("weights: 21 of 21 tensors changed")


def test_the_readmes_sample_output_is_what_the_run_prints_numbers_aside(run):
    # README, "Try it": the lines it shows after the run, each printed by the main job (its numbers vary by run)
    _, stdout = run
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("there. It says what it is doing"):]
    block = block[block.index("```\n") + 4:]
    sample = block[:block.index("```")].strip().splitlines()
    def shape(text: str) -> str:  # numbers and the outputs' folder aside
        return re.sub(r"[-+]?\d+(?:\.\d+)?", "N", re.sub(r"outputs in \S+\)", "outputs in PATH)", text))

    printed = [shape(line) for line in stdout.splitlines()]
    for line in sample:
        assert any(shown.endswith(shape(line)) for shown in printed), (line, stdout[-2000:])


def test_each_step_scored_every_response_with_both_rewards(run):
    out, _ = run
    records = check_run.step_records(out)
    assert sorted(records) == [1, 2]
    for record in records.values():
        # 8 prompts x 4 responses; groups of 4 by uid; rewards from gdpo_verl.rewards.math_length
        assert len(record["uid"]) == 32 and len(set(record["uid"])) == 8
        assert set(record["rewards"]) == {"correct", "length"}
        assert all(value in (0.0, 1.0) for values in record["rewards"].values() for value in values)
        # the length reward is 1 exactly for responses of at most 8 tokens (max_length=8)
        assert record["rewards"]["length"] == [float(n <= 8) for n in record["response_length"]]


def test_nothing_in_the_run_compiles_with_torch_compile(run):
    # Before: verl's FSDP engine (its entropy function) and vLLM's CPU sampler were compiled by inductor, which ran the
    # machine's C++ compiler in the run's workers (scripts/cpu_main_ppo.sh sets TORCH_COMPILE_DISABLE)
    out, _ = run
    cache = out / "torchinductor"  # the folder may be made (vLLM sets inductor up on import); nothing is put in it
    assert not cache.exists() or [path for path in cache.rglob("*") if path.is_file()] == []


def test_the_trainer_logged_the_plugin_metrics_next_to_its_own(run):
    out, _ = run
    metrics = check_run.step_metrics(out)
    for step in (1, 2):
        data = metrics[step]
        assert data["training/global_step"] == step
        assert all(name in data for name in check_run.gdpo_metrics(("correct", "length")))
        # the plugin's per-reward means agree with verl's reward log of the same step
        assert data["gdpo/correct/mean"] + data["gdpo/length/mean"] == pytest.approx(data["critic/score/mean"])
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1


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
        # (tests/e2e/test_supervise.py: test_parts_found_dead_in_the_same_look_are_all_named)
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


def test_a_run_killed_in_a_step_resumes_from_its_checkpoint_with_no_step_lost_or_doubled(run, tmp_path):
    # One run that goes on from the main job's checkpoint through verl's legacy trainer and the V1 trainer's two
    # asynchronous modes, each resuming from the checkpoint the one before left (a checkpoint is the same files
    # whichever trainer or mode wrote it), two of them killed inside a step: both trainers number the records by
    # their own global step, and no step may be lost or doubled.
    every_step = ["trainer.save_freq=1", *MIXED_TASK]
    # 1. two steps under sync, a checkpoint after each: the main job's run (the run fixture), copied
    shutil.copytree(run[0], tmp_path, dirs_exist_ok=True)
    assert latest_checkpoint(tmp_path) == 2
    # 2. the legacy trainer (RayPPOTrainer.fit), without TransferQueue, as on verl's neo branch or an install without
    # it: the legacy trainer must stand on its own (tests/fixtures/other_verl/sitecustomize.py hides it from every
    # process of the run). From the step-2 checkpoint: step 3 (it did not start again at step 1); its vLLM engine
    # core killed in step 4, and the run must stop by itself, naming it, with everything it started
    no_transfer_queue = tmp_path / "no_transfer_queue.txt"
    run_killed_in_step(tmp_path, 6, 4, *every_step, "trainer.use_v1=False", resume=True,
                       env={"NO_TRANSFER_QUEUE": str(no_transfer_queue)}, kill="engine")
    assert "transfer_queue" in no_transfer_queue.read_text().split()  # looked for, not found
    # On the V1 trainer (trainer.use_v1=True) the asynchronous modes' checkpoints also hold TransferQueue's state,
    # with the rollouts generated ahead, which the next run may train on first.
    v1 = [*every_step, "trainer.use_v1=True"]
    # 3. separate_async without a warm-up batch, from the step-3 checkpoint (the legacy trainer's, no rollouts in
    # it): step 4 on rollouts its own server generated after the trainer sent it the checkpoint's weights over TCP;
    # its driver killed in step 5
    run_killed_in_step(tmp_path, 6, 5, *v1, "trainer.v1.separate_async.num_warmup_batches=0", resume=True,
                       env={"TRAINER": "separate_async"})
    metrics = check_run.step_metrics(tmp_path)
    assert metrics[4][STALENESS] == 0 and metrics[4][PROBS_DIFF] < MAX_PROBS_DIFF  # the sync reached vLLM
    assert metrics[4][SENT] == TENSORS
    # 4. under colocate_async, from the step-4 checkpoint (with what separate_async's TransferQueue held): steps 5, 6
    stdout = finish_run(start_run(tmp_path, 6, *v1, resume=True, env={"TRAINER": "colocate_async"}),
                        "the run resumed after the kills")
    check_resumed(tmp_path, 6, (4, 5), stdout)
    # steps 1 and 2 are the main job's (the math reward alone, weights 1); on from step 3, the mixed-task batch
    check_mixed_task_steps(tmp_path, [3, 4, 5, 6])


def test_the_run_finishes_beside_as_many_busy_processes_as_the_machine_has_cores(run):
    # Before: with both cores of a 2-core machine kept busy, the run was stopped by its own checks while healthy
    # (the node check's probe had not answered in 120 s and was called "not installed", then "died"; a slow
    # step "made no progress for 300 s"). Slower is fine; stopped is not. The run fixture runs beside them.
    out, stdout = run
    assert "GDPO CPU training run: OK (2 steps" in stdout
    assert check_run.check(out, STEPS)[1] == []


def test_a_start_up_slower_than_the_stall_timeout_is_slow_not_stalled(run):
    # Before: the supervisor counted the CPU of the processes it knew as parts by their titles; the Ray worker that
    # becomes the TaskRunner is titled ray::IDLE while it loads the class (imports verl, torch and vLLM: minutes on
    # a busy machine), so with everything else waiting on it the run was "idle" and stopped after STALL_TIMEOUT.
    out, stdout = run
    slow = json.loads((out / "slow_start.json").read_text())
    assert slow["title"].startswith("ray::IDLE"), slow  # invisible to a count of parts by title
    assert slow["seconds"] >= STALL_TIMEOUT_S + supervise.WORK_WINDOW_S
    assert "GDPO CPU training run: OK (2 steps" in stdout
