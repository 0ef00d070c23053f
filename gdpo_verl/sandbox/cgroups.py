"""A cgroup per slot (strict isolation): it bounds everything a run holds, kernel memory included, and counts the
CPU time of every process the run ran.

Cgroups are made once per slot, not per run, and nothing is moved into one per run: each slot's spawner
(``spawner.py``), moved into it once, starts the slot's sandboxes there. Moving a process into a cgroup takes a
lock every fork of the host waits on (measured: 20% of the throughput of short programs with a cgroup made and
removed per run; 10 to 15% with each run's first process moved into its slot's cgroup).
"""

from __future__ import annotations

import errno
import os
import signal
import time
import weakref

from gdpo_verl.sandbox.host import owner, owner_gone
from gdpo_verl.sandbox.spawner import Spawner

PREFIX = "gdpo-sandbox-"
# Seconds a cgroup's processes get to end once killed: the kernel ends a pid namespace asynchronously, and a
# program of hundreds of MB takes a moment to go.
TEARDOWN_S = 30.0


class Cgroups:
    """Where the runs of a sandbox get cgroups (strict isolation): one per slot, made once, under a cgroup of this
    process's that the node delegates, cgroup v2 (``memory`` and ``pids`` enabled in its
    ``cgroup.subtree_control``) or v1 (the ``memory`` and ``cpuacct`` hierarchies, writable; processes are bounded by
    ``RLIMIT_NPROC`` on the run's own user id there). A slot's cgroup bounds the memory of everything its run holds,
    kernel memory included (page tables, huge pages, slab, pipe buffers), and counts the CPU time of every process
    the run ran, those the kernel reaped itself included (a parent that ignores SIGCHLD hides its children's time
    from ``wait4``). A run leaves its slot's cgroup empty: its pid namespace's first process is collected only once
    every process of the namespace has ended. ``OSError`` naming what is missing when the node gives none."""

    def __init__(self, slots: int, memory_bytes: int, processes: int) -> None:
        self.version, self.bases = cgroup_bases()
        _sweep(self.bases)
        self.slots: list[SlotCgroup] = []
        # removed by remove(), or when this object is collected, or at the interpreter's exit, whichever first
        self._remove = weakref.finalize(self, _remove_all, self.slots)
        try:
            for slot in range(slots):
                name = f"{PREFIX}{owner(os.getpid())}-{id(self)}-{slot}"
                self.slots.append(SlotCgroup(self.version, [os.path.join(base, name) for base in self.bases],
                                              memory_bytes, processes))
        except OSError:
            self.remove()
            raise

    def remove(self) -> None:
        self._remove()


def _remove_all(slots: list[SlotCgroup]) -> None:
    while slots:
        slots.pop().remove(TEARDOWN_S)


def _sweep(bases: list[str]) -> None:
    """Remove the cgroups of sandboxes of this pid namespace whose process is gone (a reward worker that died):
    what is left in them is killed first. Those of other pid namespaces are theirs to sweep (a hierarchy may be
    shared by every container of a machine)."""
    for base in bases:
        for entry in os.listdir(base):
            if owner_gone(entry, PREFIX):
                leftover = SlotCgroup.__new__(SlotCgroup)
                leftover.paths = [os.path.join(base, entry)]
                leftover.remove(TEARDOWN_S)


def cgroup_bases() -> tuple[int, list[str]]:
    """(2, [this process's cgroup directory]) or (1, [its memory and cpuacct directories])."""
    mounts: dict[str, tuple[str, str]] = {}  # controller (or "2") -> (mount point, mount root)
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields, _, rest = line.partition(" - ")
            fstype, _, options = rest.split()[:3]
            root, point = fields.split()[3:5]
            if fstype == "cgroup2":
                mounts.setdefault("2", (point, root))
            elif fstype == "cgroup":
                for option in options.split(","):
                    mounts.setdefault(option, (point, root))
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as cgroups:
        for line in cgroups:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else ["2"]:
                paths[controller] = path

    def directory(key: str) -> str:
        point, root = mounts[key]
        path = paths[key]
        relative = path[len(root):] if root != "/" and path.startswith(root) else path
        return os.path.join(point, relative.lstrip("/"))

    if "memory" in mounts and "memory" in paths:  # v1 (perhaps beside an empty v2 hierarchy)
        if "cpuacct" not in mounts or "cpuacct" not in paths:
            raise OSError(errno.ENOENT, "cgroup v1 without the cpuacct hierarchy")
        bases = [directory("memory"), directory("cpuacct")]
        for base in bases:
            if not os.access(base, os.W_OK):
                raise OSError(errno.EACCES, f"cgroup {base} is not writable (a container: mount /sys/fs/cgroup "
                                            "read-write, or delegate a cgroup to the reward workers)")
        return 1, bases
    if "2" in mounts and "2" in paths:
        base = directory("2")
        with open(os.path.join(base, "cgroup.subtree_control")) as control:
            enabled = set(control.read().split())
        missing = {"memory", "pids"} - enabled
        if missing:
            raise OSError(errno.ENOTSUP, f"cgroup {base} does not delegate the {' and '.join(sorted(missing))} "
                                         "controller(s) to its children (enable them in its cgroup.subtree_control)")
        if not os.access(base, os.W_OK):
            raise OSError(errno.EACCES, f"cgroup {base} is not writable")
        return 2, [base]
    raise OSError(errno.ENOENT, "no cgroup hierarchy with a memory controller is mounted")


class SlotCgroup:
    """One slot's cgroup (a directory in each hierarchy), made with its bounds."""

    def __init__(self, version: int, paths: list[str], memory_bytes: int, processes: int) -> None:
        self.version, self.paths = version, paths
        self._spawner: Spawner | None = None
        for path in paths:
            os.mkdir(path)
        try:
            if version == 2:
                self._write(paths[0], "memory.max", memory_bytes)
                self._write(paths[0], "memory.swap.max", 0, optional=True)
                self._write(paths[0], "memory.oom.group", 1, optional=True)
                self._write(paths[0], "pids.max", processes + 3)  # and bubblewrap's, the interpreter and the spawner
            else:
                self._write(paths[0], "memory.limit_in_bytes", memory_bytes)
                self._write(paths[0], "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
        except OSError:
            self.remove(TEARDOWN_S)
            raise

    @staticmethod
    def _write(path: str, name: str, value: int, optional: bool = False) -> None:
        target = os.path.join(path, name)
        if optional and not os.path.exists(target):
            return
        with open(target, "w") as control:
            control.write(str(value))

    def add(self, pid: int) -> None:
        for path in self.paths:
            with open(os.path.join(path, "cgroup.procs"), "w") as procs:
                procs.write(str(pid))

    def spawner(self) -> Spawner:
        """The slot's spawner, started (and put in the cgroup) when there is none or it ended."""
        if self._spawner is None or not self._spawner.alive():
            if self._spawner is not None:
                self._spawner.close()
            self._spawner = None
            self._spawner = Spawner(self.add)
        return self._spawner

    def cpu_seconds(self) -> float:
        """CPU time of every process that ran in this cgroup (the kernel's count)."""
        if self.version == 2:
            with open(os.path.join(self.paths[0], "cpu.stat")) as stat:
                usage = dict(line.split() for line in stat if line.strip())
            return int(usage["usage_usec"]) / 1e6
        with open(os.path.join(self.paths[1], "cpuacct.usage")) as usage:
            return int(usage.read()) / 1e9

    def clear(self, timeout: float, spawner: int) -> None:
        """Kill whatever is in the cgroup but its ``spawner`` and wait (at most ``timeout`` seconds) until nothing
        else is."""
        deadline = time.monotonic() + timeout
        while True:
            with open(os.path.join(self.paths[0], "cgroup.procs")) as procs:
                left = [pid for pid in procs.read().split() if int(pid) != spawner]
            if not left:
                return
            if time.monotonic() > deadline:
                raise OSError(errno.EBUSY, f"processes {' '.join(left)} are still in {self.paths[0]}")
            for pid in left:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    continue
            time.sleep(0.005)

    def remove(self, timeout: float) -> None:
        """Stop the spawner, kill what is left in the cgroup, wait for it to be empty (at most ``timeout`` seconds)
        and remove it."""
        deadline = time.monotonic() + timeout
        spawner = getattr(self, "_spawner", None)  # none in a leftover that _sweep removes
        if spawner is not None:
            self._spawner = None
            spawner.close()
        for path in self.paths:
            while os.path.isdir(path):
                try:
                    os.rmdir(path)
                except OSError as error:
                    if error.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise OSError(error.errno, f"cannot remove the cgroup {path}: {error.strerror}") from None
                    with open(os.path.join(path, "cgroup.procs")) as procs:
                        for pid in procs.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except ProcessLookupError:
                                continue
                    time.sleep(0.005)


