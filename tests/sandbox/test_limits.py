"""Every limit is checked once, when it is given; a failure of the sandbox's own parts is reported as what it is."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gdpo_verl.sandbox import OK, Limits, Sandbox


def test_a_whole_number_written_as_a_float_is_taken_and_a_fraction_refused_by_name():
    limits = Limits(wall_s=4, cpu_s=1.0, memory_mb=256.0, processes=8.0, file_mb=4.0, output_kb=256.0)
    assert (limits.cpu_s, limits.memory_mb, limits.processes, limits.file_mb, limits.output_kb) == (1, 256, 8, 4, 256)
    assert all(type(value) is int for value in (limits.cpu_s, limits.memory_mb, limits.processes, limits.file_mb,
                                               limits.output_kb))
    with pytest.raises(ValueError, match=r"^sandbox limit cpu_s must be a whole number; got 1.5.$"):
        Limits(cpu_s=1.5)
    with pytest.raises(ValueError, match=r"^sandbox limit wall_s must be a positive number; got '10'.$"):
        Limits(wall_s="10")


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")
def test_limits_written_as_floats_run():
    # Before: cpu_s=1.0 or memory_mb=256.0 made every call raise SandboxUnavailable with a fix about user
    # namespaces (the spawner's TypeError) or about cgroups ([Errno 22] Invalid argument)
    sandbox = Sandbox("local", Limits(wall_s=4, cpu_s=1.0, memory_mb=256.0, processes=8.0, file_mb=4.0,
                                      output_kb=256.0))
    try:
        sandbox.check()
        assert sandbox.run("print(1)", "").status == OK
    finally:
        sandbox.close()


BROKEN_SPAWNER = """
from gdpo_verl.sandbox import Limits, Sandbox, SandboxUnavailable, spawner
spawner.PROGRAM = "/nonexistent/spawner.py"  # a part of the sandbox's own that fails
try:
    Sandbox("local", Limits(wall_s=4, cpu_s=1)).check()
except SandboxUnavailable as error:
    print(error)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")
def test_a_failure_of_the_sandbox_s_own_parts_is_not_reported_as_a_node_without_namespaces():
    result = subprocess.run([sys.executable, "-c", BROKEN_SPAWNER], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    said = result.stdout.strip()
    assert said.startswith("sandbox on node ") and "spawner" in said, said
    assert "namespaces" not in said and "cgroup" not in said, said
