"""The coding reward (pass rate, conditioned length, no_bug, verify_failed) on real sandboxed runs."""

from __future__ import annotations

import json
import sys
import time

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from gdpo_verl.rewards.coding import CodingReward, compute_score, extract_code, parse_tests
from gdpo_verl.rewards.coding_outputs import Digits, call_passed, same_output, same_value
from gdpo_verl.sandbox import Limits, Sandbox, SandboxUnavailable

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap runs on Linux only")

ADD = json.dumps({"inputs": ["1 2\n", "3 4\n", "10 -5\n"], "outputs": ["3\n", "7\n", "5\n"]})
CALL = json.dumps({"fn_name": "add", "inputs": ["1\n2", "3\n4"], "outputs": ["3", "7"]})
LIMITS = {"wall_s": 4, "cpu_s": 2}


@pytest.fixture(scope="module")
def reward():
    with CodingReward(workers=2) as reward:
        yield reward


def score(reward, program, truth=ADD, length=100, fence="python", **options):
    text = f"reasoning</think>Here it is:\n```{fence}\n{program}\n```\n"
    result = reward("codecontests", text, truth, {"response_length": length}, **{**LIMITS, **options})
    # every call returns what compute_score declares (which the config check holds the reward keys to)
    assert set(result) == {"score", *compute_score.needs.returns}
    return result


def test_a_correct_program_passes_every_test_and_gets_every_reward(reward):
    result = score(reward, "a, b = map(int, input().split())\nprint(a + b)")
    assert (result["pass_rate"], result["length"], result["no_bug"], result["verify_failed"]) == (1.0, 1.0, 1.0, 0.0)
    assert result["score"] == 3.0 and result["test_cases"] == 3.0


def test_a_wrong_answer_without_an_error_is_clean_but_fails_its_tests(reward):
    result = score(reward, "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)")
    assert result["pass_rate"] == pytest.approx(2 / 3)
    assert (result["length"], result["no_bug"]) == (0.0, 1.0)  # length pays only when every test passes


def test_an_error_on_one_test_is_a_bug(reward):
    result = score(reward, "a, b = map(int, input().split())\nassert b > 0\nprint(a + b)")
    assert result["pass_rate"] == pytest.approx(2 / 3) and result["no_bug"] == 0.0


def test_a_timeout_fails_its_test_and_is_not_clean(reward):
    result = score(reward, "import time\na, b = map(int, input().split())\nif b < 0:\n    time.sleep(60)\nprint(a + b)")
    assert result["pass_rate"] == pytest.approx(2 / 3) and result["no_bug"] == 0.0 and result["timeouts"] == 1.0


def test_a_program_too_slow_for_its_inputs_stops_after_its_first_run_out_of_time(reward):
    # a loop that never ends, on 8 test cases: killed at the CPU limit (SIGXCPU); once one run ran out of time the
    # response's cases not yet started are not run, so it costs about one time limit per slot, not one per case
    truth = json.dumps({"inputs": ["1\n"] * 8, "outputs": ["1\n"] * 8})
    loop = "while True:\n    pass"
    stopped = score(reward, loop, truth, cpu_s=1)
    assert (stopped["pass_rate"], stopped["no_bug"], stopped["verify_failed"]) == (0.0, 0.0, 0.0)
    assert 1 <= stopped["timeouts"] <= 2 and stopped["tests_not_run"] == 8 - stopped["timeouts"]  # 2 slots at once
    every = score(reward, loop, truth, cpu_s=1, stop_after_timeouts=0)
    assert (every["timeouts"], every["tests_not_run"]) == (8.0, 0.0)
    # cases that pass before the slow one still count
    slow_last = json.dumps({"inputs": ["1\n", "1\n", "2\n"], "outputs": ["1\n", "1\n", "2\n"]})
    result = score(reward, "n = int(input())\nwhile n == 2:\n    pass\nprint(n)", slow_last, cpu_s=1)
    assert result["pass_rate"] == pytest.approx(2 / 3) and result["tests_not_run"] == 0.0
    with pytest.raises(ValueError, match="stop_after_timeouts"):
        score(reward, loop, truth, stop_after_timeouts=-1)


def test_a_program_that_catches_its_cpu_limit_is_out_of_time_and_stops_its_response(reward):
    # Before: it exited 0 at SIGXCPU, was "clean" (no_bug 1), and every test case cost a full CPU limit
    truth = json.dumps({"inputs": ["1\n"] * 8, "outputs": ["1\n"] * 8})
    catcher = "import os, signal\nsignal.signal(signal.SIGXCPU, lambda *_: os._exit(0))\nwhile True:\n    pass"
    result = score(reward, catcher, truth, cpu_s=1)
    assert (result["pass_rate"], result["no_bug"]) == (0.0, 0.0)
    assert 1 <= result["timeouts"] <= 2 and result["tests_not_run"] == 8 - result["timeouts"]


def test_a_long_response_gets_no_length_reward(reward):
    result = score(reward, "a, b = map(int, input().split())\nprint(a + b)", length=4001)
    assert (result["pass_rate"], result["length"]) == (1.0, 0.0)


def test_no_code_block_or_a_blank_one_scores_zero_everywhere(reward):
    for text in ("reasoning</think>print(1)", "reasoning</think>```python\n  \n```"):
        result = reward("apps", text, ADD, {"response_length": 5})
        assert (result["code_found"], result["pass_rate"], result["no_bug"], result["length"], result["score"]) == (0,) * 5


def test_the_program_is_the_last_block_after_the_first_think_end_as_the_math_reward_reads_its_answer():
    # one rule for every reward (gdpo_verl/answers/where.py): a second </think> hides nothing written after the first
    text = "reasoning</think>```python\nprint(1)\n```\n</think> done"
    assert extract_code(text) == "print(1)\n"
    assert extract_code(text + "\n```python\nprint(2)\n```") == "print(2)\n"
    assert extract_code("```python\nprint(1)\n``` no end of reasoning") is None


def test_a_call_based_solution_that_ends_the_process_itself_is_not_clean(reward):
    for body in ("import os\n    os._exit(0)", "import sys\n    sys.exit(0)", "print('gdpo-result-0000:3')\n    raise SystemExit"):
        result = score(reward, f"def add(a, b):\n    {body}", CALL)
        assert (result["pass_rate"], result["no_bug"]) == (0.0, 0.0), body


def test_two_objectives_leave_the_bug_reward_out_of_the_score(reward):
    result = score(reward, "a, b = map(int, input().split())\nprint(a + b)", objectives=2, length_weight=0.5)
    assert result["score"] == 1.5 and result["no_bug"] == 1.0
    weighted = score(reward, "a, b = map(int, input().split())\nprint(a + b)", pass_rate_weight=2, no_bug_weight=0.25)
    assert weighted["score"] == 3.25


def test_call_based_tests_call_the_function_or_the_solution_method(reward):
    assert score(reward, "def add(a, b):\n    return a + b", CALL)["pass_rate"] == 1.0
    method = "class Solution:\n    def add(self, a, b):\n        print('noise')\n        return a + b"
    assert score(reward, method, CALL)["pass_rate"] == 1.0
    assert score(reward, "def add(a, b):\n    return a - b", CALL)["pass_rate"] == 0.0
    assert score(reward, "def plus(a, b):\n    return a + b", CALL)["no_bug"] == 0.0  # no such function: raises


def test_every_test_case_counts_not_only_the_first_ten(reward):
    truth = json.dumps({"inputs": [f"{i}\n" for i in range(12)], "outputs": [f"{i}\n" for i in range(12)]})
    result = score(reward, "n = int(input())\nprint(n if n < 11 else -1)", truth)
    assert result["test_cases"] == 12 and result["pass_rate"] == pytest.approx(11 / 12)


def test_slow_test_cases_spread_over_the_free_slots_and_quick_ones_stay_in_one_sandbox(reward, monkeypatch):
    reward.sandbox(limits=Limits(**LIMITS))  # made and checked before the sessions are counted
    opened = []
    session = Sandbox.session
    monkeypatch.setattr(Sandbox, "session", lambda self, *args, **kwargs: opened.append(1) or session(self, *args,
                                                                                                      **kwargs))
    many = json.dumps({"inputs": [f"{case} 1\n" for case in range(6)],
                       "outputs": [f"{case + 1}\n" for case in range(6)]})
    assert score(reward, "a, b = map(int, input().split())\nprint(a + b)", many)["pass_rate"] == 1.0
    assert len(opened) == 1  # a start costs more than the rest of the test cases take
    opened.clear()
    slow = json.dumps({"inputs": ["1 2\n"] * 8, "outputs": ["3\n"] * 8})
    started = time.monotonic()
    result = score(reward, "import time\ntime.sleep(0.5)\na, b = map(int, input().split())\nprint(a + b)", slow)
    assert result["pass_rate"] == 1.0
    # the second slot from the second test case on: 5 of the 8 test cases' time (the first alone, then two at once)
    assert len(opened) == 2 and time.monotonic() - started < 0.75 * 8 * 0.5


def test_a_sandbox_that_cannot_run_is_verify_failed_never_wrong(reward, caplog):
    sandbox = reward.sandbox(limits=Limits(**LIMITS))
    taken = [sandbox.session("", wait=False) for _ in range(reward.workers)]  # every slot held: no run can start
    sandbox._slots.ended -= 3600  # and none of their runs ended for an hour (set by hand): they are stuck
    try:
        result = score(reward, "a, b = map(int, input().split())\nprint(a + b)")
    finally:
        for session in taken:
            session.close()
    assert result["verify_failed"] == 1.0
    assert (result["score"], result["pass_rate"], result["no_bug"], result["length"]) == (0.0,) * 4
    assert "could not check a response" in caplog.text and "no sandbox slot came free within 4 s" in caplog.text


def test_a_node_that_cannot_run_the_sandbox_is_refused_before_any_program_runs(reward):
    with pytest.raises(SandboxUnavailable, match="the interpreter /nonexistent/python3 is not an executable file"):
        reward.prepare(python="/nonexistent/python3", wall_s=3)  # what the reward manager does when it starts
    with pytest.raises(SandboxUnavailable, match="the interpreter /nonexistent/python3 is not an executable file"):
        score(reward, "print(1)", python="/nonexistent/python3")


def test_bad_options_and_ground_truths_are_refused_by_name(reward):
    with pytest.raises(ValueError, match="unknown reward.custom_reward_function.reward_kwargs \\['timeout'\\]"):
        score(reward, "print(1)", timeout=3)
    with pytest.raises(ValueError, match="objectives must be 2 .* or 3"):
        score(reward, "print(1)", objectives=4)
    with pytest.raises(ValueError, match="sandbox must be one of"):
        score(reward, "print(1)", sandbox="docker")
    with pytest.raises(ValueError, match="must hold 'inputs' and 'outputs'"):
        parse_tests({"input_output": []})
    with pytest.raises(ValueError, match="3 inputs and 2 outputs"):
        parse_tests({"inputs": ["1", "2", "3"], "outputs": ["1", "2"]})
    with pytest.raises(ValueError, match="response_length"):
        reward("apps", "x", ADD, {})


def test_code_is_the_last_python_block_after_the_reasoning():
    text = "```python\nprint(0)\n```</think>first\n```python\nprint(1)\n```\nthen\n```py\nprint(2)\n```"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("```python\nprint(0)\n```") is None  # cut off inside its reasoning
    assert extract_code("```python\nprint(0)\n```", think="none") == "print(0)\n"


def test_outputs_compare_by_line_then_by_token_with_a_number_tolerance_and_nothing_looser():
    assert same_output("3  \n7\n\n", "3\n7")
    assert same_output("1 2 3", "1\n2\n3")
    assert same_output("0.3333333", "0.33333333")
    assert not same_output("3 2 1", "1 2 3")  # no order-free comparison
    assert not same_output("", "0") and not same_output("inf", "1e309") and not same_output("1e-3", "2e-3")
    # an expected integer is matched exactly: a float answer to a large-integer problem is wrong
    assert not same_output("1e18", "1000000000000000007") and not same_output("1000000999", "1000000000")
    assert not same_output("1_000", "1000") and not same_output("0.5", "1/2")


def test_call_based_results_compare_bools_ints_and_floats_strictly_where_they_must():
    assert same_value(True, True) and not same_value(True, 1) and not same_value(1, True)
    assert same_value(0.30000000000000004, 0.3) and not same_value(10**18 + 1, 10**18)
    assert same_value((1, [2.0]), [1, [2.0000000001]]) and not same_value([1, 2], [2, 1])
    assert same_value({"a": 1}, {"a": 1}) and not same_value("1", 1)


def test_compute_score_for_verl_makes_a_reward_for_the_call():
    result = compute_score("apps", "</think>```python\nprint(int(input()) * 2)\n```", {"inputs": ["2"], "outputs": ["4"]},
                           {"response_length": 10})
    assert result["pass_rate"] == 1.0
    assert compute_score.reward_class is CodingReward


# ------------------------------------------------------------------------------------------ what a program prints

# A solution that writes its own result line: the harness passes the line's marker as its second argument.
def result_line(text: str) -> str:
    return f"import sys\ndef add(a, b):\n    print(sys.argv[2] + {text})\n    sys.exit(0)"


@pytest.mark.parametrize("program, truth", [
    # a 5,000-digit integer (past Python's 4,300-digit limit on reading integers from text)
    ("import sys\nsys.set_int_max_str_digits(0)\ndef add(a, b):\n    return 10 ** 5000", CALL),
    (result_line("'[' * 100000"), CALL),  # nested past the JSON parser's depth
    (result_line("'1' + '0' * 400"), json.dumps({"fn_name": "add", "inputs": ["1\n2"], "outputs": ["1.5"]})),
    ("def add(a, b):\n    return 1.5", json.dumps({"fn_name": "add", "inputs": ["1\n2"], "outputs": [str(10**400)]})),
    (result_line("'1e400'"), json.dumps({"fn_name": "add", "inputs": ["1\n2"], "outputs": ["2.5"]})),
])
def test_a_result_line_never_makes_the_reward_raise(reward, program, truth):
    # Before: ValueError, RecursionError, OverflowError out of compute_score, which stopped the training step
    result = score(reward, program, truth)
    assert (result["pass_rate"], result["verify_failed"]) == (0.0, 0.0)


def test_an_integer_is_answered_by_the_same_integer_only_at_any_size(reward):
    # Before: float(2**60) answered 2**60 - 7 (both became the same float)
    truth = json.dumps({"fn_name": "add", "inputs": ["1\n2"], "outputs": [str(2**60 - 7)]})
    assert score(reward, "def add(a, b):\n    return float(2**60)", truth)["pass_rate"] == 0.0
    assert score(reward, "def add(a, b):\n    return 2**60 - 7", truth)["pass_rate"] == 1.0
    # an honest answer of 5,071 digits passes (the harness writes it whole; it is read and compared as text)
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        huge = str(7**6000)
    finally:
        sys.set_int_max_str_digits(limit)
    truth = json.dumps({"fn_name": "add", "inputs": ["1\n2"], "outputs": [huge]})
    assert score(reward, "def add(a, b):\n    return 7 ** 6000", truth)["pass_rate"] == 1.0
    assert score(reward, "def add(a, b):\n    return 7 ** 6000 + 1", truth)["pass_rate"] == 0.0


def test_numbers_compare_exactly_at_any_size_never_through_a_float():
    big = "9" * 5000
    assert same_value(Digits(big), Digits(big)) and not same_value(Digits(big), Digits("8" + big[1:]))
    assert not same_value(Digits(big), 10**100) and not same_value(10**100, Digits(big))
    assert not same_value(Digits(big), 1.5) and not same_value(1.5, 10**400) and not same_value(10**400, 1.5)
    assert not same_value(float(2**60), 2**60 - 7) and not same_value(2.0, 2)
    assert same_value(2, 2.0000001) and same_value(10**20, 1e20) and not same_value(10**20 + 10**15, 1e20)
    assert call_passed(big, Digits(big)) and not call_passed("1e400", 1e308) and not call_passed("NaN", 1.0)
    assert not same_output("2" + "0" * 400 + ".5", "1e400") and same_output("1" + "0" * 400 + ".5", "1e400")
    assert same_output("10e399", "1e400")
    assert not same_output("1e999999999999999999999", "1e999999999999999999999.5")


def test_a_long_run_of_digits_is_compared_in_linear_time():
    # Before: the decimal pattern backtracked quadratically: 16,000 digits and a letter took 4.5 s, holding the
    # interpreter's lock (every other slot and the event loop waited)
    token = "1" * 200_000 + "x"
    started = time.monotonic()
    assert not same_output(token, "0.5")
    assert not same_output(token + " 2", "0.5 2")
    assert time.monotonic() - started < 1.0


@settings(max_examples=300, deadline=None)
@given(st.text() | st.binary().map(lambda raw: raw.decode("utf-8", "replace")),
       st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)))
def test_any_result_line_or_output_gives_an_answer_never_an_exception(text, expected):
    call_passed(text, expected)
    call_passed("[" * 5000 + text, expected)
    same_output(text, "1.5")
    same_output(text, text[::-1])


@pytest.mark.parametrize("slots", [0, -2, 1.5, True, "4"])
def test_a_bad_slot_count_is_refused_before_any_sandbox_is_made(slots):
    with CodingReward() as reward:
        with pytest.raises(ValueError, match=r"reward_kwargs.slots must be a whole number of test cases run at once"):
            reward.prepare(sandbox="none", slots=slots)
        assert reward._sandboxes == {}
