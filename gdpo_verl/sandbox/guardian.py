"""Host side of the sandbox's guardian (``programs/guardian.py``; root, local mode): a process that outlives this one
(a session of its own) to end the runs this one was starting when it died.

bubblewrap sets a run's parent-death signals only once its sandbox is set up: a reward worker killed while a run
was starting left that run to go on with no wall clock, forever (one kill in 60 in a review). On the host's death
the guardian kills every process under the sandbox's user ids (root: each run has one of its own, which a program
cannot change) until none is left. Started once per sandbox; stopped by ``Sandbox.close``, or when the sandbox is
collected.
"""

from __future__ import annotations

import os
import subprocess
import sys
import weakref

PROGRAM = os.path.join(os.path.dirname(__file__), "programs", "guardian.py")


class Guardian:
    def __init__(self, first_uid: int, count: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", PROGRAM, str(os.getpid()), str(first_uid), str(count)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        self._stop = weakref.finalize(self, _stop, self.process)

    def stop(self) -> None:
        self._stop()


def _stop(process: subprocess.Popen) -> None:
    """The host is done with its runs: the guardian sweeps once more and exits (collected by the next Popen, or
    by init once this process exits)."""
    try:
        process.terminate()
    except ProcessLookupError:
        pass
