"""Ending a run and everything it started, whatever the program did to its own signal settings, and counting its
CPU time."""

from __future__ import annotations

import os
import signal

from gdpo_verl.sandbox.cgroups import TEARDOWN_S
from gdpo_verl.sandbox.host import kill_user, read_all
from gdpo_verl.sandbox.launch import Run


def end(run: Run, uid: int | None, stopped_by_host: bool, sandboxed: bool) -> float:
    """End ``run`` and return the CPU seconds it used: its cgroup's count (every process it ran, those the kernel
    reaped itself included), or without one, the kernel's count for the processes collected with it.

    In local mode (``sandboxed``) the namespace's first process (the interpreter) is killed from here, through a
    pidfd of its host pid, and takes every process of the namespace with it (the kernel's doing); bubblewrap, which
    collects it, exits, and is collected here, so nothing is left to a reaper up the tree (no zombie under a parent
    that reaps nothing). Without a sandbox, the program's session is killed. A run stopped here is then swept by its
    user id (root; without a sandbox, always: a program may leave processes in sessions of their own). Each step
    runs whatever the one before it raised."""
    process = run.process
    try:
        if not run.exited:
            if run.child is None and run.status_fd is not None:
                run.read_status(read_all(run.status_fd))  # the child's pid may be waiting there unread
            if run.child is not None:
                try:
                    signal.pidfd_send_signal(run.child, signal.SIGKILL)
                except ProcessLookupError:  # it ended meanwhile
                    pass
                run.reap(TEARDOWN_S)
            if not run.exited:  # bubblewrap did not end with its child, or no sandbox: its session
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                run.reap(None)
    finally:
        try:
            if uid is not None and (stopped_by_host or not sandboxed):
                kill_user(uid)
        finally:
            try:
                if run.cpu_before is not None:
                    run.cpu = run.cgroup.cpu_seconds() - run.cpu_before
            finally:
                run.close()
    return run.cpu
