"""The paper's math rewards with a length constraint: correctness and a length reward.

Point verl at it with ``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length`` and use
the "gdpo_verl" reward manager, which passes the response's true token count as
``extra_info["response_length"]``. Options go in ``+reward.custom_reward_function.reward_kwargs.<name>``.

The ground truth is one answer (a string or a number); a list of alternatives, any of them correct (as
DeepScaleR's grader accepts; also ``{"any_of": [...]}``); or a multi-part answer ``{"all_of": [part, ...]}``
(``scripts/prepare_data.py`` writes OlympiadBench questions with several final answers so): the response must
give every part, in order, as one ``\\boxed{}`` per part or as one ``\\boxed{}`` whose content separates the
parts with top-level commas. The two structured forms may also come as their JSON strings.

``compute_score`` returns:
    score            correct_weight * correct + length_weight * length: the summed reward GRPO trains on and
                     dynamic sampling filters on (pass the weights GDPO gets in algorithm.gdpo_reward_weights)
    correct          1 when the final answer (every \\boxed{} after the reasoning, read as the values it states:
                     gdpo_verl/answers/parsing.py) states the ground truth's values, no more and no fewer, else 0
    length           1 when the response has at most ``max_length`` tokens (and, with
                     ``conditioned=True``, is also correct: the paper's conditioned length reward)
    short            1 when the response has at most ``max_length`` tokens, whatever the correctness
    response_length  the response's token count
    answer_found     1 when a final \\boxed{} answer was found
    hedged           1 when the answer states more distinct values than the ground truth (``7 \\\\ 5``, ``x=7 \\land
                     x=5``, two boxes): never correct, whichever of them is right (docs/math-length.md, "What an
                     answer states")
    verify_failed    1 when the answer could not be checked (scored 0, logged with the reason): it holds
                     something the reader cannot place (it is then never credited), the call ran past ``timeout_s``
                     (a long check, a busy checker pool), a checker process died or
                     math-verify raised, or the answer was refused unchecked as too long or as one sympy would
                     spend seconds on (gdpo_verl/answers/guard.py)

A call returns within ``timeout_s`` (2 s by default) of checking, whatever the answer, plus the start of a checker
process when every one was starting: the checker processes start when a ``MathLengthReward`` is made (in the
background: they import sympy and math-verify, about a second), and a call that comes while all of them are starting
(the first calls, or after timeouts) waits for them on top of its ``timeout_s``, each start bounded on its own
(``checker.STARTUP_TIMEOUT_S``). ``start()`` waits for them outside any call.

Called directly (scripts, notebooks), ``compute_score`` scores with one ``MathLengthReward`` shared by every direct
call in the process: made on the first call, kept (no call starts a process), closed at exit, safe from several
threads at once and across ``os.fork()`` (a forked child makes its own). The reward manager never uses it: it makes
its own (``compute_score.reward_class``). ``python scripts/bench_math_reward.py`` measures the answers per second
of both beside verl's own ``math_verify`` scorer.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import numbers
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from gdpo_verl.answers.checker import AnswerChecker, Deadline, Verdict
from gdpo_verl.answers.value import Unreadable
from gdpo_verl.answers.where import THINK_MODES, answer_parts, final_answers
from gdpo_verl.core.checks import boolean, one_of
from gdpo_verl.rewards.common import response_length
from gdpo_verl.rewards.kwargs import Kwarg, read, seconds, tokens, weight
from gdpo_verl.rewards.needs import RewardNeeds

logger = logging.getLogger("gdpo_verl")


# The options (reward.custom_reward_function.reward_kwargs), each with its default, check and meaning.
KWARGS = {
    "max_length": Kwarg(4000, tokens, "the token budget l of the length reward (the paper: 4000)."),
    "conditioned": Kwarg(False, boolean, "pay the length reward only to correct responses (the paper's R~_length)."),
    "think": Kwarg("required", one_of(*THINK_MODES),
                   "'required' for reasoning models whose response is 'reasoning </think> answer' (DeepSeek-R1 "
                   "distills): a response without '</think>' was cut off inside its reasoning and is not correct. "
                   "'none' for models that answer directly (Qwen3-4B-Instruct): the whole response is the answer."),
    "timeout_s": Kwarg(2.0, seconds,
                       "the longest one call may take: waiting for a busy checker process and every check of the "
                       "response together (what is not checked by then is counted in verify_failed). A checker "
                       "process's start (a fresh reward's, or a replacement's after a timeout) is not counted: a "
                       "call waits for it on top, each start bounded on its own by checker.STARTUP_TIMEOUT_S."),
    "correct_weight": Kwarg(1.0, weight,
                            "the weight of correct in score. The recipes pass the weights of "
                            "algorithm.gdpo_reward_weights here too, so that GRPO, dynamic sampling and GDPO all see "
                            "the same weighted objective (gdpo-verl refuses a config where the two differ)."),
    "length_weight": Kwarg(1.0, weight, "the weight of length in score (as correct_weight)."),
}

# Ground truths that are a float NaN or infinity written as text (pandas and Python write them so): a data error.
_NOT_A_NUMBER = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)

class MathLengthReward:
    """``compute_score`` with its own answer checker (a pool of ``workers`` math-verify processes) and its own
    count of answers it could not check.

    The "gdpo_verl" reward manager makes one for itself when verl loads this module's ``compute_score``, and calls
    it in its place: the checker pool lives as long as the manager, and nothing of it is kept in the module (direct
    calls of ``compute_score`` share a reward of their own). To score many responses yourself, make one and call it
    like ``compute_score``; ``close()`` (or a ``with`` block) stops its processes.
    """

    def __init__(self, workers: int = 2) -> None:
        self.checker = AnswerChecker(workers)
        self.checker.begin()
        self.failures = 0
        self._failures_lock = threading.Lock()  # direct calls share one reward across threads

    def start(self) -> MathLengthReward:
        """Wait for the checker processes to finish starting (up to ``checker.STARTUP_TIMEOUT_S``; RuntimeError
        naming the problem when one does not). Calls never count a start against ``timeout_s``; this only moves
        the wait to the reward's making. A reward manager's reward starts in the background while the first batch
        is generated."""
        self.checker.start()
        return self

    def __enter__(self) -> MathLengthReward:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.checker.close()

    def __call__(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: Any,
        extra_info: dict | None = None,
        **kwargs: Any,
    ) -> dict[str, float]:
        """Score one response; see the module docstring for the returned keys, and ``KWARGS`` for the options."""
        options = read(KWARGS, kwargs)
        max_length, conditioned, think = options["max_length"], options["conditioned"], options["think"]
        # the checks and waits for a busy checker; not a checker's start
        deadline = Deadline.after(options["timeout_s"])
        tokens = response_length(extra_info)
        truth = parse_ground_truth(ground_truth)
        verdict, found = Verdict(False), True
        try:
            boxes = final_answers(solution_str, think)
            if boxes:
                verdict = _verdict(truth, solution_str, boxes, think, self.checker, deadline)
            found = bool(boxes)
        except Unreadable as error:  # a box that never closes
            boxes, verdict = [], Verdict(None, f"the answer is not read: {error}")
        if verdict.value is None:
            with self._failures_lock:
                self.failures += 1
                failures = self.failures
            logger.warning(
                "gdpo-verl math_length: could not check the answer %.80r, scored 0 with verify_failed=1: %s. "
                "%d so far in this reward worker.",
                " | ".join(boxes),
                verdict.why,
                failures,
            )
        correct = float(verdict.value is True)
        short = float(tokens <= max_length)
        length = short * correct if conditioned else short
        return {
            "score": options["correct_weight"] * correct + options["length_weight"] * length,
            "correct": correct,
            "length": length,
            "short": short,
            "response_length": float(tokens),
            "answer_found": float(found),
            "hedged": float(verdict.hedged),
            "verify_failed": float(verdict.value is None),
        }


class _DirectReward:
    """The one ``MathLengthReward`` that direct calls of ``compute_score`` share in a process (scripts, notebooks):
    made on the first call, under a lock (calls from several threads at once make one), and kept, so that no call
    starts a checker process.

    - At exit it is closed (``atexit``): no checker process outlives the interpreter. A call after that is a
      RuntimeError (it would start processes nothing stops).
    - Across ``os.fork()``: the child forgets the parent's reward without using or closing it (the parent's checker
      processes and pipes stay the parent's), with a fresh lock; a child that calls ``compute_score`` makes its own.
    - Not the reward manager's: the "gdpo_verl" reward manager makes its own ``MathLengthReward``
      (``compute_score.reward_class``) and never calls this one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reward: MathLengthReward | None = None
        self._exited = False
        os.register_at_fork(after_in_child=self._forget)
        atexit.register(self._close_at_exit)

    def get(self) -> MathLengthReward:
        with self._lock:
            if self._exited:
                raise RuntimeError("compute_score was called while the interpreter exits, after its checker "
                                   "processes were stopped; score before exit, or with a MathLengthReward of your own.")
            if self._reward is None:
                self._reward = MathLengthReward()  # its processes start in the background; a call waits for them
            return self._reward

    def close(self) -> None:
        """Stop the shared reward's checker processes; the next call makes a new one."""
        with self._lock:
            reward, self._reward = self._reward, None
        if reward is not None:
            reward.close()

    def _close_at_exit(self) -> None:
        with self._lock:
            self._exited = True
        self.close()

    def _forget(self) -> None:
        """In a forked child: drop the parent's reward unclosed; the lock may have been held by a parent's thread."""
        self._lock = threading.Lock()
        self._reward = None


_direct = _DirectReward()


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **options: Any) -> dict[str, float]:
    """verl's entry point (``reward.custom_reward_function.name=compute_score``); the options are ``KWARGS``.
    Under the "gdpo_verl" reward manager a ``MathLengthReward`` of the manager's own
    is called instead (``compute_score.reward_class``).

    Called directly, this scores with one ``MathLengthReward`` that every direct call in the process shares: made
    on the first call (its two checker processes start then; that call waits for them, and ``timeout_s`` covers
    the check, not that start), kept for the next calls (no call starts a process), closed at exit, safe from
    several threads at once and across ``os.fork()`` (a forked child makes its own). Its count of answers not
    checked is that shared reward's.
    """
    return _direct.get()(data_source, solution_str, ground_truth, extra_info, **options)


compute_score.reward_class = MathLengthReward  # read by gdpo_verl.verl_adapter.reward_manager
compute_score.needs = RewardNeeds(  # score = correct_weight * correct + length_weight * length
    options=partial(read, KWARGS),
    returns=("correct", "length", "short", "response_length", "answer_found", "hedged", "verify_failed"),
    weights_in_score=True)


@dataclass(frozen=True)
class MathTruth:
    """Correct answers: any one of ``alternatives``, or, when ``parts`` is set, all of the parts in order."""

    alternatives: tuple[str, ...] = ()
    parts: tuple[str, ...] | None = None


def parse_ground_truth(value: Any) -> MathTruth:
    """``MathTruth`` from one answer, a list of alternatives (or ``{"any_of": [...]}``) or ``{"all_of": [...]}``
    (mappings or their JSON); ValueError naming the problem (a data error: scripts/prepare_data.py writes only
    these forms)."""
    if isinstance(value, str) and value.lstrip().startswith(('{"all_of"', '{"any_of"')):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a structured ground truth is not valid JSON ({exc.msg}): {value[:200]!r}") from exc
    if isinstance(value, Mapping):
        kind, items = next(iter(value.items())) if len(value) == 1 else (None, None)
        if kind not in ("all_of", "any_of") or not isinstance(items, (list, tuple)) or len(items) < 1:
            raise ValueError(
                "a structured ground truth is {'all_of': [part, ...]} (a multi-part answer) or {'any_of': [answer, "
                f"...]}} (alternatives); got {str(value)[:200]!r}."
            )
        if kind == "any_of":
            return MathTruth(alternatives=tuple(_answer_text(item, "an alternative answer") for item in items))
        return MathTruth(parts=tuple(_answer_text(part, "a part of a multi-part ground truth") for part in items))
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # numpy arrays, as parquet columns of lists come back
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("the ground truth is an empty list of alternatives.")
        return MathTruth(alternatives=tuple(_answer_text(item, "an alternative answer") for item in value))
    return MathTruth(alternatives=(_answer_text(value, "the ground truth"),))


def _answer_text(value: Any, what: str) -> str:
    """One answer as the reader gets it (it writes ``5e-05``, a float's text, in plain digits); NaN and infinity
    refused."""
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)) or not str(value).strip():
        raise ValueError(f"{what} must be a non-empty string or a number; got {value!r}.")
    if isinstance(value, numbers.Real) and not math.isfinite(value) or _NOT_A_NUMBER.fullmatch(str(value).strip()):
        raise ValueError(
            f"{what} is {value!r}: a float NaN or infinity (perhaps a missing answer written as a number). Drop "
            "the row, or write infinity as \\infty; scripts/prepare_data.py skips such rows."
        )
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:  # 12.0 from a float column is 12
        value = int(value)
    return str(value).strip()


def _verdict(truth: MathTruth, text: str, boxes: list[str], think: str, checker: AnswerChecker,
             deadline: Deadline) -> Verdict:
    """The answer's verdict: True / False, or None (with why) when a needed check could not be made by
    ``deadline`` (one ``Deadline`` shared by every check of the response)."""
    if truth.parts is None:
        return _any_true(checker, truth.alternatives, boxes, deadline)
    given = answer_parts(text, think)
    if len(given) != len(truth.parts):
        return Verdict(False)
    results = [_any_true(checker, (gold,), [part], deadline) for gold, part in zip(truth.parts, given, strict=True)]
    if any(verdict.value is False for verdict in results):
        return Verdict(False, hedged=any(verdict.hedged for verdict in results))
    return next((verdict for verdict in results if verdict.value is None), Verdict(True))


def _any_true(checker: AnswerChecker, golds: tuple[str, ...], boxes: list[str], deadline: Deadline) -> Verdict:
    """Whether the boxes ``boxes`` state any of ``golds`` (each is tried); when none: no verdict if some check
    could not be made, else hedged if they hedge against one, else wrong."""
    undecided = hedged = None
    for gold in golds:  # every alternative: "2, -2" hedges against "2" and answers "2, -2"
        verdict = checker.check(gold, boxes, deadline)
        if verdict.value is True:
            return verdict
        if verdict.value is None:
            undecided = undecided or verdict
        elif verdict.hedged:
            hedged = hedged or verdict
    return undecided or hedged or Verdict(False)
