"""The paper's math rewards with a length constraint: correctness and a length reward.

Point verl at it with ``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length`` and use
the "gdpo_verl" reward manager, which passes the response's true token count as
``extra_info["response_length"]``. Options go in ``+reward.custom_reward_function.reward_kwargs.<name>``.

``compute_score`` returns:
    score            correct + length: the summed reward GRPO trains on and dynamic sampling filters on
    correct          1 when the final answer (the last \\boxed{} after the reasoning) equals the ground
                     truth according to math-verify, else 0
    length           1 when the response has at most ``max_length`` tokens (and, with
                     ``conditioned=True``, is also correct: the paper's conditioned length reward)
    short            1 when the response has at most ``max_length`` tokens, whatever the correctness
    response_length  the response's token count
    answer_found     1 when a final \\boxed{} answer was found
    verify_failed    1 when checking the answer timed out, crashed or was refused as too long (scored 0)
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any

from gdpo_verl.rewards.verifier import AnswerChecker

logger = logging.getLogger("gdpo_verl")

THINK_MODES = ("required", "none")

# A final answer longer than this is not checked (sympy can take minutes on such input): scored 0, counted.
MAX_ANSWER_CHARS = 1000

# What verl's reward managers themselves pass besides the reward_kwargs; anything else is a misspelled option.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")

_checkers: dict[float, AnswerChecker] = {}
_failures = 0


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    max_length: int = 4000,
    conditioned: bool = False,
    think: str = "required",
    timeout_s: float = 10.0,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response; see the module docstring for the returned keys.

    Args:
        max_length: the token budget l of the length reward (the paper: 4000).
        conditioned: pay the length reward only to correct responses (the paper's R~_length).
        think: ``"required"`` for reasoning models whose response is ``reasoning </think> answer``
            (DeepSeek-R1 distills): a response without ``</think>`` was cut off inside its reasoning and is
            not correct. ``"none"`` for models that answer directly (Qwen3-4B-Instruct): the whole response
            is the answer part.
        timeout_s: the longest one answer check may take.
    """
    global _failures
    unknown = sorted(set(kwargs) - set(VERL_KWARGS))
    if unknown:
        raise ValueError(
            f"unknown reward.custom_reward_function.reward_kwargs {unknown}; the options are max_length, "
            "conditioned, think and timeout_s."
        )
    _check_options(max_length, conditioned, think, timeout_s)
    response_length = (extra_info or {}).get("response_length")
    if not isinstance(response_length, numbers.Integral):
        raise ValueError(
            "extra_info['response_length'] is missing: the length reward needs the true token count, which "
            "verl's own reward managers do not pass. Set reward.reward_manager.name=gdpo_verl."
        )
    answer = final_answer(solution_str, think)
    verdict: bool | None = False
    if answer is not None:
        verdict = None if len(answer) > MAX_ANSWER_CHARS else _checker(timeout_s).check(str(ground_truth), answer)
    if verdict is None:
        _failures += 1
        logger.warning(
            "gdpo-verl math_length: could not check an answer (timeout, crash or over %d characters); scored 0. "
            "%d so far in this process.",
            MAX_ANSWER_CHARS,
            _failures,
        )
    correct = float(verdict is True)
    short = float(response_length <= max_length)
    length = short * correct if conditioned else short
    return {
        "score": correct + length,
        "correct": correct,
        "length": length,
        "short": short,
        "response_length": float(response_length),
        "answer_found": float(answer is not None),
        "verify_failed": float(verdict is None),
    }


def final_answer(text: str, think: str = "required") -> str | None:
    """The content of the last ``\\boxed{}`` in the answer part of ``text``; None if there is none."""
    if think == "required":
        if "</think>" not in text:
            return None
        text = text.rsplit("</think>", 1)[1]
    return last_boxed(text)


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces; None if none."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    opening = text.index("{", start)
    depth = 0
    for position in range(opening, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                content = text[opening + 1 : position].strip()
                return content or None
    return None


def _checker(timeout_s: float) -> AnswerChecker:
    if timeout_s not in _checkers:
        _checkers[timeout_s] = AnswerChecker(timeout_s=timeout_s)
    return _checkers[timeout_s]


def _check_options(max_length: Any, conditioned: Any, think: Any, timeout_s: Any) -> None:
    where = "reward.custom_reward_function.reward_kwargs"
    if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 1:
        raise ValueError(f"{where}.max_length must be a positive integer (tokens); got {max_length!r}.")
    if not isinstance(conditioned, bool):
        raise ValueError(f"{where}.conditioned must be true or false; got {conditioned!r}.")
    if think not in THINK_MODES:
        raise ValueError(f"{where}.think must be one of {THINK_MODES}; got {think!r}.")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not (0 < timeout_s < math.inf):
        raise ValueError(f"{where}.timeout_s must be a positive number of seconds; got {timeout_s!r}.")
