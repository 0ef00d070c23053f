"""What the sandbox's tests share: their limits, and how a test finds the processes a sandbox left behind."""

from __future__ import annotations

import os
import uuid

from gdpo_verl.sandbox import Limits, Sandbox

LIMITS = Limits(wall_s=4, cpu_s=2, memory_mb=256, processes=8, file_mb=4, output_kb=256)
# in the command line of the processes a test's program starts, so that they are found (not as root)
MARK = f"gdpo-hostile-{uuid.uuid4().hex[:8]}"


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
                if sandbox.node.uid_base <= uid < sandbox.node.uid_base + sandbox.slots:
                    found.append(int(entry.name))
            elif b"main.py" in argv and b"-I" in argv or any(MARK.encode() in part for part in argv):
                found.append(int(entry.name))
    return found
