"""Answer checking (gdpo_verl.answers: parsing.parse, then grading.grade) that can neither hang nor crash the reward
worker.

math-verify's own timeouts use SIGALRM, which works only in a process's main thread, and verl calls
``compute_score`` from a thread pool. So every check runs in a small, fixed pool of child processes
(``python -m gdpo_verl.answers.checker``, talking JSON lines over pipes). A call is handed only a process that
has finished starting. Its ``Deadline`` covers waiting for a busy process and the checks; a process's start (the
pool's first, or a replacement's) is bounded on its own, by ``STARTUP_TIMEOUT_S``, and the time a call waits for
one moves its deadline later. A check that does not answer in time, or whose process dies, kills that process and
returns None ("not checked"); a fresh process starts in its place at once, in the background, so the pool never
holds more processes than its size and the next call does not wait for the old one's death.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gdpo_verl.answers import grading, parsing
from gdpo_verl.answers.guard import admission
from gdpo_verl.answers.lexicon import check_parser
from gdpo_verl.answers.value import Unreadable, Value

logger = logging.getLogger("gdpo_verl")

# A fresh process imports sympy and math-verify before its first answer: each start gets this long, then the pool
# reports it (RuntimeError, on this call and every later one). It is not counted in a call's deadline.
STARTUP_TIMEOUT_S = 120.0
# A process that closed its output while starting is exiting: the kernel has it exit within this (a busy machine
# takes a moment between the two), or by the end of STARTUP_TIMEOUT_S, whichever comes first.
EXIT_AFTER_CLOSE_S = 10.0

# The child's replies.
CORRECT, WRONG, HEDGED, UNDECIDED, GOLD_UNREADABLE = "1", "0", "h", "?", "g"


# What a checker process keeps of its readings (``_Readings``): texts of at most this many characters in all.
READINGS_CHARS = 1 << 18
# A reading that holds a number of more bits than this (about 1,000 digits; the guards let through 20,000) is not
# kept, so that what is kept stays proportional to its texts.
READINGS_MAX_BITS = 3322


class _Readings:
    """What ``read`` makes of a text, kept by the exact text in a checker process: golds repeat across the
    responses of a prompt (a GRPO group shares one), answers within them. ``get(key)`` -> ``(values, None)``, or
    ``(None, message)`` when ``read`` raised ``Unreadable`` (that outcome is kept too); any other exception
    propagates and is not kept. A key is one text or a tuple of texts, compared exactly; a hit returns what the
    reading returned (values are immutable: frozen ``Value``s of sympy objects), so no verdict changes.

    Bounded (a ``cachetools.LRUCache`` weighed by its keys' characters): the kept keys hold at most ``max_chars``
    characters in all (the least recently used go first), and a reading that holds a number over
    ``READINGS_MAX_BITS`` bits, or a value that is not a sympy object, is not kept.
    """

    def __init__(self, read: Callable[[Any], list[Value]], max_chars: int = READINGS_CHARS) -> None:
        import cachetools

        self._read = read
        # each entry is (the key's characters, the outcome), weighed by the first
        self._kept: cachetools.LRUCache = cachetools.LRUCache(maxsize=max_chars, getsizeof=lambda entry: entry[0])

    def get(self, key: str | tuple[str, ...]) -> tuple[list[Value] | None, str | None]:
        entry = self._kept.get(key)
        if entry is not None:
            outcome = entry[1]
        else:
            try:
                outcome = (tuple(self._read(key)), None)
            except Unreadable as error:
                outcome = (None, str(error))
            if outcome[0] is None or _small(outcome[0]):
                try:
                    self._kept[key] = (_chars(key), outcome)
                except ValueError:  # longer than the bound on its own: not kept
                    pass
        values, unreadable = outcome
        return (None if values is None else list(values)), unreadable

    def __len__(self) -> int:
        return len(self._kept)


def _chars(key: str | tuple[str, ...]) -> int:
    """What a key counts against ``READINGS_CHARS``: its characters, at least 1."""
    return max(1, len(key) if isinstance(key, str) else sum(map(len, key)))


def _small(values: tuple[Value, ...]) -> bool:
    """Whether every value is a sympy object (or a bare choice) whose numbers have at most READINGS_MAX_BITS bits."""
    import sympy

    for value in values:
        if value.expr is None:
            continue
        if not isinstance(value.expr, sympy.Basic):
            return False
        for number in value.expr.atoms(sympy.Rational):
            if max(abs(number.p), number.q).bit_length() > READINGS_MAX_BITS:
                return False
    return True


def serve() -> None:
    """Child process: read {"gold", "answers"} lines from stdin (the gold's text and the text of each box of the
    final answer), write one reply line each: "1" (the answer states the gold's values), "0" (it does not), "h"
    (it states more values than the gold: hedged), "?<reason>" (it cannot be read, or sympy raised or could not
    decide: no verdict) or "g<reason>" (the gold cannot be read: a data error). gdpo_verl.answers.parsing and
    grading have the rules.

    No time limit runs here (math-verify's SIGALRM limits answer "wrong" when they fire, so they are not used):
    the parent's deadline is the only limit: it kills this process, and the check counts as not made.

    The readings of golds and of answers are kept (``_Readings``): reading (latex2sympy's parse, sympy building the
    expression) is nearly all of a check's time, and a group's responses share their gold and often their answer.
    """
    # The guards bound every integer an answer may hold to 20,000 digits; Python's default refuses to print more
    # than 4,300, which a reason naming a value would (a ValueError, no verdict where there is one).
    sys.set_int_max_str_digits(0)
    golds = _Readings(parsing.parse)
    given_answers = _Readings(lambda texts: parsing.parse_all(list(texts)))

    def judge(gold_text: str, answer_texts: list[str]) -> str:
        gold, unreadable = golds.get(gold_text)
        if unreadable is not None:
            return GOLD_UNREADABLE + unreadable
        given, unreadable = given_answers.get(tuple(answer_texts))
        if unreadable is not None:
            return UNDECIDED + f"the answer is not read: {unreadable}"
        return {grading.CORRECT: CORRECT, grading.WRONG: WRONG, grading.HEDGED: HEDGED}[grading.grade(gold, given)]

    # the first checks load more of sympy and math-verify: part of the start, not of a call
    judge("1", ["\\frac{\\sqrt{2}}{2}"])
    judge("[3, \\infty)", ["x \\geq 3"])
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = judge(request["gold"], request["answers"])
        except Exception as error:  # sympy raised, or could not decide: no verdict, never "wrong"
            reply = UNDECIDED + f"{type(error).__name__}: {error}"
        print(reply[:300].replace("\n", " "), flush=True)


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: ``value`` True / False, or None when no verdict was reached (``why`` says why);
    ``hedged`` when the answer states several different values (then ``value`` is False)."""

    value: bool | None
    why: str = ""
    hedged: bool = False


class Deadline:
    """When the checks of one response must be done: ``at``, a ``time.monotonic()`` value, moved later by the time
    a check waits for a checker process to start (bounded on its own, by ``STARTUP_TIMEOUT_S``)."""

    def __init__(self, at: float) -> None:
        self.at = at

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def left(self) -> float:
        return self.at - time.monotonic()


class _Worker:
    """One child process, started at construction (without waiting for its imports)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gdpo_verl.answers.checker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self._buffer = b""
        self.ready = False
        self.output_closed = False  # its end of the pipe is closed: it exited, or is exiting

    def _read_line(self, deadline: float) -> str | None:
        """The next line, or None at the deadline or when the process closed its output. Reads the pipe's file
        descriptor directly: a buffered reader could hold a second line that select() no longer sees."""
        descriptor = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                return None
            chunk = os.read(descriptor, 65536)
            if not chunk:
                self.output_closed = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode("utf-8", "replace").strip()

    def wait_ready(self, deadline: float) -> bool:
        """Whether the process has finished its imports by ``deadline``; RuntimeError if it died starting."""
        if not self.ready:
            line = self._read_line(deadline)
            if line is None and self.output_closed:
                # its output closes before the kernel has it exit (before, this read as a start still under way
                # when the machine was busy, and the error said it had not started in time); the wait for its exit
                # is part of the start's bound
                fix = ("is math-verify installed in this environment (pip install math-verify)? Run "
                       f"`{sys.executable} -m gdpo_verl.answers.checker` to see its error.")
                try:
                    code = self.process.wait(timeout=max(0.0, min(EXIT_AFTER_CLOSE_S, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    raise RuntimeError("the math-verify checker process closed its output while starting and had "
                                       f"not exited by the end of its start's {STARTUP_TIMEOUT_S:g} s; {fix}") from None
                raise RuntimeError(f"the math-verify checker process exited with code {code} while starting; {fix}")
            if line is not None and line != "ready":
                raise RuntimeError(f"the math-verify checker process printed {line[:200]!r} while starting, where "
                                   f"it prints 'ready'; run `{sys.executable} -m gdpo_verl.answers.checker` to see "
                                   "what it prints.")
            self.ready = line == "ready"
        return self.ready

    def ask(self, gold: str, answers: list[str], deadline: float) -> str | None:
        """The child's reply, or None when it did not come by ``deadline`` or the process died."""
        try:
            self.process.stdin.write((json.dumps({"gold": gold, "answers": answers}) + "\n").encode())
        except (BrokenPipeError, OSError):
            return None
        return self._read_line(deadline)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdout, self.process.stdin):
            try:
                stream.close()
            except OSError:  # closing flushes nothing (unbuffered); a dead pipe is already closed
                pass


class AnswerChecker:
    """``check(gold, answers, deadline)`` -> ``Verdict``, made by a pool of ``workers`` child processes.

    The pool always holds exactly ``workers`` processes: one killed after a timeout is replaced at once by a fresh
    one, started in the background (a thread per start reads its "ready", for at most ``STARTUP_TIMEOUT_S``). A call
    takes a process that has started, never one still starting while another is free: it waits for a busy one until
    its deadline (a pool still busy then is no verdict, like a check that ran long); while every process is
    starting, it waits without counting that wait (the deadline moves later by it, by at most ``STARTUP_TIMEOUT_S``
    in all). Waiting calls are served first come, first served: a process that comes free goes to the call that has
    waited longest, never to one that came after it (before, the thread that had just finished a check took the
    process back before the woken calls could, and with many threads some waited out their deadline). A start that
    fails is an error on that call and every later one (``RuntimeError``, naming it). ``begin()`` starts the pool
    without waiting (the math reward does it when it is made, so that a training run's first batch finds it
    ready); the first check begins it otherwise.
    """

    def __init__(self, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1; got {workers}.")
        check_parser()  # here, rather than in each child process as it starts
        self.workers = workers
        self._changed = threading.Condition()  # a process became free, started, or failed to start
        self._free: list[_Worker] = []  # started, and no call holds them
        self._starting: set[_Worker] = set()
        self._held = 0  # processes calls hold
        self._queue: deque[object] = deque()  # the calls waiting for a process, served in their order of arrival
        self._start_error: str | None = None
        self._begun = self._closed = False

    def _launch(self) -> None:
        """A new process, its start awaited in the background (with ``_changed`` held)."""
        worker = _Worker()
        self._starting.add(worker)
        try:
            threading.Thread(target=self._await_start, args=(worker,), name="gdpo-verl checker start",
                             daemon=True).start()
        except BaseException:
            self._starting.discard(worker)
            worker.kill()
            raise

    def _await_start(self, worker: _Worker) -> None:
        error = None
        try:
            if not worker.wait_ready(time.monotonic() + STARTUP_TIMEOUT_S):
                error = (f"a math-verify checker process did not start within {STARTUP_TIMEOUT_S:g} s (its imports "
                         "of sympy and math-verify ran that long); is this machine overloaded?")
        except RuntimeError as failed:  # it exited while starting
            error = str(failed)
        with self._changed:
            self._starting.discard(worker)
            started = error is None and not self._closed
            if started:
                self._free.append(worker)
            elif not self._closed:
                self._start_error = error
            self._changed.notify_all()
        if not started:
            worker.kill()

    def begin(self) -> None:
        """Start the pool's processes without waiting for them (once; never after ``close()``)."""
        with self._changed:
            if not self._begun and not self._closed:
                self._begun = True
                for _ in range(self.workers):
                    self._launch()

    def start(self) -> None:
        """Start the pool's processes and wait for them (each for at most ``STARTUP_TIMEOUT_S``); RuntimeError naming
        the problem when one does not start."""
        self.begin()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + 10  # each start's thread reports within STARTUP_TIMEOUT_S
        with self._changed:
            while self._starting and self._start_error is None and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            if self._start_error is not None:
                raise RuntimeError(self._start_error)
            if self._starting:
                raise RuntimeError(f"the math-verify checker processes did not report their start within "
                                   f"{STARTUP_TIMEOUT_S:g} s")

    def check(self, gold: str, answers: list[str], deadline: Deadline) -> Verdict:
        """Compare the boxes ``answers`` with ``gold``; no verdict when no process is free or the check runs past
        ``deadline`` (a wait while every process is starting moves it later); ValueError when the gold cannot be
        read; RuntimeError when a checker process could not start."""
        if isinstance(answers, str) or not all(isinstance(answer, str) for answer in answers):
            raise TypeError(f"answers must be a list of the boxes' texts; got {answers!r:.100}")
        refused = admission(answers)  # the reader's own guards, here before a text of any length is sent
        if refused is not None:
            return Verdict(None, refused)
        self.begin()
        starts_waited = 0.0  # at most STARTUP_TIMEOUT_S in all, however many starts other calls' timeouts cause
        ticket = object()
        with self._changed:
            self._queue.append(ticket)
            try:
                while True:
                    if self._start_error is not None:
                        raise RuntimeError(self._start_error)
                    first = self._queue[0] is ticket
                    if deadline.left() <= 0:  # spent by the response's earlier checks, or by waiting for busy ones
                        return Verdict(None, f"no checker process free before the deadline (all {self.workers} busy, "
                                       "or taken by calls that came first)" if not (self._free and first)
                                       else "no time left before the deadline")
                    if self._free and first:
                        break
                    waited_from = time.monotonic()
                    if not self._free and self._held == 0 and self._starting and starts_waited < STARTUP_TIMEOUT_S:
                        # every process is starting: that is not the call's time
                        self._changed.wait(STARTUP_TIMEOUT_S - starts_waited)
                        waited = time.monotonic() - waited_from
                        starts_waited += waited
                        deadline.at += waited
                    else:
                        self._changed.wait(deadline.left())
                worker = self._free.pop()
                self._held += 1
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()  # the next call in line may take a process now
        reply, ended = None, None
        try:
            reply = worker.ask(gold, answers, deadline.at)
        finally:
            with self._changed:
                if reply is None or self._closed:
                    ended = worker  # held until it is dead and its replacement launched
                else:
                    self._held -= 1
                    self._free.append(worker)
                    self._changed.notify_all()
            if ended is not None:
                ended.kill()  # outside the lock (it waits for the death), and before the replacement starts:
                with self._changed:  # the pool never holds more processes than its size
                    self._held -= 1
                    if not self._closed:
                        self._launch()
                    self._changed.notify_all()
        if reply is None:
            return Verdict(None, "no verdict before the deadline (the check ran long, or its process died)")
        if reply.startswith(GOLD_UNREADABLE):
            raise ValueError(f"the ground truth {gold[:200]!r} cannot be read as values: {reply[1:]}; "
                             "scripts/prepare_data.py leaves such rows out")
        if reply.startswith(UNDECIDED):
            return Verdict(None, reply[1:])
        return Verdict(reply == CORRECT, hedged=reply == HEDGED)

    def processes(self) -> list[subprocess.Popen]:
        """The pool's free processes (for tests and diagnostics)."""
        with self._changed:
            return [worker.process for worker in self._free]

    def close(self) -> None:
        """Stop every process: the free ones and those starting now, each collected before this returns (a starting
        one's thread closes its pipes), and one a call holds when the call ends."""
        with self._changed:
            self._closed = True
            free, self._free = self._free, []
            starting = list(self._starting)
            for worker in starting:
                worker.process.kill()
            self._changed.notify_all()
        for worker in free:
            worker.kill()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for worker in starting:  # killed above: it ends at once; before, close could return while it still ran
            try:
                worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # a kill the kernel has not carried out (a process stuck in I/O)
                logger.warning("math-verify checker process %d did not end within %g s of its SIGKILL; left to "
                               "the kernel", worker.process.pid, STARTUP_TIMEOUT_S)


if __name__ == "__main__":
    serve()
