"""What a run comes to: its status, exit code, output and the reason, and the error a node that cannot run the
sandbox raises."""

from __future__ import annotations

import signal
from dataclasses import dataclass

OK = "ok"                       # the program exited 0 within every limit
ERROR = "error"                 # it exited non-zero or was killed by a signal (a crash, a limit the kernel enforces)
TIMEOUT = "timeout"             # it ran out of time: the wall clock, its CPU time or its own time (Limits)
OUTPUT_LIMIT = "output_limit"   # it wrote more than output_kb and was killed
UNAVAILABLE = "unavailable"     # the sandbox itself failed: the program never ran (an infrastructure failure)


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run on this node; the message says why and what to do."""


@dataclass(frozen=True)
class Outcome:
    """One run: ``status`` (``OK``, ``ERROR``, ``TIMEOUT``, ``OUTPUT_LIMIT``, ``UNAVAILABLE``), the exit code
    (for ``ERROR`` by a signal: 128 + the signal, as a shell reports it), stdout and the end of stderr, seconds
    of wall clock, and ``why`` for anything but ``OK``."""

    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    why: str = ""


def unavailable(why: str, seconds: float = 0.0, stderr: str = "") -> Outcome:
    return Outcome(UNAVAILABLE, None, "", stderr, seconds, why)


def why(code: int | None) -> str:
    """An exit code in words: ``exit code 3``, ``killed by SIGSEGV``."""
    if code is None:
        return "no exit status"
    if code > 128:
        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"
