"""Starting a run: bubblewrap's command (the sandbox's mounts and namespaces), the limits of its processes, and the
process handle the host keeps of it (``Run``)."""

from __future__ import annotations

import json
import os
import subprocess

from gdpo_verl.sandbox.host import parent, read_all, readable
from gdpo_verl.sandbox.limits import Limits

INTERPRETER = os.path.join(os.path.dirname(__file__), "programs", "interpreter.py")
# the device nodes a run has (programs/interpreter.py makes each read-only: they are the host's, and their times
# would pass from run to run)
DEVICES = ("null", "zero", "full", "random", "urandom")
# Files, directories and links a test case's /work may hold (the tmpfs's nr_inodes; a hard link takes one too): what
# the kernel holds for them, and what taking them down costs the interpreter after the case, stay small (332,000
# links cost 0.56 s to take down).
WORK_ENTRIES = 4096


def bwrap_command(bwrap: str, python: str, image_mounts: list[str], limits: Limits, hash_seed: int, pyc: int,
                  program: int, filter_fd: int, status: int, control: int) -> list[str]:
    """bubblewrap's command for a session's sandbox, whose first process is the interpreter
    (``programs/interpreter.py``, compiled: read from descriptor ``pyc`` into /interpreter.pyc), with every
    namespace of its own and capabilities in its own user namespace only (it makes each test case's namespaces; the
    program's process drops them all). The interpreter gets the descriptors ``program``, ``filter_fd`` (the test
    cases' filter) and ``control`` (its socket); ``status`` is bubblewrap's status pipe. ``hash_seed``: python's hash
    seed, the same for every sandbox of a ``Sandbox`` (a sandbox started anew is not told apart by its hashes)."""
    # /dev: only these nodes (made read-only by the interpreter: bubblewrap's --remount-ro would add nodev), under a
    # read-only tmpfs: no devpts (the pseudo-terminals a host's containers share), no /dev/shm
    devices = [argument for node in DEVICES for argument in ("--dev-bind", f"/dev/{node}", f"/dev/{node}")]
    return [
        # --as-pid-1: the interpreter is its pid namespace's first process, so when it ends the kernel ends every
        # process of the sandbox; and bubblewrap collects it (its own first process, without this, is left to the
        # host's reaper at the end: a zombie under a parent that reaps nothing). --die-with-parent: the interpreter
        # gets SIGKILL when bubblewrap dies, and bubblewrap when this process dies. bubblewrap sets those only once
        # its sandbox is set up: a run starting when this process dies is ended by the sandbox's guardian.
        bwrap, "--unshare-all", "--unshare-user", "--cap-add", "ALL", "--as-pid-1", "--die-with-parent",
        "--new-session",
        "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work",
        "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONIOENCODING", "utf-8",
        # the system: the image (image.py), a tmpfs, read-only
        *image_mounts, "--proc", "/proc", "--tmpfs", "/dev", *devices,
        "--dir", "/work", "--symlink", "/work", "/tmp", "--chdir", "/",
        "--file", str(pyc), "/interpreter.pyc", "--remount-ro", "/dev", "--remount-ro", "/",
        "--json-status-fd", str(status),
        # not -I: it would ignore PYTHONHASHSEED (the environment is bubblewrap's, cleared but for what is set here)
        "--setenv", "PYTHONHASHSEED", str(hash_seed),
        "--", python, "-s", "-B", "/interpreter.pyc", str(control), str(program), str(filter_fd),
        str(limits.file_mb * 2**20), str(WORK_ENTRIES),
    ]


def rlimits(limits: Limits, local: bool, shared_user: bool, user_tasks: int, slots: int) -> dict[str, tuple[int, int]]:
    """The limits of a run's processes (soft, hard), by ``RLIMIT_`` name. ``RLIMIT_NPROC`` counts every task of a
    user id: a run under a user id of its own (this process is root) may have ``processes`` (and, in local mode,
    bubblewrap's process and the interpreter); runs under this process's user id share ``slots`` times that on top
    of the ``user_tasks`` the user runs now."""
    processes = limits.processes + 2 * local
    if shared_user:
        processes = user_tasks + slots * processes
    memory, size = limits.memory_mb * 2**20, limits.file_mb * 2**20
    # 64 descriptors and 64 pending signals (POSIX timers, queued signals): each holds kernel memory that
    # without a cgroup no other limit counts
    return {"cpu": (limits.cpu_s, limits.cpu_s + 1), "as": (memory, memory), "fsize": (size, size),
            "nofile": (64, 64), "memlock": (0, 0), "core": (0, 0), "sigpending": (64, 64),
            "nproc": (processes, processes)}


def prlimit_command(prlimit: str, limits: dict[str, tuple[int, int]]) -> list[str]:
    """The limits, set by util-linux's prlimit on itself before it executes the run (thread-safe, unlike a
    preexec function); a slot's spawner sets them itself."""
    return [prlimit, *(f"--{name}={soft}:{hard}" for name, (soft, hard) in limits.items()), "--"]


def popen(command: list[str], uid: int | None, pass_fds: tuple[int, ...], cwd: str | None,
          env: dict[str, str] | None, stdin: int | None = None) -> subprocess.Popen:
    """``command`` started in a session of its own, as ``uid``; its stdin ``stdin`` (a descriptor; default a pipe),
    its stdout and stderr pipes."""
    return subprocess.Popen(
        command, stdin=subprocess.PIPE if stdin is None else stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=pass_fds, start_new_session=True, cwd=cwd, env=env, user=uid, group=uid,
        extra_groups=[] if uid is not None else None, bufsize=0,
    )


class Spawned:
    """bubblewrap as a slot's spawner started it: its pid, a pidfd of it and its pipes (what the host uses of a
    Popen). The spawner, its parent, collects it: its exit code is not known here (``returncode`` stays None)."""

    def __init__(self, stdin: int, stdout: int, stderr: int) -> None:
        self.stdin = open(stdin, "wb", buffering=0)
        self.stdout = open(stdout, "rb", buffering=0)
        self.stderr = open(stderr, "rb", buffering=0)
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.returncode: int | None = None
        self.cpu_before = 0.0

    def close(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            stream.close()
        if self.pidfd is not None:
            os.close(self.pidfd)


class Run:
    """One started run: the process this host started (bubblewrap, or the program without a sandbox; or bubblewrap
    started by the slot's spawner), a pidfd of it, and, in local mode, bubblewrap's status pipe, a pidfd of the
    namespace's first process (its child) once reported, and the run's cgroup under strict isolation."""

    def __init__(self, process: subprocess.Popen | Spawned, status_fd: int | None, cgroup) -> None:
        self.process, self.status_fd, self.cgroup = process, status_fd, cgroup
        self.cpu_before: float | None = None  # the slot's cgroup's count before the run started
        self.exited = False
        if isinstance(process, Spawned):
            self.cpu_before = process.cpu_before
            self.pidfd, process.pidfd = process.pidfd, None
            self.exited = self.pidfd is None  # it ended before the spawner could take a pidfd
        else:
            self.pidfd = os.pidfd_open(process.pid)
        self.child: int | None = None
        self.child_pid: int | None = None
        self.status = b""
        self.cpu = 0.0

    def read_status(self, block: bytes) -> None:
        """bubblewrap's JSON status lines: the first says its child exists (``child-pid``, a pid of bubblewrap's
        own pid namespace, which under strict isolation is not this process's: the child's host pid is read from
        bubblewrap's list of children), the last the program's exit (``exit-code``). A pidfd of the child is taken
        while bubblewrap, its parent, has not collected it, and is kept only if the pid is still bubblewrap's child
        (its number not reused)."""
        self.status += block
        if self.child is not None or b"\n" not in self.status:
            return
        try:
            json.loads(self.status.split(b"\n", 1)[0])["child-pid"]
            with open(f"/proc/{self.process.pid}/task/{self.process.pid}/children") as children:
                pid = int(children.read().split()[0])
            child = os.pidfd_open(pid)
        except (ValueError, KeyError, TypeError, IndexError, OSError):  # no such line, or the child has gone
            return
        if parent(pid) == self.process.pid:
            self.child, self.child_pid = child, pid
        else:
            os.close(child)

    def reap(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: no bound) for the process to exit; collect it (its spawner collects
        a spawned one), with the CPU time of every process it ran; whether it has exited."""
        if self.exited:
            return True
        if not readable(self.pidfd, timeout):
            return False
        if not isinstance(self.process, Spawned):
            _, code, usage = os.wait4(self.process.pid, 0)
            self.process.returncode = os.waitstatus_to_exitcode(code)
            self.cpu = usage.ru_utime + usage.ru_stime
        self.exited = True
        if self.status_fd is not None:
            self.status += read_all(self.status_fd)
        return True

    def exit_code(self) -> int | None:
        """The program's exit code as bubblewrap reported it on its status pipe; None when it did not."""
        for line in self.status.decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(entry, dict) and "exit-code" in entry:
                return int(entry["exit-code"])
        return None

    def close(self) -> None:
        for fd in (self.pidfd, self.child, self.status_fd):
            if fd is not None:
                os.close(fd)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:  # a run's stdin is a file it was given, not a pipe of the host's
                stream.close()  # unbuffered (bufsize=0): nothing left to flush into a closed pipe
