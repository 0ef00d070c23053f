"""Starting a session's sandbox (local mode): a bubblewrap run whose first process is an interpreter that reads and
compiles the program once (``programs/interpreter.py``), given what it runs under as descriptors (the interpreter's
code, the program, the seccomp filter, a status pipe, its control socket), started by the slot's spawner inside the
slot's cgroup (strict isolation) or under prlimit's limits."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from gdpo_verl.sandbox import launch
from gdpo_verl.sandbox.cgroups import TEARDOWN_S, SlotCgroup
from gdpo_verl.sandbox.host import memfd
from gdpo_verl.sandbox.launch import Run, Spawned
from gdpo_verl.sandbox.node import Node
from gdpo_verl.sandbox.outcome import Outcome, unavailable
from gdpo_verl.sandbox.policy import seccomp_filter
from gdpo_verl.sandbox.protocol import Interpreter

# what the spawner's child writes when it could not execute bubblewrap (programs/spawner.py)
_SPAWNER_FAILED = "the sandbox's spawner could not start the run"


def start(node: Node, code: bytes, slot: int) -> tuple[Interpreter | None, Outcome | None]:
    """Start a sandbox for ``slot`` whose first process is an interpreter that reads and compiles ``code``; the
    interpreter once it is ready, or the outcome of every run of the session when it cannot be (the sandbox failed:
    ``UNAVAILABLE``; the program does not compile or its compilation passed a limit). ``node.refusal()`` has made
    the image (and the cgroups)."""
    started = time.monotonic()
    uid = node.uid(slot)
    cgroup = node.cgroups.slots[slot] if node.cgroups is not None else None
    fds: list[int] = []  # this process's ends of what the sandbox gets, closed once it has them
    control, status_read = None, None
    try:
        fds.append(memfd("interpreter", node.image.session_pyc))
        fds.append(memfd("program", code))
        fds.append(memfd("filter", seccomp_filter(node.machine)))
        status_read, status_write = os.pipe()
        fds.append(status_write)
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds.append(theirs.detach())
        # the spawner passes them on as descriptors 3 and up; Popen at their own numbers
        numbers = range(3, 3 + len(fds)) if cgroup is not None else fds
        command = launch.bwrap_command(node.bwrap, node.python, node.image.mounts(), node.limits, node.hash_seed,
                                       *numbers)
        if cgroup is not None:  # started by the slot's spawner, inside the slot's cgroup
            process = _spawn(node, cgroup, uid, command, fds)
        else:
            process = launch.popen(launch.prlimit_command(node.prlimit, node.rlimits(uid)) + command, uid,
                                   tuple(fds), None, None)
    except (OSError, subprocess.SubprocessError) as error:
        for fd in (*fds, *((status_read,) if status_read is not None else ())):
            os.close(fd)
        if control is not None:
            control.close()
        return None, unavailable(f"could not start a run: {error}", time.monotonic() - started)
    for fd in fds:
        os.close(fd)
    interpreter = Interpreter(node.limits, Run(process, status_read, cgroup), control, uid)
    failed = interpreter.wait_ready(started)
    if failed is not None:
        if failed.why.startswith("bubblewrap could not create the sandbox: " + _SPAWNER_FAILED):
            failed = unavailable(failed.why[len("bubblewrap could not create the sandbox: "):], failed.seconds)
        interpreter.stop()
        return None, failed
    return interpreter, None


def _spawn(node: Node, cgroup: SlotCgroup, uid: int | None, command: list[str], passed: list[int]) -> Spawned:
    """Start bubblewrap through the slot's spawner: its stdin, stdout and stderr, then ``passed`` are its
    descriptors 0 and up."""
    ends: list[int] = []
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    stderr_read, stderr_write = os.pipe()
    ends += [stdin_read, stdout_write, stderr_write]
    process = Spawned(stdin_write, stdout_read, stderr_read)
    try:
        spawner = cgroup.spawner()
        cgroup.clear(TEARDOWN_S, spawner.process.pid)  # empty unless the run before could not be collected
        process.cpu_before = cgroup.cpu_seconds()
        process.pid, process.pidfd = spawner.spawn(uid, command, node.rlimits(uid), [*ends, *passed])
    except BaseException:
        process.close()
        raise
    finally:
        for fd in ends:
            os.close(fd)
    return process
