"""The paper's tool-calling rewards (ToolRL data): a format reward and a correctness reward.

Point verl at it with ``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.tool_calling``. Options go
in ``+reward.custom_reward_function.reward_kwargs.<name>``. The rules are ToolRL's (Qian et al. 2025), as the
paper's official verl code scores them, read and written anew here:

format (0 or 1)
    1 when the response is ``<think>...</think>`` followed, each on its own line, by exactly the blocks the
    ground truth has, in this order: ``<tool_call>\\n...\\n</tool_call>`` and/or ``<response>...</response>``
    (each tag once); with neither in the ground truth, ``<think>...</think>`` alone.
correct (-3 to 3, ``correct_scale`` sets the 3)
    0 when the ground truth has no tool call (a plain response is not scored for correctness). Otherwise
    the calls between the response's first ``<tool_call>`` and ``</tool_call>``, one JSON object
    ``{"name": ..., "parameters": {...}}`` a line, are matched against the ground truth's: the maximum when
    they are equal; else the name overlap (multiset intersection over union) plus, for each expected call,
    the best unused predicted call of that name scored by parameter-name overlap plus one per parameter
    whose value is exactly right; that sum over its maximum, ``1 + sum(1 + #parameters)``, rescaled to
    ``[-scale, scale]``. No ``<tool_call>`` block, or one that does not parse into such calls: ``-scale``.

A value is right as BFCL's checker types it (``value_rule="bfcl"``, the default; ``tool_values`` holds the rule):
of the parameter's declared type or the gold value's type (``10.0`` does not answer an integer, ``1`` does not
answer a boolean, ``2`` answers a float), a list's entries of their declared type, then equal. The declared types
are the tools' schemas, ``extra_info["parameter_types"]``, which ``scripts/prepare_tool_data.py`` reads from the
tools the prompt lists. ``value_rule="toolrl"`` keeps ToolRL's Python ``==`` (``10.0 == 10``, ``True == 1``), for
whoever must reproduce its numbers.

``compute_score`` returns ``score`` (``format_weight * format + correct_weight * correct``: what GRPO and
dynamic sampling use; pass the weights GDPO gets in ``algorithm.gdpo_reward_weights``), ``format``, ``correct`` and
diagnostics: ``tool_call_expected``, ``tool_call_parsed`` (the response's calls parsed; 0 when none were
expected), ``exact_match`` (1 when the response makes exactly the expected calls, or, when none were
expected, none at all).

Model output never raises: whatever the policy writes (malformed or huge JSON, deep nesting, wrong types,
missing tags) gets a score, in time bounded by ``MAX_RESPONSE_CHARS``. A malformed ground truth raises, naming
what is wrong: that is a data error (``scripts/prepare_tool_data.py`` refuses such rows before training).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from gdpo_verl.core.checks import boolean, finite_number, one_of
from gdpo_verl.rewards.kwargs import Kwarg, read, weight
from gdpo_verl.rewards.needs import RewardNeeds
from gdpo_verl.rewards.tool_values import CallComparison, parameter_types

# Longer responses are not parsed (a 1024-token response is far shorter): format 0, correctness the minimum.
MAX_RESPONSE_CHARS = 100_000

# How a predicted value is compared with the gold one (the module docstring).
VALUE_RULES = ("bfcl", "toolrl")

# The options (reward.custom_reward_function.reward_kwargs), each with its default, check and meaning.
KWARGS = {
    "correct_scale": Kwarg(3.0, lambda value, what: finite_number(value, what, above=0),
                           "correctness lies in [-correct_scale, correct_scale] (the paper: 3; ToolRL's CORRECTMAX1 "
                           "variant: 1)."),
    "format_weight": Kwarg(1.0, weight, "the weight of format in score; the recipes pass the same values to "
                                        "algorithm.gdpo_reward_weights, so that every estimator trains on the same "
                                        "weighted objective."),
    "correct_weight": Kwarg(1.0, weight, "the weight of correct in score (as format_weight)."),
    "strict_names": Kwarg(False, boolean, "a name or parameter-name list scores only when it equals the expected one "
                                          "exactly (ToolRL's REFINEDREWARD variant); default: partial overlap "
                                          "scores."),
    "all_or_nothing": Kwarg(False, boolean, "correctness is the maximum for exactly the expected calls, else the "
                                            "minimum (ToolRL's COARSEREWARD variant)."),
    "value_rule": Kwarg("bfcl", one_of(*VALUE_RULES), "'bfcl' (values typed as BFCL's checker types them) or "
                                                       "'toolrl' (Python ==)."),
}

# End-of-turn markers a response may carry when decoded with special tokens (Qwen, Llama).
END_MARKERS = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")

THINK = r"<think>.*?</think>"
TOOL_CALL = r"<tool_call>\n.*?\n</tool_call>"
RESPONSE = r"<response>.*?</response>"


@dataclass(frozen=True)
class GroundTruth:
    """The expected turn: tool calls (``None`` when no call is expected) and/or a response text."""

    calls: tuple[dict[str, Any], ...] | None
    response: str | None


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response; see the module docstring for the rules and the returned keys.

    Args:
        ground_truth: ToolRL's string (``<think>..</think>\\n<tool_call>\\n{json}\\n...\\n</tool_call>`` and/or
            ``<response>...</response>``), or the structured form ``{"tool_calls": [...] | None,
            "response": str | None}`` (a mapping, or that mapping as a JSON string).
        kwargs: the options, ``KWARGS``.
    """
    options = read(KWARGS, kwargs)
    scale, value_rule = options["correct_scale"], options["value_rule"]
    weights = (options["format_weight"], options["correct_weight"])
    truth = parse_ground_truth(ground_truth)
    same = CallComparison(value_rule, parameter_types(extra_info) if value_rule == "bfcl" else {})
    response = _strip(solution_str)

    format_ok = format_matches(response, truth)
    calls = predicted_calls(response) if truth.calls is not None else None
    if truth.calls is None:
        correct = 0.0
        exact = "<tool_call>" not in response
    elif calls is None:
        correct, exact = -scale, False
    else:
        exact = same.calls(truth.calls, calls)
        fraction = (float(exact) if options["all_or_nothing"]
                    else call_match(truth.calls, calls, options["strict_names"], same))
        correct = -scale + 2 * scale * fraction
    format_score = float(format_ok)
    return {
        "score": weights[0] * format_score + weights[1] * correct,
        "format": format_score,
        "correct": correct,
        "tool_call_expected": float(truth.calls is not None),
        "tool_call_parsed": float(calls is not None),
        "exact_match": float(exact),
    }


compute_score.needs = RewardNeeds(  # score = format_weight * format + correct_weight * correct
    options=partial(read, KWARGS),
    returns=("format", "correct", "tool_call_expected", "tool_call_parsed", "exact_match"), weights_in_score=True)


def parse_ground_truth(value: Any) -> GroundTruth:
    """``GroundTruth`` from ToolRL's string or the structured form; ValueError naming what is wrong."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ground truth looks like JSON but does not parse ({exc.msg}): {value[:200]!r}") from exc
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"tool_calls", "response"})
        if unknown:
            raise ValueError(f"a structured ground truth has the keys tool_calls and response only; got also {unknown}.")
        calls = value.get("tool_calls")
        response = value.get("response")
        if calls is None and response is None:
            raise ValueError("a structured ground truth needs tool_calls, a response, or both; both are empty.")
        if response is not None and not isinstance(response, str):
            raise ValueError(f"a structured ground truth's response must be a string; got {type(response).__name__}.")
        return GroundTruth(None if calls is None else _checked_calls(calls, "ground truth"), response)
    if not isinstance(value, str):
        raise ValueError(
            f"the tool-calling ground truth must be ToolRL's string or {{'tool_calls': [...], 'response': ...}}; "
            f"got {type(value).__name__}."
        )
    calls = None
    if "<tool_call>" in value:
        block = _between(value, "<tool_call>", "</tool_call>")
        if block is None:
            raise ValueError(f"the ground truth opens <tool_call> but never closes it: {value[:200]!r}")
        lines = block.strip().split("\n")
        try:
            parsed = [json.loads(line) for line in lines]
        except json.JSONDecodeError as exc:
            raise ValueError(f"a ground-truth tool call is not JSON ({exc.msg}): {block[:200]!r}") from exc
        calls = _checked_calls(parsed, "ground truth")
    response = _between(value, "<response>", "</response>")
    return GroundTruth(calls, None if response is None else response.strip())


def format_matches(response: str, truth: GroundTruth) -> bool:
    """The format rule: ``<think>`` first, then exactly the blocks the ground truth has, in order."""
    if len(response) > MAX_RESPONSE_CHARS:
        return False
    blocks = [THINK]
    tags = []
    if truth.calls is not None:
        blocks.append(TOOL_CALL)
        tags += ["<tool_call>", "</tool_call>"]
    if truth.response is not None:
        blocks.append(RESPONSE)
        tags += ["<response>", "</response>"]
    # Each block's tags once: checked first, which also keeps the regex below linear in the response length.
    if any(response.count(tag) != 1 for tag in tags):
        return False
    return re.fullmatch("\n".join(blocks), response, re.DOTALL) is not None


def predicted_calls(response: str) -> list[dict[str, Any]] | None:
    """The calls of the response's first ``<tool_call>`` block, one JSON object a line; None when there is no
    block, or when a line is not a call ``{"name": str, "parameters": {...}}`` (or the response is too long)."""
    if len(response) > MAX_RESPONSE_CHARS:
        return None
    block = _between(response, "<tool_call>", "</tool_call>")
    if block is None:
        return None
    try:
        return list(_checked_calls([json.loads(line) for line in block.strip().split("\n")], "response"))
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; so are oversized integers
        return None


def call_match(expected: Sequence[dict[str, Any]], predicted: Sequence[dict[str, Any]], strict: bool,
               same: CallComparison) -> float:
    """ToolRL's tool-call score as a fraction of its maximum, in [0, 1]; 1 for identical call lists (values
    compared by ``same``, under the value rule)."""
    if same.calls(expected, predicted):
        return 1.0
    score = overlap([call["name"] for call in expected], [call["name"] for call in predicted], strict)
    maximum = 1.0
    used: set[int] = set()
    for call in expected:
        parameters = call["parameters"]
        maximum += 1.0 + len(parameters)
        best, best_index = 0.0, None
        for index, candidate in enumerate(predicted):
            if index in used or candidate["name"] != call["name"]:
                continue
            given = candidate["parameters"]
            value = overlap(list(parameters), list(given), strict)
            value += sum(1.0 for key, expected_value in parameters.items()
                         if key in given and same.value(call["name"], key, given[key], expected_value))
            if value > best:
                best, best_index = value, index
        if best_index is not None:
            used.add(best_index)
            score += best
    return score / maximum


def overlap(expected: Sequence[str], predicted: Sequence[str], strict: bool = False) -> float:
    """Multiset intersection over union of two name lists (1 when equal, 0 when either is empty); with
    ``strict``, 1 when equal and else 0."""
    if list(expected) == list(predicted):
        return 1.0
    if strict or not expected or not predicted:
        return 0.0
    counts_expected, counts_predicted = Counter(expected), Counter(predicted)
    common = sum((counts_expected & counts_predicted).values())
    return common / (len(expected) + len(predicted) - common)


def _checked_calls(calls: Any, what: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(calls, (list, tuple)) or not calls:
        raise ValueError(f"the {what}'s tool calls must be a non-empty list; got {str(calls)[:200]!r}.")
    for call in calls:
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("parameters"), dict)
        ):
            raise ValueError(
                f"each of the {what}'s tool calls must be {{\"name\": str, \"parameters\": {{...}}}}; got {str(call)[:200]!r}."
            )
    return tuple(calls)


def _between(text: str, opening: str, closing: str) -> str | None:
    start = text.find(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return None if end < 0 else text[start + len(opening) : end]


def _strip(response: Any) -> str:
    text = response if isinstance(response, str) else str(response)
    text = text.strip()
    for marker in END_MARKERS:
        if text.endswith(marker):
            text = text[: -len(marker)].rstrip()
    return text
