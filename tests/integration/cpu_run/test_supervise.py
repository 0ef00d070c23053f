"""gdpo_verl/cpu_run/supervise.py on stand-in commands: each way a run can die or stall ends in seconds with a message,
and nothing the command started is left running. Real processes and signals; no vLLM or Ray needed (the real
CPU run with its vLLM engine core killed is tests/e2e/test_cpu_training.py's resume test)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gdpo_verl.cpu_run import supervise
from gdpo_verl.cpu_run.narrate import Cause, step_line

SUPERVISE = ["-m", "gdpo_verl.cpu_run.supervise"]


def start(tmp_path: Path, script: str, *options: str) -> subprocess.Popen:
    """Supervise ``bash -c script`` (run in tmp_path; it may write metrics.jsonl there)."""
    return subprocess.Popen(
        [sys.executable, *SUPERVISE, "--log", str(tmp_path / "run.log"), "--metrics",
         str(tmp_path / "metrics.jsonl"), "--poll", "0.2", *options, "--", "bash", "-c", script],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(process: subprocess.Popen, limit: float = 60) -> tuple[int, str, float]:
    started = time.monotonic()
    _, stderr = process.communicate(timeout=limit)
    return process.returncode, stderr, time.monotonic() - started


def wait_for(path: Path, limit: float = 30) -> str:
    deadline = time.monotonic() + limit
    while not (path.is_file() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)
    return path.read_text().strip()


def assert_gone(pids: list[int]) -> None:
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def log_step(step: int) -> str:
    return f"echo '{json.dumps({'step': step, 'data': {}})}' >> metrics.jsonl"


# A stand-in for vLLM's engine core: a process titled as vLLM titles it, which the test kills.
ENGINE = "(exec -a VLLM::EngineCore sleep 600) & echo $! > engine.pid"
# A grandchild the command orphans: the supervisor, as subreaper, must still stop it.
ORPHAN = "bash -c 'sleep 600 & echo $! > orphan.pid' ; "


def test_a_dead_engine_core_stops_the_run_that_keeps_waiting_on_it(tmp_path):
    process = start(tmp_path, f"{ORPHAN}{ENGINE}; {log_step(1)}; sleep 600", "--steps", "3", "--grace", "1")
    engine = int(wait_for(tmp_path / "engine.pid"))
    orphan = int(wait_for(tmp_path / "orphan.pid"))
    time.sleep(1)  # seen by the supervisor
    os.kill(engine, signal.SIGKILL)
    code, stderr, seconds = finish(process)
    assert code == 1
    assert f"VLLM::EngineCore (pid {engine}, the vLLM engine core) died during step 2 of 3" in stderr
    assert "did not stop by itself within 1 s" in stderr and f"Log: {tmp_path / 'run.log'}" in stderr
    assert seconds < 20
    assert_gone([orphan])
    assert "CPU training run stopped" in (tmp_path / "run.log").read_text()


def test_a_run_that_fails_after_a_part_died_names_both(tmp_path):
    process = start(tmp_path, f"{ENGINE}; wait; sleep 2; exit 7", "--steps", "2", "--grace", "30")
    engine = int(wait_for(tmp_path / "engine.pid"))
    time.sleep(1)
    os.kill(engine, signal.SIGKILL)
    code, stderr, seconds = finish(process)
    assert code == 1 and seconds < 20
    assert "VLLM::EngineCore" in stderr and "died before the first step, and the training command exited with code 7" in stderr


def test_parts_found_dead_in_the_same_look_are_all_named(tmp_path):
    # Before: only the first in the supervisor's list was named, which could be an actor verl shut down because the
    # engine core had died, and not the engine core.
    worker = "(exec -a VLLM::Worker sleep 600) & echo $! > worker.pid"
    actor = "(exec -a ray::Storage sleep 600) & echo $! > actor.pid"
    process = start(tmp_path, f"{actor}; {ENGINE}; {worker}; {log_step(1)}; sleep 600", "--steps", "3", "--grace", "1",
                    "--poll", "2")
    pids = [int(wait_for(tmp_path / name)) for name in ("actor.pid", "engine.pid", "worker.pid")]
    time.sleep(2.5)  # seen by the supervisor
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    code, stderr, _ = finish(process)
    assert code == 1
    assert (f"ray::Storage (pid {pids[0]}, Ray actor Storage), VLLM::EngineCore (pid {pids[1]}, the vLLM engine core) "
            f"and VLLM::Worker (pid {pids[2]}, a vLLM worker) died (found dead in the same look) during step 2 of 3"
            in stderr), stderr


def test_a_part_that_dies_while_the_supervisor_looks_is_found_dead(tmp_path):
    # Before: a part that ended between the listing of the run's processes and the reading of its title was taken
    # for "no part" and forgotten, so its death was never seen (a CI run killed vLLM's engine core, and only the
    # vLLM worker that died after it was named). The race is made certain here: the look gets the list of
    # processes taken before the kill.
    engine = subprocess.Popen(["bash", "-c", "exec -a VLLM::EngineCore sleep 600"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(engine.pid).cmdline()[:1] != ["VLLM::EngineCore"]:
            assert time.monotonic() < deadline, "the stand-in engine core never took its title"
            time.sleep(0.05)
        supervisor = supervise.Supervisor(supervise.parse_args(
            ["--log", str(tmp_path / "run.log"), "--metrics", str(tmp_path / "metrics.jsonl"), "--steps", "2", "--",
             "true"]))
        listed = [psutil.Process(engine.pid)]
        supervisor.running = lambda: listed  # the run's processes: the engine core alone
        supervisor.reap = lambda: None  # this test's process collects its own child
        assert supervisor.look() == [] and list(supervisor.parts) == [engine.pid]
        engine.kill()
        while psutil.Process(engine.pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
        dead = supervisor.look()  # with the list taken while it still ran
    finally:
        engine.kill()
        engine.wait()
    assert [(part.pid, part.title) for part in dead] == [(engine.pid, "VLLM::EngineCore")]


def test_a_step_that_makes_no_progress_stops_the_run(tmp_path):
    process = start(tmp_path, f"{ORPHAN}{log_step(1)}; sleep 600", "--steps", "2", "--stall-timeout", "3")
    orphan = int(wait_for(tmp_path / "orphan.pid"))
    code, stderr, seconds = finish(process)
    assert code == 1 and seconds < 20
    assert "step 2 of 2 made no progress for 3 s (no step logged and its processes idle; STALL_TIMEOUT)" in stderr
    assert_gone([orphan])


# A part that works without logging a step: a process titled as vLLM's engine core that keeps a core busy.
BUSY_ENGINE = f"(exec -a VLLM::EngineCore {sys.executable} -c 'while True: pass') & echo $! > engine.pid"


def test_a_step_that_works_longer_than_the_stall_timeout_is_slow_not_stalled(tmp_path):
    # Before: any 3 s without a new step was a stall, so a healthy run on a busy machine was stopped.
    script = f"{BUSY_ENGINE}; {log_step(1)}; sleep 8; {log_step(2)}; kill $(cat engine.pid)"
    process = start(tmp_path, script, "--steps", "2", "--stall-timeout", "3")
    code, stderr, seconds = finish(process)
    assert code == 0, stderr
    assert seconds > 8


# A Ray worker that is becoming an actor: titled ray::IDLE until the actor's class is loaded, which on a busy machine
# takes minutes of imports (verl, torch, vLLM). It is no part of the run (nothing died when it ends), but its work is.
IDLE_WORKER = "(exec -a ray::IDLE {command}) & echo $! > worker.pid"


def test_a_ray_worker_still_titled_idle_that_works_keeps_the_run_alive(tmp_path):
    # Before: only parts (actors, raylet, GCS, the command) were counted as work, so the TaskRunner's worker importing
    # for longer than STALL_TIMEOUT, with everything else waiting on it, was a stall.
    busy = IDLE_WORKER.format(command=f"{sys.executable} -c 'import time; end = time.process_time() + 6\n"
                                      "while time.process_time() < end: pass'")
    process = start(tmp_path, f"{busy}; wait; {log_step(1)}", "--steps", "1", "--stall-timeout", "3")
    code, stderr, seconds = finish(process)
    assert code == 0, stderr
    assert seconds > 6 and "died" not in stderr


def test_a_ray_worker_still_titled_idle_that_sleeps_is_a_stall_named_as_such(tmp_path):
    process = start(tmp_path, f"{IDLE_WORKER.format(command='sleep 600')}; wait; {log_step(1)}", "--steps", "1",
                    "--stall-timeout", "3")
    worker = int(wait_for(tmp_path / "worker.pid"))
    code, stderr, seconds = finish(process)
    assert code == 1 and seconds < 20
    assert "step 1 of 1 made no progress for 3 s (no step logged and its processes idle; STALL_TIMEOUT)" in stderr
    assert "died" not in stderr
    assert_gone([worker])


def beside_a_pinned_hog(tmp_path, cpu: int, command: str, stall_timeout: float = 3,
                        idle_first: float = 0) -> tuple[int, str, float]:
    """A one-step run of ``command`` (started after ``idle_first`` s of sleep) with a stall timeout of
    ``stall_timeout`` s, beside a busy process outside the run on one CPU (started from the test's session, as the
    run is, so that the kernel weighs the two against each other: autogroups share a CPU between sessions first):
    its exit code, stderr and seconds."""
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        process = start(tmp_path, f"sleep {idle_first:g}; {IDLE_WORKER.format(command=command)}; wait; {log_step(1)}",
                        "--steps", "1", "--stall-timeout", f"{stall_timeout:g}")
        return finish(process)
    finally:
        hog.kill()
        hog.wait()


def starved_spinner(cpu: int) -> str:
    """A process that spins for 8 s of wall-clock time on ``cpu`` at the lowest priority (SCHED_IDLE)."""
    return (f"{sys.executable} -c 'import os, time; os.sched_setaffinity(0, {{{cpu}}}); "
            "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)); end = time.monotonic() + 8\n"
            "while time.monotonic() < end: pass'")


def test_a_run_starved_of_cpu_by_other_work_is_slow_not_stalled(tmp_path):
    # Before: a run whose processes got almost no CPU because other work held it (Ray nices its workers to 15, so
    # two busy processes of the user's shell left its actors about 3% of a core) used less than WORKING_CORES and
    # was stopped as stalled while it wanted the CPU all along. Here a process of the run on the hog's CPU, at the
    # lowest priority (SCHED_IDLE), spins for 8 s of wall-clock time.
    cpu = min(os.sched_getaffinity(0))
    code, stderr, seconds = beside_a_pinned_hog(tmp_path, cpu, starved_spinner(cpu))
    assert code == 0, stderr
    assert seconds > 8


def test_a_starved_process_that_starts_late_is_measured_from_its_start(tmp_path):
    # Before: a thread that began after the oldest look kept was measured against the whole window, so a starved
    # process that started 3 s into an idle wait (or whose start a busy machine delayed) had to spin beside the
    # hog for as long again before it counted as wanting the CPU: after 6 s, past a stall timeout of 5 s.
    cpu = min(os.sched_getaffinity(0))
    code, stderr, seconds = beside_a_pinned_hog(tmp_path, cpu, starved_spinner(cpu), stall_timeout=5, idle_first=3)
    assert code == 0, stderr
    assert seconds > 11


def test_a_thread_that_waits_for_a_cpu_and_gets_none_wants_it(tmp_path):
    # Before: only the counters of /proc/<pid>/task/<tid>/schedstat counted, and the kernel adds a wait to them when
    # the thread next gets a CPU. A SCHED_IDLE spinner beside a hog and a CPU training run got none for up to 3.4 s,
    # its counters stood still, and its run was stopped as stalled (seen twice in full runs of the suite). The
    # thread's state says it is waiting; the kernel cannot be made to starve a thread on cue, so the looks are
    # given here, after a check that the states are read from real threads.
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        time.sleep(0.5)
        seen = supervise.thread_run_times([psutil.Process(spinner.pid), psutil.Process(sleeper.pid)])
    finally:
        for process in (spinner, sleeper):
            process.kill()
            process.wait()
    assert seen[spinner.pid, spinner.pid][1] and not seen[sleeper.pid, sleeper.pid][1]

    supervisor = supervise.Supervisor(supervise.parse_args(
        ["--log", str(tmp_path / "run.log"), "--metrics", str(tmp_path / "metrics.jsonl"), "--steps", "1", "--",
         "true"]))
    starved, woken, sleeping = (1, 1), (1, 2), (1, 3)
    supervisor.waits = [(at, {starved: (1.0, True), woken: (1.0, at == 4.0), sleeping: (1.0, False)})
                        for at in (0.0, 1.0, 2.0, 3.0, 4.0)]
    assert supervisor.a_thread_wants_cpu()  # runnable for 4 s with its counters still: waiting all along
    del supervisor.waits[-1][1][starved]
    assert not supervisor.a_thread_wants_cpu()  # a thread that has just woken up has not waited yet
    supervisor.waits = [(at, {starved: (1.0, at >= 2.0)}) for at in (0.0, 1.0, 2.0, 3.0, 4.0)]
    assert supervisor.a_thread_wants_cpu()  # runnable from 2 s of 4: half the time
    supervisor.waits = [(at, {starved: (1.0, at >= 3.0)}) for at in (0.0, 1.0, 2.0, 3.0, 4.0)]
    assert not supervisor.a_thread_wants_cpu()
    supervisor.log.close()


def test_a_waiting_run_whose_threads_wake_often_beside_busy_work_is_still_a_stall(tmp_path):
    # The run's threads wake up now and then while it waits (Ray's and vLLM's event loops: a hung CPU run's 608
    # threads used 0.13 cores), and beside busy work each wake-up waits for a CPU: together they wait more than
    # WORKING_CORES, but no one thread wants a CPU most of the time. 200 threads waking every 20 ms, on a hog's CPU
    # (measured: 0.08 cores of CPU, 0.68 core-seconds a second running or runnable in all, 0.5% for the busiest).
    cpu = min(os.sched_getaffinity(0))
    wakers = (f"{sys.executable} -c 'import os, threading, time; os.sched_setaffinity(0, {{{cpu}}})\n"
              "def wake():\n    while True: time.sleep(0.02)\n"
              "[threading.Thread(target=wake, daemon=True).start() for _ in range(200)]\ntime.sleep(600)'")
    code, stderr, seconds = beside_a_pinned_hog(tmp_path, cpu, wakers)
    assert code == 1 and seconds < 30
    assert "step 1 of 1 made no progress for 3 s (no step logged and its processes idle; STALL_TIMEOUT)" in stderr


def test_a_kernel_that_does_not_report_cpu_waits_is_said_once(tmp_path):
    # Without /proc/<pid>/task/<tid>/schedstat only CPU time counts, and the run says so rather than judge quietly
    # (a process of its own: the supervisor makes itself a subreaper)
    absent = str(tmp_path / "absent" / "{pid}" / "{tid}")
    script = (f"import sys; from gdpo_verl.cpu_run import supervise; supervise.SCHEDSTAT = {absent!r}; "
              "sys.exit(supervise.main(sys.argv[1:]))")
    result = subprocess.run(
        [sys.executable, "-c", script, "--log", str(tmp_path / "run.log"), "--metrics", str(tmp_path / "metrics.jsonl"),
         "--steps", "1", "--poll", "0.2", "--", "bash", "-c", log_step(1)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("this kernel does not report how long a thread waits for a CPU") == 1
    assert "give it a larger STALL_TIMEOUT here" in (tmp_path / "run.log").read_text()


def test_work_outside_the_run_is_not_the_run_s(tmp_path):
    # a busy process the command did not start (another job on the machine) does not keep a waiting run alive
    outsider = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        process = start(tmp_path, f"{log_step(1)}; sleep 600", "--steps", "2", "--stall-timeout", "3")
        code, stderr, seconds = finish(process)
    finally:
        outsider.kill()
        outsider.wait()
    assert code == 1 and seconds < 20
    assert "step 2 of 2 made no progress for 3 s" in stderr


def test_a_step_that_works_past_the_step_timeout_is_stopped(tmp_path):
    process = start(tmp_path, f"{BUSY_ENGINE}; {log_step(1)}; sleep 600", "--steps", "2", "--stall-timeout", "3",
                    "--step-timeout", "6")
    engine = int(wait_for(tmp_path / "engine.pid"))
    code, stderr, seconds = finish(process)
    assert code == 1 and seconds < 30
    assert "step 2 of 2 did not finish within 6 s, though its processes kept working (STEP_TIMEOUT)" in stderr
    assert_gone([engine])


def test_a_ray_task_worker_that_ends_is_no_dead_part(tmp_path):
    # Before: the node check's probe (ray::resolve), cancelled or done, was "ray::resolve ... died before the
    # first step", and a healthy run was stopped.
    script = f"(exec -a ray::resolve sleep 1) & sleep 3; {log_step(1)}"
    process = start(tmp_path, script, "--steps", "1", "--grace", "1")
    code, stderr, _ = finish(process)
    assert code == 0, stderr
    assert "died" not in stderr


def test_a_process_forked_from_a_part_with_its_title_is_no_part_of_its_own(tmp_path):
    # Before: a helper forked from verl's TaskRunner actor process keeps the actor's title; when it ended, the run
    # was stopped with "ray::TaskRunnerV1.run (pid ..., Ray actor TaskRunnerV1) died before the first step", while
    # the actor worked on (seen in a full run of the test suite)
    forks = ("import os, time\nif os.fork() == 0:\n    time.sleep(2)\n    os._exit(0)\ntime.sleep(8)")
    script = f"(exec -a ray::TaskRunnerV1.run {sys.executable} -c '{forks}') & sleep 5; {log_step(1)}"
    process = start(tmp_path, script, "--steps", "1", "--grace", "1")
    code, stderr, _ = finish(process)
    assert code == 0, stderr
    assert "died" not in stderr


def test_a_run_that_logged_every_step_but_does_not_exit_is_stopped(tmp_path):
    process = start(tmp_path, f"{log_step(1)}; sleep 600", "--steps", "1", "--stall-timeout", "2")
    code, stderr, _ = finish(process)
    assert code == 1 and "all 1 steps were logged, but the command did not exit for 2 s" in stderr


def test_parts_that_end_after_the_last_step_are_a_normal_shutdown(tmp_path):
    script = f"{ORPHAN}{ENGINE}; sleep 1; {log_step(1)}; sleep 1; kill -9 $(cat engine.pid); sleep 1; echo done"
    process = start(tmp_path, script, "--steps", "1", "--grace", "0")
    orphan = int(wait_for(tmp_path / "orphan.pid"))
    code, stderr, _ = finish(process)
    assert code == 0, stderr
    assert "done" in (tmp_path / "run.log").read_text()
    assert_gone([orphan])


def test_the_command_exit_code_is_reported(tmp_path):
    process = start(tmp_path, "echo boom >&2; exit 3", "--steps", "1")
    code, stderr, _ = finish(process)
    assert code == 3
    assert "the training command exited with code 3. " in stderr
    assert "boom" in (tmp_path / "run.log").read_text()


def test_the_first_error_the_run_printed_leads_the_last_line(tmp_path):
    # a Ray actor's exception reaches the driver, which prints its traceback and exits; verl's actors die as it
    # shuts down, and one seen dead first was named alone. A line that only looks like an error (no traceback) is none
    printed = ("echo '(Worker pid=1) ValueError: handled in the worker'; echo 'Traceback (most recent call last):'; "
               "echo \"AssertionError: Conflicting values for meta_info key 'reward_extra_keys'\"; "
               "echo 'Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.'; exit 1")
    process = start(tmp_path, printed, "--steps", "1")
    code, stderr, _ = finish(process)
    assert code == 1
    assert stderr.splitlines()[-1].startswith(
        "CPU training run stopped: AssertionError: Conflicting values for meta_info key 'reward_extra_keys'; then the "
        "training command exited with code 1. Stopped every process it started")


def test_a_reward_workers_error_leads_where_verl_then_fails_for_its_own_reason(tmp_path):
    # verl's V1 trainer: the agent loop worker logs the reward's exception (wrapped by Ray) and marks the group failed;
    # the driver then raises its replay buffer's error, which names no cause. The worker's message is whole, not cut
    message = "compute_score returned no corect, " + "which names a key " * 30 + "did you mean correct?"
    worker = "\\033[36m(AgentLoopWorkerTQ pid=9)\\033[0m "
    printed = (f"printf '{worker}Traceback (most recent call last):\\n'; "
               f"printf '{worker}ray.exceptions.RayTaskError(ValueError): ray::RewardLoopWorker.compute_score() (pid=8)\\n'; "
               f"printf '{worker}  File \"x.py\", line 1, in f\\n'; printf '{worker}ValueError: {message}\\n'; "
               "echo 'Traceback (most recent call last):'; echo 'RuntimeError: Sync replay buffer selected terminal "
               "groups with no materializable trajectories.'; exit 1")
    code, stderr, _ = finish(start(tmp_path, printed, "--steps", "1"))
    assert code == 1
    assert stderr.splitlines()[-1].startswith(
        f"CPU training run stopped: ValueError: {message} (raised in AgentLoopWorkerTQ, the run's first error); then "
        "the training command exited with code 1.")


def test_hydras_refusal_of_a_misspelled_override_is_read_as_the_key_and_its_fix(tmp_path):
    printed = ("echo \"Could not override 'trainer.loger'.\"; echo 'To append to your config use +trainer.loger=x'; "
               "echo \"Key 'loger' is not in struct\"; echo '    full_key: trainer.loger'; echo '    object_type=dict'; "
               "echo; echo 'Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.'; exit 1")
    code, stderr, _ = finish(start(tmp_path, printed, "--steps", "1"))  # a stand-in command: no config to compose
    assert code == 1
    assert stderr.splitlines()[-1].startswith(
        "CPU training run stopped: the override trainer.loger names no key of the config: check its spelling; a key "
        "the config lacks by design takes a + (+trainer.loger=...); then the training command exited with code 1.")


def test_a_command_that_ends_early_without_an_error_is_an_error(tmp_path):
    process = start(tmp_path, f"{log_step(1)}; {log_step(2)}", "--steps", "3")
    code, stderr, _ = finish(process)
    assert code == 1 and "the training command exited (code 0) after logging 2 of 3 steps" in stderr


def test_sigterm_to_the_supervisor_stops_everything(tmp_path):
    process = start(tmp_path, f"{ORPHAN}{ENGINE}; sleep 600", "--steps", "1")
    engine, orphan = int(wait_for(tmp_path / "engine.pid")), int(wait_for(tmp_path / "orphan.pid"))
    process.send_signal(signal.SIGTERM)
    code, stderr, _ = finish(process)
    assert code == 130 and "interrupted" in stderr
    assert_gone([engine, orphan])


@pytest.mark.parametrize(
    "options, message",
    [
        (["--steps", "0"], "--steps >= 1"),
        (["--steps", "1", "--stall-timeout", "0"], "--stall-timeout and --step-timeout must be > 0"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(tmp_path, options, message):
    process = start(tmp_path, "touch started", *options)
    code, stderr, _ = finish(process)
    assert code == 2 and message in stderr
    assert not (tmp_path / "started").exists()


def test_without_a_command_it_says_what_to_give(tmp_path):
    result = subprocess.run(
        [sys.executable, *SUPERVISE, "--log", str(tmp_path / "log"), "--metrics", str(tmp_path / "m"),
         "--steps", "1"], capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 and "give the training command after --" in result.stderr


def test_a_half_written_metrics_line_is_read_on_the_next_look(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1, "data": {}}\n{"step": 2, "da')
    assert supervise.logged_steps(metrics) == {1: {}}
    assert supervise.logged_steps(tmp_path / "absent.jsonl") == {}


def test_by_default_the_terminal_gets_the_phases_a_heartbeat_and_one_line_per_step_the_log_everything(tmp_path):
    step = json.dumps({"step": 1, "data": {"gdpo/correct/mean": 0.25, "gdpo/short/mean": 1.0,
                                           "gdpo/short/zero_var_group_frac": 0.5, "timing_s/step": 1.5}})
    process = start(tmp_path, f"echo chatter; echo 'ray init kwargs: {{}}'; sleep 2; echo '{step}' >> metrics.jsonl; "
                    "sleep 1", "--steps", "1", "--label", "gdpo seed 3", "--heartbeat", "1")
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    lines = stdout.splitlines()
    assert lines[0].startswith("gdpo seed 3 ") and lines[0].endswith("s  starting verl's entry point (importing "
                                                                     "verl, torch and vLLM)")
    assert lines[1].endswith("s  starting Ray")
    assert "... still: starting Ray (" in lines[2] and "cores busy)" in lines[2]  # silent past the heartbeat
    assert lines[-1] == "gdpo seed 3 step 1 of 1: correct 0.250  short 1.000  1.5 s"
    assert "chatter" not in stdout and "chatter" in (tmp_path / "run.log").read_text()


def test_verbose_puts_the_whole_output_on_the_terminal(tmp_path):
    process = start(tmp_path, f"echo chatter; {log_step(1)}", "--steps", "1", "--verbose")
    stdout, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and stdout == "chatter\n"


def test_a_step_logged_under_the_next_weight_version_counts_for_the_step_it_trained(tmp_path):
    # verl's fully asynchronous trainer logs its rollouter's timing under weight versions 0, 1, 2 and step 1's training
    # metrics under version 2 (training/global_step 1): the progress line of step 1 shows step 1's rewards
    lines = [{"step": 0, "data": {"timing": 1.0}}, {"step": 1, "data": {"timing": 2.0}},
             {"step": 2, "data": {"training/global_step": 1, "gdpo/correct/mean": 0.25}}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    logged = supervise.logged_steps(tmp_path / "metrics.jsonl")
    assert logged == {0: {"timing": 1.0}, 1: {"timing": 2.0, "training/global_step": 1, "gdpo/correct/mean": 0.25}}
    assert "correct 0.250" in step_line(1, 2, logged[1])


# What Ray prints when its raylet does not register within its fixed 30 s (ray/_private/node.py)
RAY_START_FAILED = (f"echo 'Exception: {supervise.RAY_NODE_TIMEOUT}. This could happen because some of the raylet "
                    "failed to startup or the GCS has become overloaded.'; exit 1")


def test_a_run_whose_ray_node_did_not_register_in_time_is_started_again_once_and_says_so(tmp_path):
    # the first try fails as Ray does on a busy machine; the second runs
    process = start(tmp_path, f"if [ -e tried ]; then {log_step(1)}; else touch tried; {RAY_START_FAILED}; fi",
                    "--steps", "1")
    code, stderr, _ = finish(process)
    assert code == 0, stderr
    assert "starting the run again (try 2 of 2)" in stderr
    log = (tmp_path / "run.log").read_text()
    assert supervise.RAY_NODE_TIMEOUT in log and "try 2 of 2" in log  # both tries' output kept


def test_ray_s_start_failing_again_or_after_a_step_or_another_failure_is_not_tried_again(tmp_path):
    for name, script in {"twice": RAY_START_FAILED, "after a step": f"{log_step(1)}; {RAY_START_FAILED}",
                         "another failure": "echo 'ValueError: bad'; exit 1"}.items():
        directory = tmp_path / name.replace(" ", "_")
        directory.mkdir()
        (directory / "count").write_text("")
        code, stderr, _ = finish(start(directory, f"echo x >> count; {script}", "--steps", "2"))
        assert code == 1, name
        tries = len((directory / "count").read_text().split())
        assert tries == (2 if name == "twice" else 1), (name, stderr)
        assert "CPU training run stopped" in stderr.splitlines()[-1], name


def first_error(text: str) -> str:
    cause = Cause()
    for line in text.splitlines():
        cause.read(line)
    return str(cause)


def test_the_cause_of_a_chain_is_its_last_link_and_a_vllm_traceback_is_read_through_its_log_prefix():
    # gdpo-verl's messages wrap what they caught (raise ... from exc): Python prints the wrapping exception last. Here
    # the reward manager's timeout, inside Ray's wrapper, after asyncio's cancellation
    worker = "\x1b[36m(AgentLoopWorkerTQ pid=9)\x1b[0m "
    chain = ["Traceback (most recent call last):", "ray.exceptions.RayTaskError(TimeoutError): ray::X() (pid=1)",
             '  File "a", line 1, in f', "asyncio.exceptions.CancelledError", "",
             "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "b", line 2, in g', "TimeoutError", "",
             "The above exception was the direct cause of the following exception:", "",
             "Traceback (most recent call last):", '  File "c", line 3, in h',
             "TimeoutError: compute_score did not return within 600 s"]
    driver = ["Traceback (most recent call last):", "RuntimeError: Sync replay buffer selected terminal groups"]
    assert first_error("\n".join([worker + line for line in chain] + driver)) == (
        "TimeoutError: compute_score did not return within 600 s (raised in AgentLoopWorkerTQ, the run's first error)")
    # vLLM's logger: its level, time and place before each line, \r after; the driver only says "see above"
    engine = "\x1b[36m(vLLMHttpServer pid=1)\x1b[0m (EngineCore pid=2) ERROR 12-05 13:22:43 [core.py:9] "
    lines = [engine + line + "\r" for line in ("Traceback (most recent call last):", '  File "x", line 1, in f',
                                                "ValueError: No available memory for the cache blocks.")]
    assert first_error("\n".join(lines + ["Traceback (most recent call last):", "RuntimeError: Engine core "
                                          "initialization failed. See root cause above."])).startswith(
        "ValueError: No available memory for the cache blocks. (raised in EngineCore")
    # any exception class, and a logger's line printed meanwhile is none
    assert first_error("Traceback (most recent call last):\n  File \"x\"\nINFO:2026-12-05:actor ready\n"
                       "omegaconf.errors.MissingMandatoryValue: Missing mandatory value: data.train_files") == (
        "omegaconf.errors.MissingMandatoryValue: Missing mandatory value: data.train_files")
    # a second, separate error does not replace the first
    assert first_error("Traceback (most recent call last):\nKeyError: 'a'\nTraceback (most recent call last):\n"
                       "ValueError: later") == "KeyError: 'a'"
