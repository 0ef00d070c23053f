"""Watching a run: its input fed and its output read without blocking, until it ends or passes a bound (the wall
clock, its CPU time, its own time, its output), and the outcome it comes to.

A run's own time is the wall clock less the time it waited for a CPU: sampled every ``POLL_S`` seconds, an interval
counts as its own when none of its threads was running or waiting for a CPU (``host.wants_cpu``), the host did not
owe the program input the kernel would take (its stdin pipe not writable, or written whole), and the host was not
behind reading its output (neither output pipe full). It is bounded by
``cpu_s``, as its CPU time is: a program that sleeps holds its slot no longer than one that computes, and a program
slowed by a busy host (waiting for a CPU) is not.
"""

from __future__ import annotations

import fcntl
import os
import select
import selectors
import signal
import stat
import struct
import termios
import time
from typing import Callable

from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import ERROR, OK, OUTPUT_LIMIT, TIMEOUT, Outcome, why

# The kernel sends SIGXCPU when a process's own count reaches its limit; a cgroup's count may trail it by a tick.
CPU_SLACK_S = 0.02
# How often a run's CPU count and activity are read while it runs: its processes together may not pass cpu_s by
# more than this times the cores they run on (each also has RLIMIT_CPU).
POLL_S = 0.1
CPU_SPENT = "cpu"   # pump: the run was stopped at its CPU limit
IDLE_SPENT = "own"  # pump: the run was stopped at its own-time limit
_BLOCK = 65536      # what is read or written at once


class Output:
    """What a run writes on one stream, up to ``kb`` kilobytes; a reader for ``pump``."""

    def __init__(self, kb: int) -> None:
        self.cap = kb * 1024
        self.chunks: list[bytes] = []
        self.size = 0
        self.ended = False

    def __call__(self, block: bytes) -> str | None:
        if not block:
            self.ended = True
            return None
        self.chunks.append(block)
        self.size += len(block)
        return OUTPUT_LIMIT if self.size > self.cap else None

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)[:self.cap]


def pump(limits: Limits, deadline: float, reads: dict, until: Callable[[], bool], feed: tuple | None = None,
         cpu: Callable[[], float] | None = None, busy: Callable[[], bool] | None = None) -> str | None:
    """Feed ``feed`` (a writable file object and the bytes for it, closed once written) and read what comes on
    ``reads`` (descriptor: a function of each block read, b"" at its end, that returns a reason to stop or None)
    without blocking, until ``until()`` or a bound: ``TIMEOUT`` at ``deadline``, ``CPU_SPENT`` once ``cpu()`` (the
    run's CPU seconds) reaches ``cpu_s``, ``IDLE_SPENT`` once its own time does (``busy()``: whether it runs or waits
    for a CPU), or what a reader returned. ``cpu`` and ``busy`` are read every ``POLL_S`` seconds. The feed is
    closed in any case."""
    watched = cpu is not None or busy is not None
    with selectors.DefaultSelector() as selector:
        for fd in reads:
            selector.register(fd, selectors.EVENT_READ)
        writer, data, sent, feeding = None, b"", 0, -1
        if feed is not None:
            writer, data = feed
            if data:
                feeding = writer.fileno()
                os.set_blocking(feeding, False)
                selector.register(feeding, selectors.EVENT_WRITE)
            else:
                writer.close()
        looked, idle = time.monotonic(), 0.0
        pipes = [fd for fd in reads if watched and stat.S_ISFIFO(os.fstat(fd).st_mode)]  # not the control socket
        try:
            while not until():
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    return TIMEOUT
                if watched and now - looked >= POLL_S:
                    if cpu is not None and cpu() >= limits.cpu_s - CPU_SLACK_S:
                        return CPU_SPENT  # ended at its CPU limit, in all its processes together
                    # the host still owes input the kernel would take, or is behind on output the program would
                    # write (a full pipe it reads)
                    waiting_on_host = (feeding >= 0 and _writable(feeding)) or any(_full(fd) for fd in pipes)
                    if busy is not None and not waiting_on_host and not busy():
                        idle += now - looked
                        if idle >= limits.cpu_s:
                            return IDLE_SPENT
                    looked = now
                for key, _ in selector.select(timeout=min(left, POLL_S if watched else 0.5)):
                    if key.fd == feeding:
                        try:
                            sent += os.write(key.fd, data[sent:sent + _BLOCK])
                        except BlockingIOError:  # its pipe is full: the program is not reading
                            continue
                        except BrokenPipeError:  # the program stopped reading: the rest of its input is moot
                            sent = len(data)
                        if sent >= len(data):
                            selector.unregister(key.fd)
                            writer.close()
                            feeding = -1
                        continue
                    try:
                        block = os.read(key.fd, _BLOCK)
                    except ConnectionResetError:  # the other end of a socket has gone
                        block = b""
                    if not block:
                        selector.unregister(key.fd)
                    stop = reads[key.fd](block)
                    if stop is not None:
                        return stop
        finally:
            if writer is not None:
                writer.close()
    return None


def _writable(fd: int) -> bool:
    """Whether the kernel takes a write on the pipe ``fd`` now (poll's POLLOUT: a page of the pipe is free). The
    program's stdin writable: room the host has not filled yet, the host's doing; not writable: the program is not
    taking its input, its own choice. Not a count of the bytes queued: a page is freed only once the program has read
    all of it, so a program that read one byte of a full pipe left it as full to the host as before."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return bool(poller.poll(0))


def _full(fd: int) -> bool:
    """Whether the pipe ``fd`` is an end of is full: the program's stdout or stderr full, the host is behind reading,
    and the program waits on it."""
    queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    return queued >= fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


def outcome(limits: Limits, code: int | None, stdout: bytes, stderr: bytes, stopped: str | None, cpu: float,
            seconds: float) -> Outcome:
    """A run's outcome from the program's exit code (128 + the signal when killed), its output, what the host
    stopped it for, and its CPU time."""
    out, err = stdout.decode("utf-8", "replace"), stderr[-4000:].decode("utf-8", "replace")
    if stopped == TIMEOUT:
        return Outcome(TIMEOUT, None, out, err, seconds, f"still running after {limits.wall_s:g} s")
    if stopped == OUTPUT_LIMIT:
        return Outcome(OUTPUT_LIMIT, None, out, err, seconds, f"wrote more than {limits.output_kb} KB")
    if stopped == IDLE_SPENT:
        return Outcome(TIMEOUT, None, out, err, seconds,
                       f"spent {limits.cpu_s} s of its own time (wall clock not waiting for a CPU), the limit, "
                       f"in {seconds:.2f} s")
    if cpu >= limits.cpu_s - CPU_SLACK_S:
        # measured here, whatever the program did on the way (caught SIGXCPU and exited 0, spread its work over
        # processes of its own): past its CPU limit, a run is out of time
        return Outcome(TIMEOUT, None, out, err, seconds, f"used {cpu:.2f} s of CPU; the limit is {limits.cpu_s} s")
    if code == 128 + signal.SIGXCPU:  # the kernel's signal at a process's CPU limit (its count may lead ours)
        return Outcome(TIMEOUT, None, out, err, seconds, f"killed by SIGXCPU at the CPU limit of {limits.cpu_s} s")
    if code == 0:
        return Outcome(OK, 0, out, err, seconds)
    return Outcome(ERROR, code, out, err, seconds, why(code))
