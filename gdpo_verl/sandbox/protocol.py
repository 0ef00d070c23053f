"""The host's side of the protocol with a session's interpreter (``Interpreter``; its side is
``programs/interpreter.py``).

Over a SOCK_SEQPACKET socket: the interpreter says "R" once the program is compiled ("E" and python's error when it
does not compile, "F" and why when the interpreter could not start). For each test case the host sends "A" and the
arguments, NUL-terminated, with the case's stdin, stdout and stderr; the interpreter says "S" once the case's
process exists, and at its end "D" and what the kernel wrote of the case (``_results``; "F" and why when the case
could not be set up). "end" asks it to kill the case; closing the socket ends it.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from gdpo_verl.sandbox import teardown
from gdpo_verl.sandbox.cgroups import TEARDOWN_S
from gdpo_verl.sandbox.host import input_file, read_all
from gdpo_verl.sandbox.launch import Run
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import ERROR, Outcome, unavailable, why
from gdpo_verl.sandbox.watch import Meter, Output, outcome, pump

_RUSAGE = 144  # sizeof(struct rusage) on 64-bit Linux


class Interpreter:
    """Host side of a session's interpreter: its sandbox (bubblewrap's run) and the socket it takes runs on.
    ``usable`` is False once it has ended, stopped answering or spent half its CPU limit."""

    def __init__(self, limits: Limits, bwrap: Run, control: socket.socket, uid: int | None) -> None:
        self.limits, self.bwrap, self.control, self.uid = limits, bwrap, control, uid
        self.usable = True

    def _cpu(self, before: float | None):
        cgroup = self.bwrap.cgroup
        return (lambda: cgroup.cpu_seconds() - before) if cgroup is not None else None

    def wait_ready(self, started: float) -> Outcome | None:
        """Wait (at most ``wall_s``) for the interpreter to have compiled the program: None, or the outcome of every
        run of the session."""
        limits, bwrap = self.limits, self.bwrap
        bwrap.process.stdin.close()  # it reads nothing of its own
        answer: list[bytes] = []
        out, err = Output(limits.output_kb), Output(limits.output_kb)
        reads = {self.control.fileno(): answer.append, bwrap.status_fd: bwrap.read_status,
                 bwrap.process.stdout.fileno(): out, bwrap.process.stderr.fileno(): err}
        cpu = self._cpu(bwrap.cpu_before)
        stopped = pump(limits, started + limits.wall_s, reads, lambda: bool(answer), meter=Meter(cpu, None))
        seconds = time.monotonic() - started
        if stopped is None and answer[0] == b"R":
            return None
        if stopped is None and answer[0][:1] == b"E":  # the program does not compile: as python reports it
            return Outcome(ERROR, 1, "", answer[0][1:].decode("utf-8", "replace"), seconds, why(1))
        if stopped is None and answer[0][:1] == b"F":
            return unavailable("the sandbox's interpreter could not start: "
                               + answer[0][1:].decode("utf-8", "replace"), seconds)
        code = None
        if stopped is None:  # its namespace ended first: bubblewrap says how, or could not create it
            bwrap.reap(TEARDOWN_S)
            code = bwrap.exit_code()
        if code is None and (stopped is None or bwrap.child is None):
            said = err.data.decode("utf-8", "replace")
            return unavailable(f"bubblewrap could not create the sandbox: {said.strip()[-300:]}" if stopped is None
                               else f"bubblewrap did not start the sandbox within {limits.wall_s:g} s", seconds, said)
        used = cpu() if cpu is not None else bwrap.cpu
        return outcome(limits, code, b"", err.data, stopped, used, seconds)

    def execute(self, stdin: bytes, argv: tuple[str, ...]) -> Outcome | None:
        """One run; None when the interpreter had ended before it could take it."""
        limits, cgroup = self.limits, self.bwrap.cgroup
        started = time.monotonic()
        before = cgroup.cpu_seconds() if cgroup is not None else None
        stdin_read = input_file(stdin)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        root = self.bwrap.child_pid
        meter = Meter(self._cpu(before), root)  # before the case exists: its threads count from their start
        try:
            socket.send_fds(self.control, [b"A" + b"".join(os.fsencode(argument) + b"\0" for argument in argv)],
                            [stdin_read, out_write, err_write])
        except OSError:  # it has ended
            for fd in (out_read, err_read):
                os.close(fd)
            self.usable = False
            return None
        finally:
            for fd in (stdin_read, out_write, err_write):
                os.close(fd)
        forked, answer = [], []  # "S" once the run's process exists; then the answer (b"": the interpreter ended)

        def control(block: bytes) -> None:
            (forked if block == b"S" else answer).append(block)

        out, err = Output(limits.output_kb), Output(limits.output_kb)
        try:
            stopped = pump(limits, started + limits.wall_s, {out_read: out, err_read: err,
                                                             self.control.fileno(): control},
                           lambda: bool(answer) and out.ended and err.ended, meter=meter)
            if stopped is not None and not answer:
                try:
                    self.control.send(b"end")  # it kills the run and answers
                except OSError:
                    pass  # it has ended: the answer is the end of the socket
                pump(limits, time.monotonic() + TEARDOWN_S, {self.control.fileno(): control}, lambda: bool(answer))
        finally:
            for fd in (out_read, err_read):
                os.close(fd)
        if not forked and answer == [b""]:  # it ended before it took the run (not the run's doing)
            self.usable = False
            return None
        seconds = time.monotonic() - started
        if answer and answer[0][:1] == b"F":  # the case could not be set up: the program never ran
            self.usable = False
            return unavailable("the sandbox could not set up a test case: "
                               + answer[0][1:].decode("utf-8", "replace"), seconds)
        if answer and answer[0][:1] == b"D":
            code, used, own = _results(answer[0])
            if own > limits.cpu_s / 2:
                self.usable = False
            cpu = (cgroup.cpu_seconds() - before if cgroup is not None else used) + meter.host_seconds()
            return outcome(limits, code, out.data, err.data, stopped, cpu, seconds)
        # it ended with its run (the OOM killer may take it), or did not answer in time: the run's end is its end
        self.usable = False
        code = self.bwrap.exit_code() if answer and self.bwrap.reap(TEARDOWN_S) else None
        if stopped is None and code is None:
            said = read_all(self.bwrap.process.stderr.fileno()).decode("utf-8", "replace").strip()
            return unavailable("the sandbox's interpreter ended without an exit status"
                               + (f": {said[-300:]}" if said else ""), seconds, err.data.decode("utf-8", "replace"))
        cpu = (cgroup.cpu_seconds() - before if cgroup is not None else 0.0) + meter.host_seconds()
        return outcome(limits, code, out.data, err.data, stopped, cpu, seconds)

    def stop(self) -> None:
        """End the sandbox (its first process, and with it every process in it) and collect it."""
        try:
            teardown.end(self.bwrap, self.uid, stopped_by_host=self.bwrap.child is None, sandboxed=True)
        finally:
            self.control.close()


def _results(answer: bytes) -> tuple[int, float, float]:
    """A "D" answer (``programs/interpreter.py``): the case's wait status at 8, the interpreter's ``RUSAGE_CHILDREN``
    before and after the case and its own ``RUSAGE_SELF``, each a ``struct rusage`` of 144 bytes from 16 on (user and
    system time first, each two longs); the exit code (128 + the signal when killed), the case's CPU seconds and the
    interpreter's own."""
    if len(answer) != 16 + 3 * _RUSAGE:
        raise RuntimeError(f"the sandbox's interpreter answered {len(answer)} bytes, not {16 + 3 * _RUSAGE}")

    def seconds(at: int) -> float:
        user_s, user_us, system_s, system_us = struct.unpack_from("qqqq", answer, at)
        return user_s + system_s + (user_us + system_us) / 1e6

    exit = os.waitstatus_to_exitcode(struct.unpack_from("i", answer, 8)[0])
    return (128 - exit if exit < 0 else exit), seconds(16 + _RUSAGE) - seconds(16), seconds(16 + 2 * _RUSAGE)
