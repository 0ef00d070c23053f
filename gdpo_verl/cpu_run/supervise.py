"""Run a training command so that it can never hang: stop it, and every process it started, when a part of the
run dies or a step makes no progress.

    python -m gdpo_verl.cpu_run.supervise --log OUT/run.log --metrics OUT/metrics.jsonl --steps N \\
        [--stall-timeout 300] [--step-timeout 3600] [--grace 20] [--label TEXT] [--verbose] \
        -- python -m verl.trainer.main_ppo ...

The command's output goes to ``--log``; the terminal gets what a person reads of it (``narrate.py``: the start-up's
phases, a line when it was silent for 15 s, one line per finished step, and a failure's cause first), or with
``--verbose`` the whole output as well. Every second the supervisor looks at the processes
the command started (this process is their subreaper: Ray's and vLLM's processes stay under it even when their
parent dies) and at verl's metrics file (one line per finished step):

- a part of the run died: a Ray actor (``ray::<Class>``), Ray's raylet or GCS, vLLM's engine core or worker
  (``VLLM::...``) exited before the last step was logged. verl waits on a dead part in places that have no
  timeout (the weight sync blocks on a ZeroMQ reply), so the run gets ``--grace`` seconds to fail on its own,
  then it is stopped. A Ray task's worker (``ray::<function>``, such as gdpo-verl's node check) is no part: it
  ends, is cancelled or goes back to Ray's pool when its task is done;
- a stall: for ``--stall-timeout`` seconds no step was logged AND the run did no work: every process the command
  started, whatever its title, together used less than a quarter of a core over the last 30 s, and none of their
  threads was running or waiting in a run queue for a CPU half of that time. Work anywhere in the run counts as
  progress (a Ray worker still titled ``ray::IDLE`` while it imports verl, torch and vLLM for the actor it is
  becoming, a task's worker, vLLM's engine), and so does wanting a CPU that other work on the machine holds, so a
  run on a busy machine is slower, not stopped; a run that waits on something that never comes sleeps and is
  stopped. Which processes are parts (above) matters only for telling that one died;
- a step (or the start-up with the first step) longer than ``--step-timeout`` seconds, working or not: the bound
  on a run that spins without finishing;
- the command exited: its exit code, and an error when it logged fewer steps than ``--steps``.

In every case nothing the command started is left running: the supervisor terminates (then kills) every
descendant, Ray's included. When it stops the run it prints one line that leads with the cause, the first error any
process of the run printed (or hydra's refusal of an override, read as the key and its fix), then what died or
stalled and where the log is, and exits 1. Ctrl-C or SIGTERM stop the run the same way. One failure is no stop: Ray's fixed 30 s wait
for its node to register (``RAY_NODE_TIMEOUT``), which a busy machine can pass before anything of the run started;
the run is then started again, once, and the supervisor says so.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from gdpo_verl.cpu_run.narrate import HEARTBEAT_S, Cause, Narrator, step_line
from gdpo_verl.verl_adapter.file_logger import logged_step
from gdpo_verl.cpu_run.parts import Part, part_title

PR_SET_CHILD_SUBREAPER = 36
# The stop message names at most this many parts found dead in one look.
MAX_NAMED = 3
# The run is working while its processes use at least this much CPU (cores, averaged over WORK_WINDOW_S seconds),
WORKING_CORES = 0.25
WORK_WINDOW_S = 30.0
# ... or while one of its threads spends at least this fraction of the time on a CPU or waiting in a run queue for
# one: a run starved by other work on the machine (more busy processes than cores, a higher priority, a CPU quota)
# uses little CPU but wants it. A waiting run's threads sleep: measured beside two busy processes on 2 cores, the
# busiest thread of a hung CPU run (608 threads) spent 2% of its time running or runnable, and all of them together
# used 0.13 cores and waited 0.25 core-seconds a second for a CPU (wake-ups), which is why the sum is no measure.
WANTING_FRACTION = 0.5
# Per thread: nanoseconds on a CPU, nanoseconds runnable in a run queue, time slices (Documentation/scheduler/sched-stats).
# The kernel adds a wait to these when the thread gets a CPU, so a thread waiting now shows none of its current wait:
# its state (STAT, "R": running or runnable) says it is waiting.
SCHEDSTAT = "/proc/{pid}/task/{tid}/schedstat"
STAT = "/proc/{pid}/task/{tid}/stat"
# Ray waits a fixed 30 s (a constant in ray/_private/node.py, no setting) for a new node's raylet to register with
# its GCS, then raises with this line: on a machine busy enough that the raylet starts slowly, a run fails before
# anything of it has started. Such a run is started again, up to RAY_START_TRIES times in all, each try said.
RAY_NODE_TIMEOUT = "The current node timed out during startup"
RAY_START_TRIES = 2
def _closest_key(command, full_key):
    """The config key a misspelled override meant (``verl_adapter.for_cpu_run.config_keys``: composes the run's
    config, which imports verl; asked only once the run has failed on such an override)."""
    from gdpo_verl.verl_adapter.for_cpu_run.config_keys import closest_key

    return closest_key(command, full_key)


def thread_run_times(processes: list[psutil.Process]) -> dict[tuple[int, int], tuple[float, bool]]:
    """For each thread of these processes, by (pid, tid): the seconds it has spent on a CPU or waiting in a run queue
    for one up to its last time on a CPU, and whether it is running or runnable now."""
    times = {}
    for process in processes:
        try:
            threads = os.listdir(f"/proc/{process.pid}/task")
        except OSError:
            continue  # it ended meanwhile
        for tid in threads:
            try:
                with open(SCHEDSTAT.format(pid=process.pid, tid=tid), "rb") as schedstat:
                    running, waiting, _ = schedstat.read().split()
                with open(STAT.format(pid=process.pid, tid=tid), "rb") as stat:
                    state = stat.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, ValueError, IndexError):
                continue  # the thread ended meanwhile
            times[process.pid, int(tid)] = ((int(running) + int(waiting)) / 1e9, state == b"R")
    return times


def waits_are_reported() -> bool:
    """Whether this kernel reports the time a thread waits for a CPU (CONFIG_SCHED_INFO)."""
    return os.path.isfile(SCHEDSTAT.format(pid=os.getpid(), tid=threading.get_native_id()))


def logged_steps(metrics: Path) -> dict[int, dict]:
    """verl's file logger, one JSON line per step: ``{step: data}``; empty before the first step. A line is of the
    step ``file_logger.logged_step`` says; a later line of a step adds to what an earlier one logged."""
    if not metrics.is_file():
        return {}
    steps: dict[int, dict] = {}
    for line in metrics.read_text().splitlines():
        try:
            entry = json.loads(line)
            data = entry["data"]
            step = logged_step(entry)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line being written right now; the next look reads it whole
        steps[step] = {**steps.get(step, {}), **data}
    return steps


class Supervisor:
    def __init__(self, args: argparse.Namespace, append: bool = False):
        self.args = args
        self.parts: dict[int, Part] = {}
        self.log = args.log.open("a" if append else "w")
        self.lock = threading.Lock()
        self.cpu_seen: dict[tuple[int, float], float] = {}  # CPU seconds of each process (pid, start) at the last look
        self.work: list[tuple[float, float]] = []  # (time, CPU seconds the run used since the previous look)
        # while the run uses less CPU than WORKING_CORES: (time, thread_run_times) at each look, over WORK_WINDOW_S
        self.waits: list[tuple[float, dict[tuple[int, int], tuple[float, bool]]]] = []
        self.waits_reported = waits_are_reported()
        self.is_working = False
        self.cause = Cause(tuple(args.command), closest_key=_closest_key)  # the run's first error, read as it prints
        self.started = time.monotonic()
        self.label = f"{args.label} " if args.label else ""
        self.narrator = None if args.verbose else Narrator(self.label, self.started, self.show, args.heartbeat)
        self.ray_start_timed_out = False  # the command printed RAY_NODE_TIMEOUT

    def show(self, line: str) -> None:
        """A line for the terminal alone (the log has the run's output)."""
        print(line, flush=True)

    def say(self, line: str) -> None:
        with self.lock:
            self.log.write(line + "\n")
            self.log.flush()
        print(line, file=sys.stderr, flush=True)

    def pump(self, stream) -> None:
        for line in iter(stream.readline, b""):
            text = line.decode(errors="replace")
            if self.args.verbose:
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()
            with self.lock:
                self.cause.read(text)
                if self.narrator is not None:
                    self.narrator.line(time.monotonic(), text)
                if RAY_NODE_TIMEOUT in text:
                    self.ray_start_timed_out = True
                self.log.write(text)
                self.log.flush()

    def failed(self, event: str) -> str:
        """``event`` (what the supervisor saw: a death, a stall, an exit) after the run's first error, which leads:
        when a Ray actor's error brings the run down, verl's actors die as the driver shuts down, and those deaths,
        seen first, are only its consequence."""
        with self.lock:
            cause = str(self.cause)
        return f"{cause}; then {event}" if cause else event

    def look(self) -> list[Part]:
        """Track the parts now running and the run's work; return the parts that died since the last look."""
        processes = self.running()
        for process in processes:
            try:
                title = part_title(process)
                if title is None:
                    self.parts.pop(process.pid, None)  # a pooled Ray worker back to ray::IDLE is no part any more
                elif process.pid not in self.parts:
                    self.parts[process.pid] = Part(process.pid, process.create_time(), title)
            except psutil.NoSuchProcess:
                # it ended since running() listed it: a part stays tracked, so its death is found just below (it was
                # once taken for "no part" and forgotten, and a killed vLLM engine core went unnamed)
                continue
        dead = [part for part in self.parts.values() if not part.alive()]
        for part in dead:
            del self.parts[part.pid]
        self.note_work(processes)
        self.reap()
        return dead

    def note_work(self, processes: list[psutil.Process]) -> None:
        """Record the run's work since the last look: the CPU time of every process the command started (its
        descendants, kept under this subreaper) whatever its title, the command included, and, while that is less
        than WORKING_CORES, how long each of their threads was running or waiting for a CPU. A process first seen
        now began after the last look (or this is the first look), so all its CPU time so far is new; the last
        moments of a process that ended between two looks are not counted, which can only make the run look idler."""
        used, seen = 0.0, {}
        for process in processes:
            try:
                times = process.cpu_times()
                key = (process.pid, process.create_time())
            except psutil.Error:
                continue  # it ended meanwhile
            seen[key] = times.user + times.system
            used += max(0.0, seen[key] - self.cpu_seen.get(key, 0.0))
        self.cpu_seen = seen
        now = time.monotonic()
        self.work = [(at, cpu) for at, cpu in self.work if at > now - WORK_WINDOW_S] + [(now, used)]
        span = self.work[-1][0] - self.work[0][0] + self.args.poll
        if sum(cpu for _, cpu in self.work[1:]) >= WORKING_CORES * span:
            self.waits.clear()
            self.is_working = True
            return
        if not self.waits_reported:
            self.is_working = False
            return
        # The thread snapshot (two files a thread) costs about 15 ms for 600 threads on an idle machine, more on a
        # busy one, so it is taken only while the CPU says idle.
        self.waits = [(at, seen) for at, seen in self.waits if at > now - WORK_WINDOW_S]
        self.waits.append((now, thread_run_times(processes)))
        self.is_working = self.a_thread_wants_cpu()

    def a_thread_wants_cpu(self) -> bool:
        """Whether one thread of the run was running or waiting for a CPU for at least WANTING_FRACTION of the time
        since the oldest look kept, or, for a thread that began since then, since the last look before it was first
        seen (it began after that look, and all its time so far counts). A thread runnable at a look whose counters
        have not moved since has been waiting for a CPU ever since (it cannot sleep without running): that wait,
        which the kernel adds only when it next gets a CPU, counts too."""
        if len(self.waits) < 2:
            return False
        now, last = self.waits[-1]
        since: dict[tuple[int, int], tuple[float, float]] = {}  # thread: (the time it is measured from, its value)
        before = None
        for at, seen in self.waits:
            for thread, (value, _) in seen.items():
                if thread not in since:
                    since[thread] = (at, value) if before is None else (before, 0.0)
            before = at
        for thread, (value, runnable) in last.items():
            waiting_since = now
            if runnable:
                for at, seen in reversed(self.waits):
                    if seen.get(thread, (None, False))[0] != value:
                        break
                    if seen[thread][1]:
                        waiting_since = at
            from_at, from_value = since[thread]
            if value - from_value + now - waiting_since >= WANTING_FRACTION * (now - from_at):
                return True
        return False

    def cores_busy(self) -> float:
        """The cores the run's processes kept busy over the last WORK_WINDOW_S seconds (its CPU time over them)."""
        span = self.work[-1][0] - self.work[0][0] + self.args.poll if self.work else self.args.poll
        return sum(cpu for _, cpu in self.work[1:]) / span

    def working(self) -> bool:
        """Whether the run's processes used at least WORKING_CORES on average over the last WORK_WINDOW_S seconds (or
        over the looks so far, at the start), or one of their threads wanted a CPU most of that time."""
        return self.is_working

    def reap(self) -> None:
        """Collect the exit status of orphans re-parented here (the command's own is Popen's to collect)."""
        for child in psutil.Process().children():
            try:
                if child.pid != self.command.pid and child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)
            except (psutil.NoSuchProcess, ChildProcessError):
                continue

    def run(self) -> int:
        args = self.args
        if not self.waits_reported:
            self.say("supervise: this kernel does not report how long a thread waits for a CPU (no "
                     f"{SCHEDSTAT}): only CPU time counts as the run's work, so a run starved of CPU by other work on "
                     "this machine can be stopped as stalled; give it a larger STALL_TIMEOUT here")
        self.command = subprocess.Popen(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = threading.Thread(target=self.pump, args=(self.command.stdout,), daemon=True)
        reader.start()
        progress_at = step_at = time.monotonic()
        step, died, died_at = args.start_step, None, None
        try:
            while True:
                code = self.command.poll()
                if code is not None:
                    reader.join(timeout=10)
                    if died is not None and code != 0:
                        return self.stop(self.failed(f"{died}, and the training command exited with code {code}"))
                    if code != 0:
                        return self.stop(self.failed(f"the training command exited with code {code}"), code=code)
                    step = max(logged_steps(args.metrics), default=0)
                    if step < args.steps:
                        return self.stop(self.failed(f"the training command exited (code 0) after logging {step} "
                                                     f"of {args.steps} steps"))
                    return self.stop(None, code=0)
                logged = logged_steps(args.metrics)
                for new in sorted(number for number in logged if number > step):
                    if self.narrator is not None:
                        with self.lock:
                            self.narrator.step(time.monotonic(), step_line(new, args.steps, logged[new], self.label))
                    step, progress_at = new, time.monotonic()
                    step_at = progress_at
                dead = self.look()
                if self.working():
                    progress_at = time.monotonic()
                if self.narrator is not None:
                    with self.lock:
                        self.narrator.beat(time.monotonic(), self.cores_busy())
                if dead and died is None and step < args.steps:
                    died, died_at = self.what_died(dead, step), time.monotonic()
                if died is not None and time.monotonic() - died_at > args.grace:
                    return self.stop(self.failed(f"{died}, and the run did not stop by itself within {args.grace:g} s"))
                if time.monotonic() - progress_at > args.stall_timeout:
                    if step >= args.steps:
                        what = f"all {args.steps} steps were logged, but the command did not exit"
                    else:
                        what = f"step {step + 1} of {args.steps} made no progress"
                    return self.stop(self.failed(f"{what} for {args.stall_timeout:g} s (no step logged and its "
                                                 "processes idle; STALL_TIMEOUT)"))
                if step < args.steps and time.monotonic() - step_at > args.step_timeout:
                    return self.stop(self.failed(f"step {step + 1} of {args.steps} did not finish within "
                                                 f"{args.step_timeout:g} s, though its processes kept working "
                                                 "(STEP_TIMEOUT)"))
                time.sleep(args.poll)
        except KeyboardInterrupt:
            return self.stop("interrupted (Ctrl-C or SIGTERM)", code=130)

    def what_died(self, dead: list[Part], step: int) -> str:
        """One line naming the parts found dead in one look. Several die between two looks when one death brings
        the run down fast (a killed engine core, then verl's shutdown of its actors), and which died first cannot
        be told: every one is named (up to MAX_NAMED, then a count), in the order of their pids (the order in which
        the supervisor first saw them varies with the machine's load)."""
        when = f"during step {step + 1} of {self.args.steps}" if step else "before the first step"
        dead = sorted(dead, key=lambda part: part.pid)
        named = [f"{part.title} (pid {part.pid}, {part.description})" for part in dead[:MAX_NAMED]]
        if len(dead) > MAX_NAMED:
            named.append(f"{len(dead) - MAX_NAMED} more part(s)")
        listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
        return f"{listed} {'died' if len(dead) == 1 else 'died (found dead in the same look)'} {when}"

    def stop(self, reason: str | None, code: int = 1) -> int:
        """Stop everything the command started; report ``reason`` (None: the command succeeded). A second Ctrl-C or
        SIGTERM meanwhile (a terminal's Ctrl-C reaches the whole process group, and a caller may forward it too)
        is ignored until every process is stopped: it must not cut the clean-up short."""
        previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            left = self.end_all_descendants(patience=2.0 if reason else 10.0)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        if reason is None:
            if left:
                self.say(f"supervise: stopped {left} process(es) still running after the command exited")
            return 0
        self.say(f"CPU training run stopped: {reason}. Stopped every process it started ({left}). "
                 f"Log: {self.args.log}")
        return code

    def end_all_descendants(self, patience: float) -> int:
        """SIGTERM, then SIGKILL, every descendant until none runs; returns how many there were."""
        found = len(self.running())
        for sig, wait in ((signal.SIGTERM, patience), (signal.SIGKILL, 5.0), (signal.SIGKILL, 5.0)):
            running = self.running()
            if not running:
                return found
            for process in running:
                try:
                    process.send_signal(sig)
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(running, timeout=wait)
            self.reap()
        left = ", ".join(f"pid {process.pid}" for process in self.running())
        if left:
            raise SystemExit(f"supervise: could not stop {left}")
        return found

    @staticmethod
    def running() -> list[psutil.Process]:
        processes = []
        for process in psutil.Process().children(recursive=True):
            try:
                if process.status() != psutil.STATUS_ZOMBIE:
                    processes.append(process)
            except psutil.NoSuchProcess:
                continue
        return processes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, required=True, help="the command's output is also written here")
    parser.add_argument("--metrics", type=Path, required=True, help="verl's file logger output (one line per step)")
    parser.add_argument("--steps", type=int, required=True, help="steps the run was asked for")
    parser.add_argument("--start-step", type=int, default=0, help="steps already done (a resumed run: its checkpoint)")
    parser.add_argument("--stall-timeout", type=float, default=300.0,
                        help="seconds without a new step while the run's processes are idle (300)")
    parser.add_argument("--step-timeout", type=float, default=3600.0,
                        help="seconds one step (the first: with the start-up) may take, working or not (3600)")
    parser.add_argument("--grace", type=float, default=20.0, help="seconds the run gets to fail by itself once a part died")
    parser.add_argument("--label", default="", help="put before each line the terminal gets (several runs at once)")
    parser.add_argument("--verbose", action="store_true", help="the command's whole output on the terminal too")
    parser.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT_S, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the training command")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("give the training command after --")
    if args.stall_timeout <= 0 or args.step_timeout <= 0 or args.grace < 0 or args.steps < 1:
        parser.error("--stall-timeout and --step-timeout must be > 0, --grace >= 0, --steps >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Orphans (a Ray worker whose raylet died, vLLM's engine core whose server died) are re-parented to this
    # process instead of init, so they stay in reach of the final clean-up.
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"supervise: prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while True:
        logged_before = max(logged_steps(args.metrics), default=0)
        supervisor = Supervisor(args, append=attempt > 1)
        code = supervisor.run()
        started = max(logged_steps(args.metrics), default=0) > logged_before
        if code in (0, 130) or started or not supervisor.ray_start_timed_out or attempt == RAY_START_TRIES:
            return code
        attempt += 1
        supervisor.say(f"supervise: Ray's node did not register with its GCS within Ray's fixed 30 s (a busy "
                       f"machine), before anything of the run started; starting the run again (try {attempt} of "
                       f"{RAY_START_TRIES})")
        supervisor.log.close()


if __name__ == "__main__":
    sys.exit(main())
