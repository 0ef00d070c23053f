"""A run without a sandbox (mode "none", the opt-in for trusted machines): the program as a process of its own, in a
working directory of its own, under prlimit's limits and the same bounds as a sandboxed run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

from gdpo_verl.sandbox import launch, teardown
from gdpo_verl.sandbox.host import input_file
from gdpo_verl.sandbox.launch import Run
from gdpo_verl.sandbox.node import Node
from gdpo_verl.sandbox.outcome import Outcome, unavailable
from gdpo_verl.sandbox.watch import POLL_S, Meter, Output, outcome, past_a_bound, pump


def run_plain(node: Node, code: bytes, stdin: bytes, argv: tuple[str, ...], slot: int) -> Outcome:
    """One run of ``code`` with ``stdin`` (and ``argv``), in ``slot``."""
    limits = node.limits
    started = time.monotonic()
    deadline = started + limits.wall_s
    uid = node.uid(slot)
    workdir = tempfile.mkdtemp(prefix="gdpo-sandbox-")
    try:
        with open(os.path.join(workdir, "main.py"), "wb") as handle:
            handle.write(code)
        if uid is not None:
            os.chown(workdir, uid, uid)
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
               "PYTHONIOENCODING": "utf-8"}
        stdin_file = input_file(stdin)
        try:
            process = launch.popen([*launch.prlimit_command(node.prlimit, node.rlimits(uid)), node.python, "-I",
                                    "-B", "main.py", *argv], uid, (), workdir, env, stdin=stdin_file)
        finally:
            os.close(stdin_file)
    except (OSError, subprocess.SubprocessError) as error:
        shutil.rmtree(workdir)
        return unavailable(f"could not start a run: {error}", time.monotonic() - started)
    run = Run(process, None, None)
    stopped = None
    meter = Meter(None, process.pid)
    try:
        out, err = Output(limits.output_kb), Output(limits.output_kb)
        reads = {process.stdout.fileno(): out, process.stderr.fileno(): err}
        stopped = pump(limits, deadline, reads, lambda: out.ended and err.ended, meter=meter)
        while stopped is None and not run.reap(POLL_S):  # it closed its output and runs on: the same bounds
            stopped = past_a_bound(limits, deadline, meter)
    finally:
        cpu = teardown.end(run, uid, stopped_by_host=not run.exited, sandboxed=False)
        shutil.rmtree(workdir)
    returned = process.returncode
    return outcome(limits, 128 - returned if returned is not None and returned < 0 else returned, out.data,
                   err.data, stopped, cpu + meter.host_seconds(), time.monotonic() - started)
