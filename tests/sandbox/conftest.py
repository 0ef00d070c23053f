"""The sandbox's tests: a sandbox per test module (``sandbox``), and a check that a hostile run left nothing behind
(``nothing_left_behind``)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from gdpo_verl.sandbox import Sandbox
from tests.sandbox.leftovers import LIMITS, MARK, program_processes


@pytest.fixture(scope="module")
def sandbox():
    sandbox = Sandbox("local", LIMITS, slots=2)
    sandbox.check()
    yield sandbox
    sandbox.close()


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
