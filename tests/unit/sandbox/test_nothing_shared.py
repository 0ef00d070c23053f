"""Nothing a run does reaches another run: each test case's namespaces are made for it (pids, files and their inode
numbers, IPC), the files it sees are a tmpfs image whose pages no run can drop or load, and it reads nothing from a
disk. Real bubblewrap, real kernel; measured on the host where the claim is about the host."""

from __future__ import annotations

import os
import sys

import pytest

from gdpo_verl.sandbox import OK, Limits, Sandbox
from gdpo_verl.sandbox.image import BASE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")

LIMITS = Limits(wall_s=10, cpu_s=5, memory_mb=256, processes=8, file_mb=8, output_kb=256)


@pytest.fixture(scope="module")
def sandbox():
    sandbox = Sandbox("local", LIMITS, slots=1)
    sandbox.check()
    yield sandbox
    sandbox.close()


# "write": leave as much kernel state as a run can; "look": report what a run can read of it
WRITE_AND_LOOK = r"""
import os, sys
if sys.stdin.read() == "write":
    for number in range(500):                     # inode numbers of /work's tmpfs, and of /tmp
        open(f"/work/f{number}", "w").close()
        open(f"/tmp/g{number}", "w").close()
    for _ in range(300):                          # pid numbers
        if os.fork() == 0:
            os._exit(0)
        os.wait()
    os.mkdir("/work/kept")
    print("written")
else:
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    made = os.open("/work/new", os.O_CREAT | os.O_WRONLY)
    print(os.getpid(), child, os.stat("/work/main.py").st_ino, os.fstat(made).st_ino, os.stat("/work").st_dev,
          sorted(os.listdir("/work")), os.stat("/work").st_mtime_ns == os.stat("/work/main.py").st_mtime_ns)
"""


def test_a_test_case_reads_the_same_kernel_state_whatever_the_one_before_left(sandbox):
    # Before: /work was emptied but not remounted, and the namespace's pids went on: the next test case read the
    # previous one's choices from the inode number of a new file (10 bits a case) and from its pid
    with sandbox.session(WRITE_AND_LOOK) as session:
        first = session.run("look")
        assert session.run("write").stdout == "written\n"
        after = session.run("look")
        assert (first.status, after.status) == (OK, OK), (first, after)
        assert after.stdout == first.stdout, (first.stdout, after.stdout)
        assert session.started == 1


EVERY_FILE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buffer = ctypes.create_string_buffer(256)
kinds, files, bytes_read, dropped = set(), 0, 0, 0
for top, directories, names in os.walk("/"):
    for name in [*directories, *names]:
        path = os.path.join(top, name)
        if libc.statfs(path.encode(), buffer) == 0:
            kinds.add(hex(ctypes.c_long.from_buffer(buffer).value))   # f_type
    for name in names:
        path = os.path.join(top, name)
        if top.startswith("/dev") or not os.path.isfile(path):
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += 1
        except OSError:
            pass
        while block := os.read(fd, 1 << 20):
            bytes_read += len(block)
        os.close(fd)
        files += 1
print(sorted(kinds), files, bytes_read > 10**6, dropped)
"""


def _host_files() -> list[str]:
    """Files of this interpreter's standard library, as the host has them (and caches them)."""
    stdlib = os.path.dirname(os.__file__)
    return sorted(os.path.join(stdlib, name) for name in os.listdir(stdlib) if name.endswith(".py"))[:200]


def _cached_pages(paths: list[str]) -> int:
    cached = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            for offset in range(0, os.fstat(fd).st_size, 4096):
                try:
                    os.preadv(fd, [bytearray(1)], offset, os.RWF_NOWAIT)
                    cached += 1
                except BlockingIOError:
                    pass
        finally:
            os.close(fd)
    return cached


def test_a_run_reads_only_tmpfs_files_reads_no_disk_and_cannot_drop_the_host_s_cache(sandbox):
    # Before: the sandbox showed the host's /usr: a run dropped the host's cached copies of the files it shares with
    # the host (posix_fadvise needs only a read-only descriptor: 110 cached files to 0), read 96-158 MB from the
    # host's disk in 1.2 s, and stored megabytes from run to run in which pages were cached
    host = _host_files()
    for path in host:
        with open(path, "rb") as handle:
            handle.read()
    cached_before = _cached_pages(host)
    with sandbox.session(EVERY_FILE) as session:
        outcome = session.run("")
        with open(f"/proc/{session._interpreter.bwrap.child_pid}/io") as io:  # its reaped children's included
            read_bytes = int(next(line for line in io if line.startswith("read_bytes:")).split()[1])
    assert outcome.status == OK, outcome
    kinds, files, read_a_lot, dropped = outcome.stdout.rsplit(" ", 3)
    assert kinds == "['0x1021994']", outcome.stdout  # TMPFS_MAGIC: every file and directory it can reach
    assert int(files) > 500 and read_a_lot == "True" and dropped == "0\n"
    assert read_bytes == 0  # nothing fetched from a disk: the kernel's count for the run's processes
    assert _cached_pages(host) >= cached_before  # the host's cache of its own files is as it was


def test_the_image_is_on_a_tmpfs_read_only_to_the_run(sandbox):
    outcome = sandbox.run("open('/usr/bin/new', 'w')", "")
    assert "Read-only file system" in outcome.stderr, outcome
    images = [entry for entry in os.listdir(BASE) if entry.startswith("gdpo-sandbox-image-")]
    assert images, os.listdir(BASE)
