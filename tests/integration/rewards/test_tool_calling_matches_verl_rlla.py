"""gdpo_verl.rewards.tool_calling against the ToolRL scorer that verl 0.9.1 ships (verl.utils.reward_score.rlla,
the paper's official reward): with ``value_rule="toolrl"``, the same format and correctness on ground truths of
every kind and on responses that get each rule right or wrong. Ours differs on purpose in one way, left out here: a
predicted call without "parameters" or with a non-string name scores the minimum (rlla scores it unless its name
matches). The default ``value_rule="bfcl"`` differs from rlla exactly on the values of another JSON type (5.0 for
5, 1 for true), which it does not credit."""

import contextlib
import io
import json
import random

import pytest
from verl.utils.reward_score import rlla

from gdpo_verl.rewards.tool_calling import compute_score

TOOLS = [
    {"name": "GetNews", "parameters": {"page": "1"}},
    {"name": "Weather", "parameters": {"city": "Paris", "unit": "C"}},
    {"name": "Search", "parameters": {"query": "gdpo", "limit": 5, "exact": True}},
    {"name": "Ping", "parameters": {}},
]


def block(calls):
    return "<tool_call>\n" + "\n".join(json.dumps(call) for call in calls) + "\n</tool_call>"


def ground_truths(rng):
    for _ in range(40):
        calls = rng.sample(TOOLS, rng.randint(1, 3))
        yield "<think> x </think>\n" + block(calls), calls, False
        yield "<think> x </think>\n" + block(calls) + "\n<response> done </response>", calls, True
    yield "<think> x </think>\n<response> please say more </response>", None, True


def mutate(calls, rng):
    calls = [json.loads(json.dumps(call)) for call in calls]
    kind = rng.choice(["same", "value", "retype", "drop_param", "add_param", "name", "order", "duplicate",
                       "drop_call", "extra_call"])
    typed = sorted(key for key, value in calls[0]["parameters"].items() if not isinstance(value, str))
    if kind == "retype" and typed:  # the same value under another JSON type: 5.0 for 5, 1 for true
        key = rng.choice(typed)
        calls[0]["parameters"][key] = {5: 5.0, True: 1}[calls[0]["parameters"][key]]
    elif kind == "value" and calls[0]["parameters"]:
        key = rng.choice(sorted(calls[0]["parameters"]))
        calls[0]["parameters"][key] = "wrong"
    elif kind == "drop_param" and calls[0]["parameters"]:
        calls[0]["parameters"].pop(rng.choice(sorted(calls[0]["parameters"])))
    elif kind == "add_param":
        calls[-1]["parameters"]["extra"] = 1
    elif kind == "name":
        calls[0]["name"] = "Unknown"
    elif kind == "order":
        calls.reverse()
    elif kind == "duplicate":
        calls.append(calls[0])
    elif kind == "drop_call" and len(calls) > 1:
        calls.pop()
    elif kind == "extra_call":
        calls.append(rng.choice(TOOLS))
    return calls


def responses(calls, with_response, rng):
    base = calls or [rng.choice(TOOLS)]
    for _ in range(6):
        predicted = block(mutate(base, rng))
        yield "<think>hmm</think>\n" + predicted + ("\n<response>ok</response>" if with_response else "")
        yield "<think>hmm</think>\n<response>ok</response>\n" + predicted  # wrong order
    yield "<think>hmm</think>\n<response>ok</response>"
    yield "<think>hmm</think>" + block(base)  # no newline after </think>
    yield "<think>hmm</think>\n<tool_call>\n{broken\n</tool_call>"
    yield "<tool_call>\n" + json.dumps(base[0]) + "\n</tool_call>"
    yield "<think>hmm</think>"


def verl_scores(response, ground_truth):
    with contextlib.redirect_stdout(io.StringIO()):  # rlla prints some calls
        result = rlla.compute_score("toolrl", response, ground_truth, {"experiment_name": "qwen"})
    return result["format_reward"], result["accuracy_reward"]


RETYPED: set[str] = set()  # which retyped values the cases held


def retyped(response: str) -> bool:
    found = {name for name, text in (("5.0", '"limit": 5.0'), ("exact_1", '"exact": 1')) if text in response}
    RETYPED.update(found)
    return bool(found)


def test_format_and_correctness_equal_verls_rlla_on_every_kind_of_case():
    rng = random.Random(0)
    compared = differ = 0
    for ground_truth, calls, with_response in ground_truths(rng):
        for response in responses(calls, with_response, rng):
            ours = compute_score("toolrl", response, ground_truth, {}, value_rule="toolrl")
            expected_format, expected_correct = verl_scores(response, ground_truth)
            assert ours["format"] == expected_format, (response, ground_truth)
            assert ours["correct"] == pytest.approx(expected_correct, abs=1e-12), (response, ground_truth)
            typed = compute_score("toolrl", response, ground_truth, {})
            assert typed["format"] == expected_format
            if retyped(response):  # never more than rlla; less where the retyped value is matched
                assert typed["correct"] <= expected_correct + 1e-12
                differ += typed["correct"] < expected_correct
            else:
                assert typed["correct"] == pytest.approx(expected_correct, abs=1e-12), (response, ground_truth)
            compared += 1
    assert compared > 900 and differ > 10
    assert RETYPED == {"5.0", "exact_1"}
