"""``Session``: one program run on many inputs, one at a time, in one slot: each run in the session's sandbox
(``start.py``, ``protocol.py``), or without one (``plain.py``)."""

from __future__ import annotations

import time

from gdpo_verl.sandbox.node import Node
from gdpo_verl.sandbox.outcome import Outcome, unavailable
from gdpo_verl.sandbox.plain import run_plain
from gdpo_verl.sandbox.protocol import Interpreter
from gdpo_verl.sandbox.slots import Slots
from gdpo_verl.sandbox.start import start


class Session:
    """Runs one program on many inputs, one at a time, in one slot of a sandbox (``Sandbox.session``), which it
    holds until ``close`` (or the end of its ``with`` block).

    In local mode the program is read and compiled once, by an interpreter that is its sandbox's first process, and
    each test case is a process forked from that interpreter, which has run none of the program
    (``programs/interpreter.py``): it runs the program as ``__main__`` with its own stdin, stdout and stderr, a new
    ``/work``, pids from 2 again (every process of the case before collected), and every limit of a run
    (``Limits``). A program that does not compile gets the interpreter's error for every run, found once. A sandbox
    whose interpreter died or is past half its CPU limit is ended, and the next run starts a new one. Without a
    sandbox (mode ``"none"``) each run is a process of its own."""

    def __init__(self, node: Node, slots: Slots, code: str, slot: int | None, failed: Outcome | None = None) -> None:
        self.node, self.slots, self.slot = node, slots, slot
        self.code = code.encode("utf-8", "surrogatepass")
        self.started = 0  # sandboxes started for this session
        self.start_seconds = 0.0  # what starting the last one took (its interpreter ready, the program compiled)
        self._failed = failed  # every run's outcome: the sandbox cannot run, or the program cannot start
        self._interpreter: Interpreter | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def run(self, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run the program with ``stdin`` as its standard input (and ``argv`` as its arguments)."""
        if self._failed is not None:
            return self._failed
        if self.slot is None:
            raise RuntimeError("this sandbox session is closed; open another with Sandbox.session.")
        data, argv = stdin.encode("utf-8", "surrogatepass"), tuple(argv)
        if self.node.mode == "none":
            try:
                return run_plain(self.node, self.code, data, argv, self.slot)
            finally:
                self.slots.mark_ended()
        for _ in range(2):  # once more when the interpreter ended between two runs
            if self._interpreter is None or not self._interpreter.usable:
                self._stop()
                self.started += 1
                begun = time.monotonic()
                self._interpreter, self._failed = start(self.node, self.code, self.slot)
                self.start_seconds = time.monotonic() - begun
                if self._failed is not None:
                    return self._failed
            result = self._interpreter.execute(data, argv)
            if result is not None:
                self.slots.mark_ended()
                return result
        return unavailable("the sandbox's interpreter ended before it took the run, twice in a row")

    def close(self) -> None:
        """End the sandbox and give the slot back."""
        if self.slot is None:
            return
        try:
            self._stop()
        finally:
            self.slots.release(self.slot)
            self.slot = None

    def _stop(self) -> None:
        interpreter, self._interpreter = self._interpreter, None
        if interpreter is not None:
            interpreter.stop()
