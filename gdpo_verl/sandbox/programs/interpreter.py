"""A session's interpreter (local mode): the first process of its sandbox, compiled once by the image's python
(``image.py``) and run by path as ``python -s -B /interpreter.pyc CONTROL PROGRAM FILTER FILE_BYTES WORK_ENTRIES``.

It imports the standard modules programs use most, reads the program (descriptor PROGRAM) and compiles it once, and
answers "R" (or "E" and the error, as python reports it, when the program does not compile; "F" and why when the
interpreter itself could not start). It caps user namespaces below its own at 0 (no run can make one).

Each test case is a process forked from the interpreter before the host sends the case. Once every process of the
case before is collected, the interpreter takes that case's /work away, mounts a new tmpfs of FILE_BYTES and
WORK_ENTRIES entries on /work holding only main.py, and forks the next case's process, numbered 2 (it sets its pid
namespace's last pid to 1 first). The unmount waits for the kernel's other CPUs: done here, it takes the time the
host takes to read the answer and send the next case. The process, under the filter the interpreter installed once
before it took a case (descriptor FILTER, ``policy.py``), drops every capability (no new privileges, and empty
bounding and ambient sets, were set once for every process), works in /work and waits. The host sends "A" and the
case's arguments, with its stdin, stdout and stderr; the interpreter hands them on (a socket pair made for that,
which the process closes, with every descriptor but those three, before it runs anything of the program) and says
"S"; the process runs the compiled program as __main__, ending as python would. When it ends (or the host sends
"end"), the interpreter kills every other process of the namespace (kill -1 from its first process reaches all of
them, and all are the case's), collects them and answers. Nothing of a case reaches the next: its processes, its
files (inode numbers included) and its tmpfs are gone before the next case's process is forked, and the next case's
pids and device numbers are the same. There is no /proc (the interpreter keeps what it needs of it open). The answer
("D") gives the exit code (128 + the signal), the CPU time of the case's processes and the interpreter's own CPU
time, as the kernel wrote them (the host reads them); "F" and why when the case could not be set up. It ends when the
host closes the socket.
"""
import _ctypes, _socket, gc, os, resource, select, signal, sys


class _ffi:
    """What this program uses of ctypes, made from ctypes' C module as the ctypes package makes it: importing the
    package would cost about 2 ms of every session's start."""

    # the C types by their struct codes, as ctypes declares them
    c_int, c_uint32, c_ushort, c_ulong, c_void_p, c_char = (
        type(name, (_ctypes._SimpleCData,), {"_type_": code})
        for name, code in (("c_int", "i"), ("c_uint32", "I"), ("c_ushort", "H"), ("c_ulong", "L"), ("c_void_p", "P"),
                           ("c_char", "c")))
    c_size_t = c_ulong
    Structure, addressof, byref = _ctypes.Structure, _ctypes.addressof, _ctypes.byref
    get_errno, set_errno = _ctypes.get_errno, _ctypes.set_errno
    # a C function of int result whose errno is kept, as ctypes.CDLL(use_errno=True) makes them
    Function = type("Function", (_ctypes.CFuncPtr,),
                    {"_flags_": _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO, "_restype_": c_int})

    class Library:
        """The process's own symbols, as ctypes.CDLL(None): each function made on first use."""

        def __init__(self):
            self._handle = _ctypes.dlopen(None, os.RTLD_NOW | os.RTLD_LOCAL)

        def __getattr__(self, name):
            function = _ffi.Function(_ctypes.dlsym(self._handle, name))
            setattr(self, name, function)
            return function

    @staticmethod
    def buffer(data, size):
        """As ctypes.create_string_buffer(data, size): ``size`` bytes, ``data`` first, zeros after."""
        made = (_ffi.c_char * size)()
        made.raw = data + bytes(size - len(data))
        return made

signal.signal(signal.SIGINT, signal.SIG_DFL)  # its namespace's first process: a signal with no handler never comes
MS_NOSUID, MS_NODEV, MS_NOEXEC, MNT_DETACH = 0x2, 0x4, 0x8, 0x2
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 22, 2
_libc = _ffi.Library()
_mount, _umount2, _prctl, _capset = _libc.mount, _libc.umount2, _libc.prctl, _libc.capset
_ffi.memset = _libc.memset
_ffi.memset.argtypes = (_ffi.c_void_p, _ffi.c_int, _ffi.c_size_t)
# What comes back of a case (its exit status, CPU times) is written by the kernel into one buffer, sent to the host as
# it is, and cleared: no value a case chooses becomes an object of this process, whose memory the next case is forked
# from (freed objects keep their values). So these calls return nothing to python, and errno says how they went.
_wait4, _waitid, _kill, _getrusage, _send, _read_into = (_libc.wait4, _libc.waitid, _libc.kill, _libc.getrusage,
                                                         _libc.send, _libc.read)
for _call, _arguments in ((_wait4, (_ffi.c_int, _ffi.c_void_p, _ffi.c_int, _ffi.c_void_p)),
                          (_waitid, (_ffi.c_int, _ffi.c_int, _ffi.c_void_p, _ffi.c_int)),
                          (_kill, (_ffi.c_int, _ffi.c_int)), (_getrusage, (_ffi.c_int, _ffi.c_void_p)),
                          (_send, (_ffi.c_int, _ffi.c_void_p, _ffi.c_size_t, _ffi.c_int)),
                          (_read_into, (_ffi.c_int, _ffi.c_void_p, _ffi.c_size_t))):
    _call.restype, _call.argtypes = None, _arguments
RUSAGE_SELF, RUSAGE_CHILDREN, ECHILD, EINTR, EINVAL = 0, -1, 10, 4, 22
_RUSAGE = 144  # sizeof(struct rusage) on 64-bit Linux
# The most a case may wake the interpreter while its own process runs: its processes (RLIMIT_NPROC), at most 256 (a
# count python keeps as numbers it does not make anew)
_NPROC = resource.getrlimit(resource.RLIMIT_NPROC)[0]
WAKES = 256 if _NPROC == resource.RLIM_INFINITY else min(_NPROC, 256)
P_PID, WNOHANG, WEXITED, WNOWAIT = 1, 1, 4, 0x01000000
# "D", the case's wait status at 8, then RUSAGE_CHILDREN before it at 16 and after it at 16 + _RUSAGE, and the
# interpreter's own RUSAGE_SELF at 16 + 2 * _RUSAGE; then room, not sent, for a siginfo_t (waitid: whether the case has
# ended, its si_pid at 16 of it) and for what is read of the signalfd (SIGCHLD's siginfo: a case may choose it)
ANSWER = 16 + 3 * _RUSAGE
_SIGINFO = 128
_SCRATCH = 2 * _SIGINFO


DEVICES = (b"null", b"zero", b"full", b"random", b"urandom")
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 0x1, 0x20, 0x1000, 0x400, 0x800, 0x200000
# statvfs's flags and the mount flags they stand for: a remount keeps the flags the bind was made with
_KEPT = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME,
         os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}


def _read_only(path):
    kept = os.statvfs(path).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(flag for bit, flag in _KEPT.items() if kept & bit)
    _check(_mount(None, path, None, flags, None), f"{path.decode()} read-only")


def _check(result, what):
    if result != 0:
        number = _ffi.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


class _Filter(_ffi.Structure):  # struct sock_fprog
    _fields_ = [("len", _ffi.c_ushort), ("filter", _ffi.c_void_p)]


class _Confinement:
    """What the interpreter makes of each case's world: its /work, what every process inherits, the filter, and what
    the case's process drops (made once here: a fork then only calls)."""

    def __init__(self, rules, file_bytes, entries):
        self.rules = _ffi.buffer(rules, len(rules))
        self.program = _Filter(len(rules) // 8, _ffi.c_void_p(_ffi.addressof(self.rules)))
        self.header = (_ffi.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        self.sets = (_ffi.c_uint32 * 6)()  # effective, permitted, inheritable: none
        self.options = f"size={file_bytes},nr_inodes={entries},mode=0755".encode()
        self.mounted = False  # /work is a tmpfs of the interpreter's making (bubblewrap's is a plain directory)

    def fresh_work(self, source):
        """Take the last case's /work away and wait until it is gone, then mount a new tmpfs on /work holding only
        main.py. This process never works in /work (its working directory is /), and no process of the last case is
        left, so the unmount drops the mount's last reference: its memory is freed, and its device number free
        again, before the new tmpfs is made (which gets the same number)."""
        if self.mounted:
            _check(_umount2(b"/work", MNT_DETACH), "the last case's /work taken away")
            self.mounted = False
        _check(_mount(b"tmpfs", b"/work", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, self.options), "/work")
        self.mounted = True
        fd = os.open("/work/main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(source)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    @staticmethod
    def for_every_case():
        """What every process this one starts inherits, set once: no new privileges, no capability left to gain
        (an empty bounding set, no ambient capability). They bind only what a process executes; this one executes
        nothing, and keeps its own capabilities for the mounts."""
        _check(_prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
        _check(_prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient capabilities cleared")
        capability = 0
        while _prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) == 0:
            capability += 1
        if _ffi.get_errno() != EINVAL:  # EINVAL: past the last capability this kernel knows, all of them gone
            _check(-1, f"capability {capability} dropped from the bounding set")

    def filter(self):
        """The filter, on this process and so on every case forked from it: installed once (attaching it costs a
        fork's time), when the interpreter has opened everything it needs."""
        _check(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, _ffi.byref(self.program), 0, 0), "the seccomp filter")

    def confine(self):
        """In the case's process, before anything of the program: no capability (effective, permitted, inheritable;
        the bounding and ambient sets are empty already, no new privileges, and the filter is on), its working
        directory /work, and SIGCHLD unblocked, as python has it (the interpreter's is blocked, read through a
        signalfd)."""
        _check(_capset(self.header, self.sets), "capabilities dropped")
        os.chdir("/work")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


def _answer_and_wait(channel, answer):
    channel.send(answer[:8000])
    channel.recv(1)  # until the host closes the socket
    os._exit(0)


def _receive(channel, flags=0):
    message, ancillary, _, _ = channel.recvmsg(1 << 16, _socket.CMSG_SPACE(3 * 4), flags)
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[at:at + 4], sys.byteorder, signed=True)
                    for at in range(0, len(data) - len(data) % 4, 4)]
    return message, fds


def _discard(waiting):
    """What a case's process did not take of its test case (it ended first): the descriptors closed."""
    while True:
        try:
            message, fds = _receive(waiting, _socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        for fd in fds:
            os.close(fd)
        if not message and not fds:  # the other end closed (this process holds it: never)
            return


def _fork_case(last_pid):
    """The next case's process, numbered 2 (every process of the case before is collected): its pid namespace's last
    pid set to 1, then forked."""
    os.pwrite(last_pid, b"1", 0)
    return os.fork()


def _become_case(channel, handoff, waiting, confinement, reported, case=None):
    """In a case's process, forked from the interpreter: the interpreter's sockets closed, the process confined, and
    its test case (the host's "A" message and its three descriptors) taken from ``waiting``, or ``case`` when it was
    forked after the case came; the program's arguments and the descriptors. A failure is written to ``reported``
    for the interpreter to answer with, and ends the process before it runs anything of the program."""
    os.close(channel.detach())
    handoff.close()
    try:
        confinement.confine()
        message, fds = case or _receive(waiting)
        if len(fds) != 3:
            raise OSError(f"the test case came with {len(fds)} descriptors, not 3")
    except BaseException as error:
        os.write(reported, repr(error).encode("utf-8", "replace")[:4000])
        os._exit(1)
    waiting.close()
    return [os.fsdecode(argument) for argument in message[1:].split(b"\0")[:-1]], fds


def _ended(pid, siginfo):
    """Whether the case's process has ended (left for _reap to collect): waitid's si_pid, the case's pid or 0, read
    from the buffer; nothing else of the siginfo (its status) is read here."""
    _ffi.memset(siginfo, 0, _SIGINFO)
    _waitid(P_PID, pid, siginfo, WEXITED | WNOHANG | WNOWAIT)
    return _ffi.c_int.from_address(siginfo + 16).value == pid


def _reap(pid, status):
    """Collect the case's process, its wait status written into the buffer at ``status``."""
    while True:
        _ffi.set_errno(0)
        _wait4(pid, status, 0, None)
        if _ffi.get_errno() != EINTR:
            return


def _empty(fd, scratch):
    """Read what is waiting on the non-blocking signalfd into ``scratch``, where it is cleared: nothing of it becomes
    a python object."""
    while True:
        _ffi.set_errno(0)
        _read_into(fd, scratch, _SIGINFO)
        if _ffi.get_errno() not in (0, EINTR):  # EAGAIN: nothing more
            _ffi.memset(scratch, 0, _SIGINFO)
            return


def _drain(fd):
    """What is there to read on a non-blocking pipe (the case's own failure to confine itself)."""
    chunks = []
    while True:
        try:
            block = os.read(fd, 65536)
        except BlockingIOError:
            return b"".join(chunks)
        if not block:
            return b"".join(chunks)
        chunks.append(block)


def _read(fd):
    chunks = []
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            os.close(fd)
            return b"".join(chunks)
        chunks.append(block)


def _serve():
    channel = _socket.socket(fileno=int(sys.argv[1]))
    try:
        if os.getpid() != 1:  # kill(-1) would reach every process of this user id, not only a run's
            raise OSError("the interpreter is not its pid namespace's first process")
        # run by path, python put this program's directory first on sys.path: / (a run could import /interpreter.pyc
        # and the tops of the image by name). Runs get sys.path as python -I gives a program run on its file (mode
        # "none"), with no directory of the program's own.
        sys.path.remove("/")
        _check(_prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")  # its memory closed to what it starts
        with open("/proc/sys/user/max_user_namespaces", "w") as limit:
            limit.write("0")  # no user namespace below this one: nothing a run starts can make one
        last_pid = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)
        for node in DEVICES:  # the host's nodes, bound: read-only, so that no run sets their times
            _read_only(b"/dev/" + node)
        _check(_umount2(b"/proc", MNT_DETACH), "/proc taken away")  # nothing a case can read of the host's counters
        source, rules = _read(int(sys.argv[2])), _read(int(sys.argv[3]))
        confinement = _Confinement(rules, int(sys.argv[4]), int(sys.argv[5]))
        confinement.for_every_case()
        # a case's end wakes it through a signalfd of SIGCHLD, blocked and with no handler: what a case sends it (a
        # child's status, or a siginfo the case makes up with rt_sigqueueinfo) is read into the cleared buffer only,
        # and runs no python (the filter refuses pidfds and new pipes later); a case that cannot confine itself says
        # why through a pipe
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        mask = (_ffi.c_ulong * 16)(1 << (signal.SIGCHLD - 1))  # sigset_t
        woken = _libc.signalfd(-1, mask, os.O_NONBLOCK | os.O_CLOEXEC)
        if woken < 0:
            _check(-1, "a signalfd for SIGCHLD")
        report, reported = os.pipe()
        os.set_blocking(report, False)
        # how a test case reaches its process, forked before the host sends it (its arguments and descriptors)
        handoff, waiting = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        # what programs import most (and what ends a run: atexit, threading), imported once
        import atexit, bisect, builtins, collections, functools, heapq, importlib.machinery, itertools, math
        import operator, random, re, string, threading, types, typing
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
    answer = _ffi.buffer(b"D", ANSWER + _SCRATCH)  # the one place a case's results are written
    at = _ffi.addressof(answer)
    # the runs share these pages: the collector does not write to them. Collected first (nothing of a program has run
    # yet), which also empties python's free lists: each run's full collection at its end empties them again, writing
    # to every page they hold; the loop below puts only a few entries back (0.1 ms a run before, 0.01 ms after, of a
    # trivial run's 2.6 ms of CPU, measured)
    gc.collect()
    gc.freeze()
    try:
        confinement.filter()
    except OSError as error:
        _answer_and_wait(channel, b"F" + repr(error).encode("utf-8", "replace"))
    channel.send(b"R")
    while True:
        # The next test case's /work and process, made before the host sends the case (they take the time the host
        # takes to read the last answer and send the next case): the last case's /work taken away (its processes are
        # all collected) and a new one made (``fresh_work``), then the process forked (``_fork_case``), which
        # confines itself and waits for its test case. Failing, the next case is answered with this process's
        # failure.
        try:
            confinement.fresh_work(source)
            pid = _fork_case(last_pid)
        except OSError as error:  # no /work, out of processes: the sandbox's failure, not the program's
            pid, failed = None, repr(error).encode("utf-8", "replace")
        if pid == 0:
            return (code, main, *_become_case(channel, handoff, waiting, confinement, reported))
        message, fds = _receive(channel)
        while message == b"end":  # for a run already answered
            message, fds = _receive(channel)
        if not message:
            os._exit(0)  # the host is done: the kernel ends the namespace with its first process
        if not message.startswith(b"A") or len(fds) != 3:
            raise RuntimeError(f"a run came as {message[:20]!r} with {len(fds)} descriptors, not 3")
        if pid is None:
            for fd in fds:
                os.close(fd)
            channel.send(b"F" + failed)
            continue
        try:
            handoff.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                         b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))])
        except OSError:
            # the kernel would not pass the descriptors (ETOOMANYREFS: this user id has more in flight than this
            # process's RLIMIT_NOFILE, as when the host shares it, isolation "relaxed"): the waiting process, which
            # ran nothing of the program, is ended, and the case's process forked now, inheriting them
            _kill(pid, signal.SIGKILL)
            _reap(pid, at + 8)
            try:
                pid = _fork_case(last_pid)
            except OSError as error:
                for fd in fds:
                    os.close(fd)
                channel.send(b"F" + repr(error).encode("utf-8", "replace"))
                continue
            if pid == 0:
                return (code, main, *_become_case(channel, handoff, waiting, confinement, reported, (message, fds)))
        for fd in fds:
            os.close(fd)
        _getrusage(RUSAGE_CHILDREN, at + 16)  # after the fork: the child's memory never holds it
        channel.send(b"S")  # the run is the child's from here
        poller = select.poll()
        poller.register(woken, select.POLLIN)
        poller.register(channel.fileno(), select.POLLIN)
        # what the processes ended before this case left on the signalfd (the last case's, collected after its answer;
        # a waiting process ended on the fallback path) is not this case's
        _empty(woken, at + ANSWER + _SIGINFO)
        wakes = 0
        while not _ended(pid, at + ANSWER):
            for fd, _ in poller.poll():
                if fd == woken:
                    _empty(woken, at + ANSWER + _SIGINFO)
                    if _ended(pid, at + ANSWER):
                        continue
                    # SIGCHLD while the case's process runs: a process of the case that ended (or stopped) after its
                    # parent, the interpreter its parent then, as init is under python on a host; or a process of
                    # the case signalling the interpreter (kill, its process group, sigqueue). Each wakes the
                    # interpreter and adds to its own CPU time, which says when the host starts a sandbox anew, so
                    # a case may wake it as often as it may have processes (each such process is left a zombie,
                    # holding its place, until the case ends), and is ended past that.
                    wakes += 1
                    if wakes > WAKES:
                        _kill(-1, signal.SIGKILL)
                elif channel.recv(16):  # "end"
                    _kill(-1, signal.SIGKILL)
                else:
                    os._exit(0)
        _reap(pid, at + 8)
        while True:  # every other process of the namespace (all are the case's), until none is left
            _kill(-1, signal.SIGKILL)
            _ffi.set_errno(0)
            _wait4(-1, None, 0, None)
            if _ffi.get_errno() == ECHILD:
                break
        _getrusage(RUSAGE_CHILDREN, at + 16 + _RUSAGE)
        _getrusage(RUSAGE_SELF, at + 16 + 2 * _RUSAGE)
        failed = _drain(report)
        if failed:
            channel.send(b"F" + failed)
        else:
            _send(channel.fileno(), at, ANSWER, 0)
        _ffi.memset(at + 8, 0, ANSWER + _SCRATCH - 8)
        _discard(waiting)


_code, _main, _argv, _fds = _serve()
# the run: a process that has run nothing of the program
for _number, _fd in enumerate(_fds):
    os.dup2(_fd, _number)
os.closerange(3, 1 << 16)
signal.signal(signal.SIGINT, signal.default_int_handler)
# no SIGXCPU, SIGKILL at the hard limit (a second past cpu_s), as for a sandbox's first process: the host counts
# the run's CPU time exactly and stops it at cpu_s (the kernel's per-process count, sampled, may lead it by 10%)
resource.setrlimit(resource.RLIMIT_CPU, (resource.getrlimit(resource.RLIMIT_CPU)[1],) * 2)
import _io, atexit, threading
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
# still holds elsewhere is flushed (the collector tracks only what the program made), and the output flushed again.
# A file object is an instance of _io._IOBase, the class whose finalizer flushes and closes it as python's exit tears
# the modules down (io.IOBase, an abstract class, also matches classes only registered with it, such as _pyio's, which
# have no such finalizer and which python's exit does not flush when a module holds them; and it cost each run a fresh
# walk of its subclasses: 0.2 ms, 7% of a trivial run's CPU time, measured)
threading._shutdown()
atexit._run_exitfuncs()
if not _flush((sys.stdout, sys.stderr)):
    _status = 120
for _name in sorted(_main.__dict__, key=lambda name: not name.startswith("_")):
    if _name != "__builtins__":
        _main.__dict__[_name] = None
sys.last_type = sys.last_value = sys.last_traceback = _error = None
gc.collect()
_flush([found for found in gc.get_objects() if isinstance(found, _io._IOBase)])
_flush((sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__))
os._exit(_status & 0xFF)
