"""Answer checking with math-verify that can neither hang nor crash the reward worker.

math-verify's own timeouts use SIGALRM, which works only in a process's main thread, and verl calls
``compute_score`` from a thread pool. So every check runs in a small pool of child processes
(``python -m gdpo_verl.rewards.verifier``, talking JSON lines over pipes): a check that does not answer
within ``timeout_s``, or whose process dies, kills that process and returns None; the next check starts
a fresh one.
"""

from __future__ import annotations

import json
import logging
import queue
import select
import subprocess
import sys
import threading
import time

logger = logging.getLogger("gdpo_verl")

# A fresh process imports sympy and math-verify before its first answer; that is not the check's time.
STARTUP_TIMEOUT_S = 120.0


def serve() -> None:
    """Child process: read {"gold", "answer"} lines from stdin, write "1" or "0" lines to stdout.

    math-verify's own time limits (5 s for parsing and for verifying, on by default) are switched off: when one
    fires, math-verify answers "wrong", so a correct answer whose check is slow would be scored 0 without a trace.
    The parent's ``timeout_s`` is the only limit: it kills this process, and the check counts as not made.
    """
    from math_verify import parse, verify

    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            gold = parse(f"${request['gold']}$", parsing_timeout=None)
            answer = parse(f"${request['answer']}$", parsing_timeout=None)
            verdict = bool(verify(gold, answer, timeout_seconds=None))
        except Exception:  # math-verify raised on this input: a wrong answer, as it is by default
            verdict = False
        print("1" if verdict else "0", flush=True)


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gdpo_verl.rewards.verifier"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if self._read_line(STARTUP_TIMEOUT_S) != "ready":
            self.kill()
            raise RuntimeError(
                "the math-verify checker process did not start; is math-verify installed (pip install math-verify)?"
            )

    def _read_line(self, timeout_s: float) -> str | None:
        readable, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not readable:
            return None
        line = self.process.stdout.readline()
        return line.strip() if line else None

    def ask(self, gold: str, answer: str, timeout_s: float) -> bool | None:
        try:
            self.process.stdin.write(json.dumps({"gold": gold, "answer": answer}) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        reply = self._read_line(timeout_s)
        return None if reply not in ("0", "1") else reply == "1"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        try:
            self.process.stdin.close()
        except BrokenPipeError:  # closing flushes the request the dead process never read; it is dropped
            pass


class AnswerChecker:
    """``check(gold, answer)`` -> True, False, or None when the check timed out or its process died.

    Up to ``workers`` checks run at once (one child process each); more callers wait their turn. A process
    killed after a timeout is replaced at once by a fresh one started in the background, so the next caller
    does not wait the second it takes to import sympy and math-verify.
    """

    def __init__(self, timeout_s: float = 5.0, workers: int = 2) -> None:
        if timeout_s <= 0 or workers < 1:
            raise ValueError(f"timeout_s must be > 0 and workers >= 1; got {timeout_s} and {workers}.")
        self.timeout_s = timeout_s
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._slots = threading.Semaphore(workers)

    def check(self, gold: str, answer: str, timeout_s: float | None = None) -> bool | None:
        """``timeout_s``: this check's limit (default: the checker's)."""
        return self.timed_check(gold, answer, timeout_s)[0]

    def timed_check(self, gold: str, answer: str, timeout_s: float | None = None) -> tuple[bool | None, float]:
        """``check``, and the seconds the check itself took: waiting for a free process is not counted, so
        callers that share one time budget over several checks are not charged for a busy pool."""
        with self._slots:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                worker = _Worker()
            start = time.monotonic()
            verdict = worker.ask(gold, answer, self.timeout_s if timeout_s is None else timeout_s)
            spent = time.monotonic() - start
            if verdict is None:
                worker.kill()
                threading.Thread(target=self._replace, name="gdpo-verl-checker-start", daemon=True).start()
            else:
                self._idle.put(worker)
            return verdict, spent

    def _replace(self) -> None:
        try:
            self._idle.put(_Worker())
        except RuntimeError as error:  # the next check starts one itself and raises this to its caller
            logger.error("gdpo-verl: could not start a spare math-verify checker process: %s", error)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                return


if __name__ == "__main__":
    serve()
