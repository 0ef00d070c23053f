"""Run a program a model wrote, isolated, with limits on everything it can use, held by what the kernel enforces.

The API the rewards call: ``Sandbox`` (``check``, ``session``, ``run``, ``close``), ``Session`` (``run``), ``Limits``,
``Outcome`` and its statuses, ``SandboxUnavailable``; ``FusionSandbox`` (``fusion.py``) runs the same on a Sandbox
Fusion server.

One module per concern (GUARANTEES.md names, for each guarantee, the module and the kernel mechanism that hold it):

    sandbox.py     Sandbox: puts the parts below together (and starts the guardian); nothing below imports it
    session.py     Session: one program's runs in one slot, each in the session's sandbox or without one
    node.py        what the node gives the runs (interpreter, bubblewrap, image, cgroups, user ids), its check
    slots.py       which slots are free, and when a run last ended
    start.py       starting a session's sandbox: bubblewrap, by the slot's spawner or under prlimit
    protocol.py    the host's side of the protocol with a session's interpreter
    plain.py       a run without a sandbox (mode "none")
    launch.py      bubblewrap's command (namespaces, mounts), the processes' limits, the host's handle of a run
    image.py       what a run sees of the system: a read-only tmpfs copy of the interpreter and its libraries
    policy.py      what a run may ask of the kernel: the seccomp filter, an allow list of named system calls
    syscalls.py    system call numbers by name, per architecture
    cgroups.py     a cgroup per slot: the run's memory bound and CPU count (strict isolation)
    spawner.py     the process that starts a slot's sandboxes inside its cgroup
    guardian.py    the process that ends runs still starting when the host dies
    watch.py       feeding a run and reading it, its bounds (wall clock, CPU time, own time, output), its outcome
    teardown.py    ending a run and everything it started
    limits.py      Limits, checked once; outcome.py: Outcome, statuses, SandboxUnavailable; host.py: what is read of
                   the host
    programs/      what runs inside the sandbox (interpreter.py, compiled once by image.py) and beside it
                   (spawner.py, guardian.py), run by path

``Sandbox(mode="none")`` is the documented opt-in for trusted machines: the same limits and a fresh working
directory per run, without isolation. Nothing ever falls back to it.
"""

from gdpo_verl.sandbox.fusion import FusionSandbox, FusionSettings
from gdpo_verl.sandbox.host import bwrap_executable, default_python
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import ERROR, OK, OUTPUT_LIMIT, TIMEOUT, UNAVAILABLE, Outcome, SandboxUnavailable
from gdpo_verl.sandbox.node import ISOLATIONS, MODES
from gdpo_verl.sandbox.sandbox import Sandbox
from gdpo_verl.sandbox.session import Session

__all__ = ["ERROR", "ISOLATIONS", "MODES", "OK", "OUTPUT_LIMIT", "TIMEOUT", "UNAVAILABLE", "FusionSandbox",
           "FusionSettings", "Limits", "Outcome", "Sandbox", "SandboxUnavailable", "Session", "bwrap_executable",
           "default_python"]
