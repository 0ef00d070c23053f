"""System call numbers by name, per architecture, for the names the sandbox's filter uses (``policy.py``).

Read from Linux's UAPI headers (``asm/unistd_64.h`` for x86_64, ``asm-generic/unistd.h`` for aarch64, as arm64
configures it); calls numbered from 424 on (``fchmodat2``: 452) have one number on every architecture. A name an
architecture lacks is absent from its table (aarch64 has no ``open``, only ``openat``).
"""

from __future__ import annotations

# the audit architecture of each machine (seccomp_data.arch)
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# name: (x86_64, aarch64); None where the architecture has no such call
_TABLE = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66), "pread64": (17, 67),
    "pwrite64": (18, 68), "lseek": (8, 62), "open": (2, None), "openat": (257, 56), "creat": (85, None),
    "close": (3, 57), "close_range": (436, 436), "dup": (32, 23), "dup2": (33, None), "dup3": (292, 24),
    "fstat": (5, 80), "stat": (4, None), "lstat": (6, None), "newfstatat": (262, 79), "statfs": (137, 43),
    "fstatfs": (138, 44), "access": (21, None), "faccessat": (269, 48), "faccessat2": (439, 439),
    "getdents": (78, None), "getdents64": (217, 61), "readlink": (89, None), "readlinkat": (267, 78),
    "getcwd": (79, 17), "chdir": (80, 49), "fchdir": (81, 50), "mkdir": (83, None), "mkdirat": (258, 34),
    "rmdir": (84, None), "unlink": (87, None), "unlinkat": (263, 35), "rename": (82, None), "renameat": (264, 38),
    "renameat2": (316, 276), "link": (86, None), "linkat": (265, 37), "symlink": (88, None), "symlinkat": (266, 36),
    "chmod": (90, None), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452), "umask": (95, 166),
    "truncate": (76, 45), "ftruncate": (77, 46), "fallocate": (285, 47), "fsync": (74, 82), "fdatasync": (75, 83),
    "utime": (132, None), "utimes": (235, None), "utimensat": (280, 88), "futimesat": (261, None),
    "ioctl": (16, 29), "copy_file_range": (326, 285), "sendfile": (40, 71), "getxattr": (191, 8),
    "lgetxattr": (192, 9), "fgetxattr": (193, 10), "listxattr": (194, 11), "llistxattr": (195, 12),
    "flistxattr": (196, 13), "poll": (7, None), "ppoll": (271, 73), "select": (23, None), "pselect6": (270, 72),
    "epoll_create": (213, None), "epoll_create1": (291, 20), "epoll_ctl": (233, 21), "epoll_wait": (232, None),
    "epoll_pwait": (281, 22), "epoll_pwait2": (441, 441), "brk": (12, 214), "mmap": (9, 222), "munmap": (11, 215),
    "mprotect": (10, 226), "mremap": (25, 216), "madvise": (28, 233), "msync": (26, 227), "fork": (57, None),
    "vfork": (58, None), "execve": (59, 221), "exit": (60, 93), "exit_group": (231, 94), "wait4": (61, 260),
    "waitid": (247, 95), "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131), "getpid": (39, 172),
    "getppid": (110, 173), "gettid": (186, 178), "getuid": (102, 174), "geteuid": (107, 175), "getgid": (104, 176),
    "getegid": (108, 177), "getgroups": (115, 158), "getresuid": (118, 148), "getresgid": (120, 150),
    "getpgid": (121, 155), "getpgrp": (111, None), "getsid": (124, 156), "setpgid": (109, 154),
    "setsid": (112, 157), "set_tid_address": (218, 96), "set_robust_list": (273, 99), "get_robust_list": (274, 100),
    "rseq": (334, 293), "sched_yield": (24, 124), "sched_getaffinity": (204, 123), "sched_getparam": (143, 121),
    "sched_getscheduler": (145, 120), "sched_get_priority_max": (146, 125), "sched_get_priority_min": (147, 126),
    "getpriority": (140, 141), "getrlimit": (97, 163), "setrlimit": (160, 164), "getrusage": (98, 165),
    "times": (100, 153), "uname": (63, 160), "arch_prctl": (158, None), "capget": (125, 90), "getcpu": (309, 168),
    "restart_syscall": (219, 128), "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135),
    "rt_sigreturn": (15, 139), "rt_sigpending": (127, 136), "rt_sigsuspend": (130, 133),
    "rt_sigtimedwait": (128, 137), "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240),
    "sigaltstack": (131, 132), "pause": (34, None), "alarm": (37, None), "setitimer": (38, 103),
    "getitimer": (36, 102), "timer_create": (222, 107), "timer_settime": (223, 110), "timer_gettime": (224, 108),
    "timer_getoverrun": (225, 109), "timer_delete": (226, 111), "clock_gettime": (228, 113),
    "clock_getres": (229, 114), "clock_nanosleep": (230, 115), "nanosleep": (35, 101), "gettimeofday": (96, 169),
    "time": (201, None), "getrandom": (318, 278), "mount": (165, 40), "umount2": (166, 39), "capset": (126, 91),
    "recvmsg": (47, 212), "recvfrom": (45, 207), "sendto": (44, 206), "sendmsg": (46, 211),
    "clone3": (435, 435), "statx": (332, 291),
    "clone": (56, 220), "prctl": (157, 167), "prlimit64": (302, 261), "setpriority": (141, 140), "fcntl": (72, 25),
    "futex": (202, 98),
}

NUMBERS: dict[str, dict[str, int]] = {
    machine: {name: numbers[index] for name, numbers in _TABLE.items() if numbers[index] is not None}
    for index, machine in enumerate(AUDIT_ARCH)
}
