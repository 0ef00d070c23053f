"""Watching a run: its output read without blocking, until it ends or passes a bound (the wall clock, its CPU time,
its own time, its output), and the outcome it comes to.

What a run has used is what the kernel counts (``Meter``), read every ``POLL_S`` seconds on the host's clock; no
instant the run picks changes the count:

- **its CPU time**: its cgroup's count (every process it ever had), plus this host thread's CPU time spent reading
  its output (``time.thread_time``): a run that makes the host work, writing a byte at a time (or in packet mode,
  where each read returns one write), pays for it from its own ``cpu_s``. The host's cost of a run is so bounded by
  the run's CPU limit, and its memory by ``output_kb`` (kept in one buffer, whatever the size of the reads);
- **its own time**: the wall clock less the time it was on a CPU or waiting for one: the longest that one of its
  threads was (each thread's ``schedstat``, ``host.schedule_times``; its wait credited up to ``WAIT_CREDIT`` times
  its time run, and not at all below the run's starting priority), or its CPU time (with a cgroup, its count, so that processes that ended still count), whichever is
  more. Bounded by ``cpu_s``, as its CPU time is: a program that sleeps (or blocks, on anything: its stdin is a
  file, so never on the host) holds its slot no longer than one that computes, and a program slowed by a busy host
  (waiting for a CPU) is not. A thread that ends takes its time with it: that only ends the run sooner.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from typing import Callable

from gdpo_verl.sandbox.host import schedule_times
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import ERROR, OK, OUTPUT_LIMIT, TIMEOUT, Outcome, why

# The kernel sends SIGXCPU when a process's own count reaches its limit; a cgroup's count may trail it by a tick.
CPU_SLACK_S = 0.02
# How often a run's CPU count and own time are read while it runs: its processes together may not pass cpu_s by
# more than this times the cores they run on (each also has RLIMIT_CPU).
POLL_S = 0.1
# A thread's wait for a CPU is the host's doing up to this many times the CPU time it got (what a fair scheduler gives
# a thread among nine runnable on its CPU); past that, it is the run's own time. A thread whose priority is below the
# one the run started with (a nice value, or its autogroup's, raised: what an unprivileged process may do) chose to
# wait, and none of its wait is credited.
WAIT_CREDIT = 8
CPU_SPENT = "cpu"   # pump: the run was stopped at its CPU limit
IDLE_SPENT = "own"  # pump: the run was stopped at its own-time limit
_BLOCK = 65536      # what is read at once
# Past PACE_AFTER short reads in a run (a stream drained: an honest run has a few), the host waits PACE_S after each
# before it looks again, so that a run writing a byte at a time wakes it at most 1 / PACE_S times a second, each time
# for everything written meanwhile; a run that writes faster than the host drains (reads of _BLOCK) is read at once.
PACE_AFTER = 16
PACE_S = 0.002
_TURN = 1 << 20     # what is read of one stream before the others are looked at again


class Output:
    """What a run writes on one stream, up to ``kb`` kilobytes; a reader for ``pump``."""

    def __init__(self, kb: int) -> None:
        self.cap = kb * 1024
        self.buffer = bytearray()
        self.ended = False

    def __call__(self, block: bytes) -> str | None:
        if not block:
            self.ended = True
            return None
        self.buffer += block[:self.cap + 1 - len(self.buffer)]
        return OUTPUT_LIMIT if len(self.buffer) > self.cap else None

    @property
    def data(self) -> bytes:
        return bytes(self.buffer[:self.cap])


class Meter:
    """What one run has used since it was made, as the kernel counts it (see the module's docstring). ``cpu``: the
    run's CPU seconds since its start (its cgroup's count; None without a cgroup); ``root``: the host pid whose
    descendants are the run's processes (None: its own time is not read)."""

    def __init__(self, cpu: Callable[[], float] | None, root: int | None) -> None:
        self.cpu, self.root = cpu, root
        self.started = time.monotonic()
        self._host_before = time.thread_time()
        self._threads_before = schedule_times(root) if root is not None else {}
        # the priority the run starts with (its first process's): a thread below it chose to wait
        self._priority = self._threads_before[root][2] if root in self._threads_before else (0, 0)

    def host_seconds(self) -> float:
        """This thread's CPU seconds since the run's start: the host's work for the run, charged to it."""
        return time.thread_time() - self._host_before

    def cpu_seconds(self) -> float | None:
        """The run's CPU seconds and the host's for it; None without a cgroup's count."""
        return None if self.cpu is None else self.cpu() + self.host_seconds()

    def own_seconds(self) -> float | None:
        """The wall clock since the start less the time the run was on a CPU or waiting for one: the longest that
        any one of its threads was (its time run, and its wait up to ``WAIT_CREDIT`` times that), or its CPU time,
        whichever is more. Not the sum over threads: threads that wake each other, or nap a hundred microseconds at
        a time, wait for the CPUs the run's own threads hold, and a sum of those waits (2.5 times their CPU time,
        measured) covered a run asleep for three times ``cpu_s``."""
        if self.root is None:
            return None
        ran = longest = 0
        for tid, (run_ns, wait_ns, priority) in schedule_times(self.root).items():
            before_run, before_wait, _ = self._threads_before.get(tid, (0, 0, None))
            if run_ns < before_run or wait_ns < before_wait:  # a thread id used again
                before_run = before_wait = 0
            run_ns, wait_ns = run_ns - before_run, wait_ns - before_wait
            ran += run_ns
            lowered = priority[0] > self._priority[0] or priority[1] > self._priority[1]
            longest = max(longest, run_ns + (0 if lowered else min(wait_ns, WAIT_CREDIT * run_ns)))
        used = self.cpu() if self.cpu is not None else ran / 1e9
        return time.monotonic() - self.started - max(used, longest / 1e9)


def past_a_bound(limits: Limits, deadline: float, meter: Meter) -> str | None:
    """The bound a run has reached (``TIMEOUT``, ``CPU_SPENT``, ``IDLE_SPENT``), or None."""
    if time.monotonic() >= deadline:
        return TIMEOUT
    used, own = meter.cpu_seconds(), meter.own_seconds()
    if used is not None and used >= limits.cpu_s - CPU_SLACK_S:
        return CPU_SPENT  # ended at its CPU limit, in all its processes together and the host's work
    if own is not None and own >= limits.cpu_s:
        return IDLE_SPENT
    return None


def pump(limits: Limits, deadline: float, reads: dict, until: Callable[[], bool],
         meter: Meter | None = None) -> str | None:
    """Read what comes on ``reads`` (descriptor: a function of each block read, b"" at its end, that returns a
    reason to stop or None) without blocking, until ``until()`` or a bound: ``TIMEOUT`` at ``deadline``,
    ``CPU_SPENT`` once the ``meter``'s CPU seconds reach ``cpu_s``, ``IDLE_SPENT`` once its own time does, or what a
    reader returned. The meter is read every ``POLL_S`` seconds. A readable descriptor is read until it has no more
    (or ``_TURN`` bytes), and the host's wake-ups are paced (``PACE_S``), so they follow the bytes and the clock, not
    the writes."""
    blocking = {fd: os.get_blocking(fd) for fd in reads}
    with selectors.DefaultSelector() as selector:
        for fd in reads:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        try:
            return _pump(limits, deadline, reads, until, meter, selector)
        finally:
            for fd, was in blocking.items():
                try:
                    os.set_blocking(fd, was)
                except OSError:  # closed by its reader
                    pass


def _pump(limits: Limits, deadline: float, reads: dict, until: Callable[[], bool], meter: Meter | None,
          selector: selectors.BaseSelector) -> str | None:
    looked, short_reads = time.monotonic(), 0
    while not until():
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            return TIMEOUT
        if meter is not None and now - looked >= POLL_S:
            spent = past_a_bound(limits, deadline, meter)
            if spent is not None:
                return spent
            looked = now
        paced = False
        for key, _ in selector.select(timeout=min(left, POLL_S if meter is not None else 0.5)):
            read = 0
            while read < _TURN:
                try:
                    block = os.read(key.fd, _BLOCK)
                except BlockingIOError:  # drained
                    break
                except ConnectionResetError:  # the other end of a socket has gone
                    block = b""
                read += len(block)
                if 0 < len(block) < _BLOCK:
                    short_reads += 1
                    paced = short_reads > PACE_AFTER
                if not block:
                    selector.unregister(key.fd)
                stop = reads[key.fd](block)
                if stop is not None:
                    return stop
                if not block:
                    break
        if paced:  # a stream was drained by a short read: what comes next waits for the host's next turn
            time.sleep(PACE_S)
    return None


def outcome(limits: Limits, code: int | None, stdout: bytes, stderr: bytes, stopped: str | None, cpu: float,
            seconds: float) -> Outcome:
    """A run's outcome from the program's exit code (128 + the signal when killed), its output, what the host
    stopped it for, and its CPU time (the host's work for it included, ``Meter``)."""
    out, err = stdout.decode("utf-8", "replace"), stderr[-4000:].decode("utf-8", "replace")
    if stopped == TIMEOUT:
        return Outcome(TIMEOUT, None, out, err, seconds, f"still running after {limits.wall_s:g} s")
    if stopped == OUTPUT_LIMIT:
        return Outcome(OUTPUT_LIMIT, None, out, err, seconds, f"wrote more than {limits.output_kb} KB")
    if stopped == IDLE_SPENT:
        return Outcome(TIMEOUT, None, out, err, seconds,
                       f"spent {limits.cpu_s} s of its own time (wall clock neither running nor waiting for a CPU, "
                       f"as the kernel counts it), the limit, in {seconds:.2f} s")
    if stopped == CPU_SPENT or cpu >= limits.cpu_s - CPU_SLACK_S:
        # measured here, whatever the program did on the way (caught SIGXCPU and exited 0, spread its work over
        # processes of its own): past its CPU limit, a run is out of time
        return Outcome(TIMEOUT, None, out, err, seconds, f"used {cpu:.2f} s of CPU; the limit is {limits.cpu_s} s")
    if code == 128 + signal.SIGXCPU:  # the kernel's signal at a process's CPU limit (its count may lead ours)
        return Outcome(TIMEOUT, None, out, err, seconds, f"killed by SIGXCPU at the CPU limit of {limits.cpu_s} s")
    if code == 0:
        return Outcome(OK, 0, out, err, seconds)
    return Outcome(ERROR, code, out, err, seconds, why(code))
