"""What a run may ask of the kernel: a seccomp filter that allows the system calls named here and refuses every
other one (default deny).

The filter is installed once by the session's interpreter (``programs/interpreter.py``) when it has opened all it
needs, so every test case, forked from it, runs under it from its first instruction, and so does everything a
program starts. The interpreter's own few needs are ``INTERPRETER``: calls a run, which has no capability and no
socket, gets nothing from. Calls are named, never numbered: ``syscalls.py`` turns names into each
architecture's numbers, and a name an architecture lacks (``open`` on aarch64) is left out there.

Why an allow list: a program that solves a problem reads its input, computes, allocates, writes its output, and
at most starts a thread or a process. Everything else the kernel offers reaches state that outlives the run or that
the host shares (sockets, pipes, shared memory, keys, watches, asynchronous I/O, the page cache through
``fadvise``/``readahead``, pid file descriptors, namespaces, tracing), and a list of refused calls misses the next
one a kernel adds. Refused calls fail with EPERM; ``clone3`` fails with ENOSYS, so that the C library falls back to
``clone``, whose flags the filter can see.
"""

from __future__ import annotations

import functools
import struct

from gdpo_verl.sandbox.syscalls import AUDIT_ARCH, NUMBERS

# Allowed whole, by what a program uses them for.
ALLOWED = (
    # reading and writing its descriptors and files (/work, the interpreter's files, five device nodes)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "open", "openat", "creat", "close",
    "close_range", "dup", "dup2", "dup3", "fstat", "stat", "lstat", "newfstatat",
    "statfs", "fstatfs", "access", "faccessat", "faccessat2", "getdents", "getdents64", "readlink", "readlinkat",
    "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "umask",
    "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "utime", "utimes", "utimensat", "futimesat", "ioctl",
    "copy_file_range", "sendfile", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    # waiting on descriptors
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2",
    # memory of its own
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync",
    # processes and threads of its own (clone: below), inside its pid namespace
    "fork", "vfork", "execve", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill", "getpid",
    "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "getpgid",
    "getpgrp", "getsid", "setpgid", "setsid", "set_tid_address", "set_robust_list", "get_robust_list", "rseq",
    "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "getpriority", "getrlimit", "setrlimit", "getrusage",
    "times", "uname", "arch_prctl", "capget", "getcpu", "restart_syscall",
    # signals and timers (pending signals bounded by RLIMIT_SIGPENDING)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause", "alarm", "setitimer", "getitimer",
    "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
    # clocks and randomness
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "getrandom",
)

# What the interpreter still needs once it has installed the filter, beside ``ALLOWED``, and why a run gets nothing
# from them: mount and umount2 (each test case's /work) need CAP_SYS_ADMIN, and capset can only take capabilities
# away, from a run that has none; recvmsg, recvfrom, sendto and sendmsg (its control socket, and the socket pair that
# hands each test case to its process, which closes it before it runs anything of the program) need a socket, and a
# run has none and can make none.
INTERPRETER = ("mount", "umount2", "capset", "recvmsg", "recvfrom", "sendto", "sendmsg")

# clone is allowed without these flags: a namespace of its own (the user namespace is also capped at 0 by the
# sandbox's interpreter), and a pid file descriptor (its inode number counts every process the host started).
CLONE_REFUSED_FLAGS = (0x00001000      # CLONE_PIDFD
                       | 0x00000080    # CLONE_NEWTIME
                       | 0x00020000    # CLONE_NEWNS
                       | 0x02000000    # CLONE_NEWCGROUP
                       | 0x04000000    # CLONE_NEWUTS
                       | 0x08000000    # CLONE_NEWIPC
                       | 0x10000000    # CLONE_NEWUSER
                       | 0x20000000    # CLONE_NEWPID
                       | 0x40000000)   # CLONE_NEWNET
# Calls allowed with these arguments only (argument index: the values allowed), each for its reason:
# - prctl: reading settings and naming a thread; not switching back on transparent huge pages (PR_SET_THP_DISABLE: a
#   2 MB page held through a 4 KB mapping is memory outside the address-space limit), nor anything else;
# - prlimit64 and setpriority: the calling process only (pid 0), never another, such as the session's interpreter,
#   whose limits and priority every later test case would inherit.
PRCTL_ALLOWED = {"PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_SET_NAME": 15, "PR_GET_NAME": 16,
                 "PR_GET_SECCOMP": 21, "PR_CAPBSET_READ": 23, "PR_GET_TIMERSLACK": 30, "PR_GET_NO_NEW_PRIVS": 39,
                 "PR_GET_THP_DISABLE": 42}
# - fcntl: descriptor flags, status flags and duplicates only; no locks, leases or directory notices, which the
#   kernel keeps on the inode, so that two runs holding the same file (the image's, a device node) would see them
#   (a lock toggled in one slot and tested in another passed 10 kbit/s): flock is refused whole for that reason.
FCNTL_ALLOWED = {"F_DUPFD": 0, "F_GETFD": 1, "F_SETFD": 2, "F_GETFL": 3, "F_SETFL": 4, "F_DUPFD_CLOEXEC": 1030,
                 "F_GETPIPE_SZ": 1032}
ARGUMENTS = {
    "prctl": {0: tuple(sorted(PRCTL_ALLOWED.values()))},
    "prlimit64": {0: (0,)},
    "setpriority": {0: (0,), 1: (0,)},  # PRIO_PROCESS, this process
    "fcntl": {1: tuple(sorted(FCNTL_ALLOWED.values()))},
}
# Calls allowed only with these bits set in an argument (argument index: the bits):
# - futex: FUTEX_PRIVATE_FLAG, a futex of the process's own memory; a shared one is keyed on the inode of a shared
#   file mapping, which another run of the same image reaches (a wake in one slot woke a wait in another).
FLAGS_REQUIRED = {"futex": {1: 0x80}}
# Refused with ENOSYS, so that the C library falls back to another call: clone3 passes its flags in memory, out of a
# filter's sight (the fallback, clone, shows them); statx tells a mount's unique id, a counter of every mount the host
# made, which gives away how many test cases ran before (the fallback, newfstatat, does not).
FALLBACK = ("clone3", "statx")

_EPERM, _ENOSYS = 1, 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
# struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments (their low 32 bits first on the
# little-endian architectures the sandbox runs on)
_NR, _ARCH, _ARG0 = 0, 4, 16


@functools.cache  # built once per architecture in a process: each session's sandbox gets the same
def seccomp_filter(machine: str) -> bytes:
    """The classic-BPF program (``struct sock_filter`` array) for ``machine`` (``x86_64`` or ``aarch64``): the calls
    above allowed, ``clone`` without ``CLONE_REFUSED_FLAGS``, the calls of ``ARGUMENTS`` with those arguments and
    of ``FLAGS_REQUIRED`` with those bits, ``FALLBACK`` refused with ENOSYS, every other call, and any other
    architecture's calling convention (a 32-bit or x32 call would pass a filter by number), refused with EPERM."""
    numbers = NUMBERS[machine]
    allow, eperm, enosys = (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | _EPERM), \
        (_RET_K, 0, 0, _RET_ERRNO | _ENOSYS)
    program: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, _ARCH), (_JEQ_K, 1, 0, AUDIT_ARCH[machine]), eperm,
                                                (_LD_W_ABS, 0, 0, _NR)]
    if machine == "x86_64":
        program += [(_JGE_K, 0, 1, 0x40000000), eperm]  # the x32 ABI
    for name in (*ALLOWED, *INTERPRETER):
        if name in numbers:
            program += [(_JEQ_K, 0, 1, numbers[name]), allow]
    for name in FALLBACK:
        program += [(_JEQ_K, 0, 1, numbers[name]), enosys]
    # clone: its flags (the first argument)
    program += [(_JEQ_K, 0, 4, numbers["clone"]), (_LD_W_ABS, 0, 0, _ARG0), (_JSET_K, 1, 0, CLONE_REFUSED_FLAGS),
                allow, eperm]
    for name, rules in ARGUMENTS.items():
        block: list[tuple[int, int, int, int]] = []
        for index, values in rules.items():  # each argument in turn: one of its values, or refused
            block.append((_LD_W_ABS, 0, 0, _ARG0 + 8 * index))
            block += [(_JEQ_K, len(values) - at, 0, value) for at, value in enumerate(values)]
            block.append(eperm)
        block.append(allow)
        program += [(_JEQ_K, 0, len(block), numbers[name]), *block]
    for name, rules in FLAGS_REQUIRED.items():
        block = []
        for index, bits in rules.items():  # each argument in turn: the bits set, or refused
            block += [(_LD_W_ABS, 0, 0, _ARG0 + 8 * index), (_JSET_K, 1, 0, bits), eperm]
        block.append(allow)
        program += [(_JEQ_K, 0, len(block), numbers[name]), *block]
    program.append(eperm)
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)
