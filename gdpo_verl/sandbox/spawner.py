"""Host side of a slot's spawner (``programs/spawner.py``, strict isolation): the process, put in the slot's cgroup
once, that starts the slot's sandboxes there."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from typing import Callable

PROGRAM = os.path.join(os.path.dirname(__file__), "programs", "spawner.py")
# Seconds the spawner gets to answer a request.
ANSWER_S = 30.0


class Spawner:
    """Started by ``SlotCgroup.spawner``, which ``add``s it to the slot's cgroup before its first request: it never
    runs anything outside the cgroup."""

    def __init__(self, add: Callable[[int], None]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", PROGRAM, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.channel = ours
        try:
            add(self.process.pid)
        except BaseException:
            self.close()
            raise
        self.channel.settimeout(ANSWER_S)

    def alive(self) -> bool:
        return self.channel.fileno() >= 0 and self.process.poll() is None

    def spawn(self, uid: int, command: list[str], limits: dict[str, tuple[int, int]],
              fds: list[int]) -> tuple[int, int | None]:
        """Start ``command`` under ``uid`` and ``limits`` (``launch.rlimits``) with ``fds`` as its descriptors 0 and
        up: its pid and a pidfd of it."""
        try:
            socket.send_fds(self.channel, [json.dumps({"uid": uid, "argv": command, "limits": limits}).encode()], fds)
            message, received, _, _ = socket.recv_fds(self.channel, 64, 1)
            if not message:
                raise OSError(errno.EPIPE, f"the sandbox's spawner (pid {self.process.pid}) has ended")
        except ConnectionError as error:
            self.close()
            raise OSError(errno.EPIPE, f"the sandbox's spawner (pid {self.process.pid}) has ended ({error})") from None
        except BaseException:
            self.close()  # a new one for the next run
            raise
        return int(message), (received[0] if received else None)

    def close(self) -> None:
        self.channel.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
