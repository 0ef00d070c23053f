"""The math length-constrained rewards, with math-verify, including hostile answers."""

import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gdpo_verl import answers
from gdpo_verl.answers import checker as verifier
from gdpo_verl.answers.checker import AnswerChecker, Deadline, Verdict
from gdpo_verl.answers.where import final_answers, last_boxed
from gdpo_verl.rewards import math_length
from gdpo_verl.rewards.math_length import MathLengthReward, _verdict, compute_score, parse_ground_truth
from tests.unit.rewards.math_reward import REWARD

# what every call returns: score and the keys compute_score declares (compute_score.needs.returns, which the config
# check holds algorithm.gdpo_reward_keys to before Ray starts); score() checks it on every answer of this file
KEYS = {"score", *compute_score.needs.returns}

pytestmark = pytest.mark.usefixtures("math_checker_processes")


def score(text, truth="4", length=100, **options):
    result = REWARD("math", text, truth, {"response_length": length}, **options)
    assert set(result) == KEYS
    return result


def test_the_declared_keys_are_the_papers_two_rewards_and_what_explains_them():
    assert KEYS == {"score", "correct", "length", "short", "response_length", "answer_found", "hedged", "verify_failed"}


def test_correct_and_short():
    result = score("Let me add. 2+2=4 </think> So the answer is \\boxed{4}.")
    assert result == {
        "score": 2.0, "correct": 1.0, "length": 1.0, "short": 1.0,
        "response_length": 100.0, "answer_found": 1.0, "hedged": 0.0, "verify_failed": 0.0,
    }


@pytest.mark.parametrize(
    ("answer", "truth"),
    [("\\frac{1}{2}", "0.5"), ("\\dfrac{3}{6}", "\\frac{1}{2}"), ("2\\sqrt{2}", "\\sqrt{8}"), ("x = 7", "7")],
)
def test_equivalent_forms_count_as_correct(answer, truth):
    assert score(f"</think> \\boxed{{{answer}}}", truth)["correct"] == 1.0


def test_every_box_after_the_reasoning_is_the_answer_and_none_before():
    text = "I first guessed \\boxed{5} </think> Actually \\boxed{3}, no: the final answer is \\boxed{4}"
    assert final_answers(text) == ["3", "4"]
    result = score(text)  # two values for one: a hedge, whichever is right
    assert (result["correct"], result["hedged"]) == (0.0, 1.0)
    assert score("maybe \\boxed{4} </think> the answer is \\boxed{5}")["correct"] == 0.0
    assert score("</think> \\boxed{4}, that is, \\boxed{\\frac{8}{2}}")["correct"] == 1.0  # one value, twice


@pytest.mark.parametrize("response", [
    "</think> The answer is \\boxed 7 or \\boxed{5}",  # a box with one token after it
    "</think> The answer is \\boxed7 or \\boxed{5}",
    "</think> \\fbox 7, \\boxed{5}",
    "</think> \\framebox{7} \\boxed{5}",
    "</think> \\colorbox{yellow}{7} \\boxed{5}",
    "</think> \\fcolorbox{red}{yellow}{7} \\boxed{5}",
    "</think> \\boxed{7}. Hmm. </think> \\boxed{5}",  # a second </think> does not hide the boxes before it
])
def test_every_box_command_of_the_answer_counts(response):
    # Before: only \boxed{...} and \fbox{...} with braces were found, after the last </think>: the 7 went unseen
    result = score(response, "5")
    assert (result["correct"], result["hedged"]) == (0.0, 1.0)


@pytest.mark.parametrize("response", ["</think> \\framebox[2cm]{7} \\boxed{5}", "</think> \\boxed[7]{5}",
                                      "</think> \\boxed{5} \\bbox[7]{5}"])
def test_a_box_with_an_optional_argument_is_not_read(response):
    # Before: the optional argument was skipped, and \boxed[7]{5} was credited for a gold of 5
    result = score(response, "5")
    assert (result["correct"], result["hedged"], result["verify_failed"]) == (0.0, 0.0, 1.0)


def test_a_box_that_never_closes_is_not_read():
    result = score("</think> \\boxed{5} and \\boxed{7", "5")
    assert (result["correct"], result["verify_failed"], result["answer_found"]) == (0.0, 1.0, 1.0)


def test_a_response_cut_off_inside_its_reasoning_is_not_correct():
    result = score("2+2... so \\boxed{4} but wait, let me check again", length=8000)
    assert (result["correct"], result["answer_found"], result["length"]) == (0.0, 0.0, 0.0)


def test_models_without_reasoning_tags_use_think_none():
    assert score("The answer is \\boxed{4}.", think="none")["correct"] == 1.0
    assert score("The answer is \\boxed{4}.")["correct"] == 0.0  # "required" expects </think>


@pytest.mark.parametrize(("length", "short"), [(4000, 1.0), (4001, 0.0)])
def test_length_reward_uses_the_token_budget(length, short):
    assert score("</think> \\boxed{5}", length=length)["length"] == short
    assert score("</think> \\boxed{5}", length=length, max_length=4001)["length"] == 1.0


def test_conditioned_length_pays_only_correct_short_responses():
    wrong = score("</think> \\boxed{5}", conditioned=True)
    assert (wrong["length"], wrong["short"], wrong["score"]) == (0.0, 1.0, 0.0)
    right = score("</think> \\boxed{4}", conditioned=True)
    assert (right["length"], right["score"]) == (1.0, 2.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{\\frac{a}{b}}", "\\frac{a}{b}"),
        ("\\fbox{12}", "12"),
        ("\\boxed{}", None),
        ("\\boxed{unclosed {", None),
        ("no answer", None),
        ("\\boxed{1} and \\fbox{2}", "2"),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_missing_response_length_names_the_reward_manager():
    with pytest.raises(ValueError, match=r"response_length'\] is missing.*reward\.reward_manager\.name=gdpo_verl"):
        compute_score("math", "</think> \\boxed{4}", "4", {})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_length": 0}, r"max_length \(tokens\) must be a whole number of at least 1"),
        ({"max_length": "4000"}, r"max_length \(tokens\) must be a whole number of at least 1"),
        ({"conditioned": "yes"}, "conditioned must be true or false"),
        ({"think": "auto"}, "think must be one of"),
        ({"timeout_s": 0}, r"timeout_s \(seconds\) must be above 0"),
        ({"max_lenght": 3000}, r"unknown reward.custom_reward_function.reward_kwargs \['max_lenght'\]"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        score("</think> \\boxed{4}", **options)


# ----------------------------------------------------------------------------- hostile answers


# Answers found by trying what a policy might write; each took a checker 5 s to minutes before the guards.
HOSTILE = [
    "9^{9^{9^{9^{9}}}}",
    "10^{10^{10^{10}}}",
    "(10^{10})!",
    "\\left(10^{10}\\right)!",
    "2^2^2^2^2^2",
    "2^{2^{30}}",
    "\\binom{1000000}{500000}",
    "\\frac{1}{" * 90 + "2" + "}" * 90,
    "(" * 30 + "1" + ")" * 30,
    "\\prod_{k=1}^{10^{7}} k",
    "\\Gamma(10^{7})",
    "\\sum_{k=1}^{100000} k^{k}",
]


@pytest.mark.parametrize("answer", HOSTILE)
def test_a_hostile_answer_is_refused_unchecked_in_well_under_two_seconds_and_counted(answer, caplog):
    score("</think> \\boxed{1}", "1")  # a checker process is running, as in a training run
    start = time.perf_counter()
    result = score(f"</think> \\boxed{{{answer}}}", "1")
    assert time.perf_counter() - start < 2.0
    assert (result["correct"], result["verify_failed"], result["answer_found"]) == (0.0, 1.0, 1.0)
    assert "scored 0 with verify_failed=1" in caplog.text


def test_a_correct_answer_too_costly_to_check_is_counted_as_not_checked_never_as_wrong(caplog):
    # math-verify's own 5 s limit answered "wrong" here (correct 0, verify_failed 0, nothing logged): it is
    # refused before math-verify sees it, and the log says why.
    start = time.perf_counter()
    result = score("</think> \\boxed{\\frac{10000000!}{9999999!}}", "10000000")
    assert time.perf_counter() - start < 2.0
    assert (result["correct"], result["verify_failed"]) == (0.0, 1.0)
    assert "a number of about 70,000,000 digits (more than 20,000)" in caplog.text


def test_a_check_that_runs_past_timeout_s_counts_as_not_made_and_the_checker_recovers(caplog):
    # 5000! passes the guards (16,326 digits) but no check answers within 1 ms: the check is cut short (or, on a
    # busy machine, the 1 ms is spent before a checker process is taken: no verdict either way)
    result = score("</think> \\boxed{5000!}", "1", timeout_s=0.001)
    assert (result["correct"], result["verify_failed"]) == (0.0, 1.0)
    assert re.search(r"no (verdict|checker process free|time left) before the deadline", caplog.text)
    assert score("</think> \\boxed{4}")["correct"] == 1.0


def test_verl_s_compute_score_scores_directly_and_names_the_reward_the_manager_makes(monkeypatch):
    monkeypatch.setattr(math_length, "_direct", math_length._DirectReward())  # a first direct call, as in a script
    # timeout_s covers the check, not the start of the shared reward's checker processes (they import sympy and
    # math-verify: at least half a second); before, a busy machine scored a correct answer not checked.
    try:
        result = compute_score("math", "</think> \\boxed{4}", "4", {"response_length": 3}, max_length=2, timeout_s=0.2)
    finally:
        math_length._direct.close()  # the tests at the end of this file cover what the shared reward guarantees
    assert (result["correct"], result["length"], result["verify_failed"]) == (1.0, 0.0, 0.0)
    assert compute_score.reward_class is MathLengthReward  # what the gdpo_verl reward manager makes one of


def test_each_reward_counts_its_own_unchecked_answers_and_the_module_keeps_none(caplog):
    other = MathLengthReward(workers=1)
    try:
        other.start()
        failures = REWARD.failures
        assert score("</think> \\boxed{5000!}", "1", timeout_s=0.001)["verify_failed"] == 1.0
        assert other("math", "</think> \\boxed{4}", "4", {"response_length": 1})["correct"] == 1.0
        assert (REWARD.failures, other.failures) == (failures + 1, 0)
        assert f"{failures + 1} so far in this reward worker" in caplog.text
    finally:
        other.close()
    # no checker, pool or counter at module level: a reward's state is its own object's
    state = (AnswerChecker, MathLengthReward, int)
    kept = [name for name, value in vars(math_length).items()
            if isinstance(value, state) and not isinstance(value, bool) and not name.isupper()]
    assert kept == []


def test_the_checks_of_one_response_share_one_deadline():
    checker = AnswerChecker(workers=1)
    deadlines = []

    def check(gold, answer, deadline):
        deadlines.append(deadline)
        time.sleep(0.3)
        return Verdict(True) if deadline.left() > 0 else Verdict(None, "late")

    checker.check = check
    truth = parse_ground_truth({"all_of": ["1", "2", "3"]})
    deadline = Deadline.after(0.5)
    verdict = _verdict(truth, "</think> \\boxed{1, 2, 3}", "1, 2, 3", "required", checker, deadline)
    assert verdict.value is None and deadlines == [deadline] * 3


def _checker_processes() -> list[int]:
    """The pids of this process's math-verify checker children (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # it exited while being read
        if parent == os.getpid() and b"gdpo_verl.answers.checker" in command:
            found.append(int(entry.name))
    return found


# passes the guards and takes a checker about 4 s to find unequal to a number (sympy's simplification of the
# difference; the reading is kept, the comparison is made again on every check)
SLOW = "(x+y+z+1)^{14}(x-y)^{14}"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="counts child processes through /proc (Linux)")
def test_back_to_back_timeouts_keep_the_pool_at_its_size_and_the_bound():
    # Before: each timed-out process was replaced twice (a background spare and a synchronous start by the next
    # call), so 8 threads left 9 processes for a pool of 2. A call waits for a replacement's start on top of its
    # deadline (at most STARTUP_TIMEOUT_S), and for busy processes within it.
    others = set(_checker_processes())  # the reward's own pool, started by earlier tests
    checker = AnswerChecker(workers=2)
    checker.start()
    stop, counts, slowest = threading.Event(), [], [0.0]

    def watch():
        while not stop.is_set():
            counts.append(len(set(_checker_processes()) - others))
            time.sleep(0.02)

    def call(answer):
        start = time.monotonic()
        verdict = checker.check("1", [answer], Deadline(start + 0.2))
        slowest[0] = max(slowest[0], time.monotonic() - start)
        return verdict

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            verdicts = list(pool.map(call, [SLOW, "1"] * 16))
    finally:
        stop.set()
        watcher.join()
    assert max(counts) <= 2, f"the pool of 2 held up to {max(counts)} processes"
    assert all(verdict.value is None for verdict in verdicts[::2])  # every slow check was cut short
    assert slowest[0] < 0.2 + verifier.STARTUP_TIMEOUT_S
    checker.close()
    assert set(_checker_processes()) - others == set()


def test_a_killed_checker_process_is_replaced_in_the_background():
    checker = AnswerChecker(workers=1)
    assert checker.check("1", [SLOW], Deadline.after(0.05)).value is None
    time.sleep(5)  # the replacement imports sympy and math-verify while nobody is checking
    start = time.monotonic()
    assert checker.check("4", ["4"], Deadline(start + 5)).value is True
    assert time.monotonic() - start < 0.5  # no second spent importing sympy and math-verify
    checker.close()


def test_a_busy_pool_is_waited_for_only_until_the_deadline():
    # Before: the wait for a free checker process had no bound (trivially correct answers waited 45 s).
    checker = AnswerChecker(workers=1)
    checker.start()
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = pool.submit(checker.check, "2", [SLOW], Deadline.after(30))
        time.sleep(0.05)
        start = time.monotonic()
        verdict = checker.check("4", ["4"], Deadline(start + 0.1))
        waited = time.monotonic() - start
    assert verdict.value is None and "no checker process free" in verdict.why
    assert waited < 0.1 + 0.3
    assert slow.result().value is False
    assert checker.check("4", ["4"], Deadline.after(5)).value is True
    checker.close()


@pytest.mark.parametrize(
    "answer",
    ["9" * 5000, "(" * 3000, "\\frac{1}{0}", "\\sqrt{-1}", "\x00\x01\ufffd", "{" * 500 + "}" * 500, "\\begin{pmatrix}"],
)
def test_pathological_answers_never_raise(answer):
    result = score(f"</think> \\boxed{{{answer}}}", timeout_s=2.0)
    assert result["correct"] == 0.0
    assert set(result) == KEYS


def test_checks_from_many_threads_at_once(tmp_path):
    # verl calls compute_score from a thread pool, where math-verify's own SIGALRM timeouts cannot work.
    texts = [f"</think> \\boxed{{{n}}}" for n in range(12)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda text: score(text), texts))
    assert [r["correct"] for r in results] == [1.0 if n == 4 else 0.0 for n in range(12)]


def test_checker_reports_a_dead_process_as_unchecked():
    checker = AnswerChecker(workers=1)
    assert checker.check("4", ["4"], Deadline.after(5)).value is True
    (process,) = checker.processes()
    process.kill()
    process.wait()
    assert checker.check("4", ["4"], Deadline.after(5)).value is None
    assert checker.check("4", ["4"], Deadline.after(60)).value is True
    checker.close()


# --------------------------------------------------------------------------- ground truth forms


def test_a_list_of_alternatives_accepts_any_of_them():
    alternatives = ["0.5", "\\frac{1}{3}"]
    assert score("</think> \\boxed{\\frac{1}{2}}", alternatives)["correct"] == 1.0
    assert score("</think> \\boxed{1/3}", alternatives)["correct"] == 1.0
    assert score("</think> \\boxed{7}", alternatives)["correct"] == 0.0
    assert score("</think> \\boxed{4}", [4])["correct"] == 1.0  # numbers as given by some datasets
    assert score("</think> \\boxed{1/3}", '{"any_of": ["0.5", "\\\\frac{1}{3}"]}')["correct"] == 1.0


@pytest.mark.parametrize(
    ("response", "correct"),
    [
        ("</think> The roots are \\boxed{2} and \\boxed{3}.", 1.0),  # one box per part
        ("</think> \\boxed{2, 3}", 1.0),  # one box, parts separated by top-level commas
        ("</think> \\boxed{2,\\ \\frac{6}{2}}", 1.0),  # each part checked with math-verify
        ("</think> \\boxed{3, 2}", 0.0),  # in order
        ("</think> \\boxed{2}", 0.0),  # a part missing
        ("</think> \\boxed{2, 3, 4}", 0.0),  # a part too many
    ],
)
def test_a_multi_part_answer_needs_every_part_in_order(response, correct):
    for truth in ({"all_of": ["2", "3"]}, '{"all_of": ["2", "3"]}'):
        assert score(response, truth)["correct"] == correct


def test_commas_inside_brackets_do_not_split_a_part():
    assert score("</think> \\boxed{(1, 2), [3, 4]}", {"all_of": ["(1, 2)", "[3, 4]"]})["correct"] == 1.0


@pytest.mark.parametrize(
    ("truth", "message"),
    [
        ([], "empty list of alternatives"),
        ({"all_of": []}, "structured ground truth is"),
        ({"one_of": ["1"]}, "structured ground truth is"),
        ({"all_of": ["1"], "any_of": ["2"]}, "structured ground truth is"),
        ('{"all_of": [1, ', "not valid JSON"),
        ([None], "an alternative answer must be"),
        (True, "the ground truth must be"),
    ],
)
def test_a_malformed_ground_truth_is_a_data_error_naming_the_problem(truth, message):
    with pytest.raises(ValueError, match=message):
        score("</think> \\boxed{1}", truth)


# ------------------------------------------------------------------------------------ hedged answers


@pytest.mark.parametrize(
    "answer",
    [
        "7 \\\\ 5", "5 \\\\ 7", "7$ \\text{ or } $5", "7 \\lor 5", "x = 7 \\vee x = 5", "7 \\text{ , } 5", "5\\\\[2pt]7",
        "x = 7 \\quad x = 5", "7 \\cr 5", "5 \\text{ or } 7", "5 or 7", "x=5; x=7",
    ],
)
def test_an_answer_that_lists_several_values_is_never_credited(answer):
    # Before: math-verify read one of the values (the last line, the last $...$ or the first), so for gold 5
    # \boxed{7 \\ 5} scored correct = 1 and a policy could list answers.
    result = score(f"</think> \\boxed{{{answer}}}", "5")
    assert (result["correct"], result["hedged"], result["verify_failed"]) == (0.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("\\frac{1}{2} \\text{ or } 0.5", "0.5"),  # one value written two ways
        ("5 \\text{ cm}", "5"),  # a unit is not a second value
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
        ("2 \\text{ or } 3", "2 \\text{ or } 3"),  # the ground truth itself lists the values
        ("\\{2, 3\\}", "\\{2, 3\\}"),
    ],
)
def test_one_value_and_its_legitimate_forms_are_credited(answer, truth):
    result = score(f"</think> \\boxed{{{answer}}}", truth)
    assert (result["correct"], result["hedged"]) == (1.0, 0.0)


def test_a_hedged_part_of_a_multi_part_answer_is_not_credited():
    assert score("</think> \\boxed{2, 3}", {"all_of": ["2", "3"]})["correct"] == 1.0
    result = score("</think> \\boxed{2} \\boxed{4 \\\\ 3}", {"all_of": ["2", "3"]})
    assert (result["correct"], result["hedged"]) == (0.0, 1.0)


# ----------------------------------------------------------- correct answers math-verify misread


@pytest.mark.parametrize(
    ("answer", "truth"),
    [
        ("0.00005", "5e-05"),  # a float written by Python, read by math-verify as 5e - 5
        ("0.00005", 5e-05),
        ("10^{16}", "1e16"),
        ("10^{16}", 1e16),
        ("1\\,000\\,000", "1000000"),  # digit groups, read as 1 * 0 * 0
        ("1000000", "1\\,000\\,000"),
        ("2^{2^{2^{2^{2}}}}", "2^{65536}"),  # towers sympy kept unevaluated
        ("2^{2^{11}}", "2^{2048}"),  # this one ran into the 5 s timeout: never credited
        ("\\Gamma(1000)", "999!"),  # 2,565 digits: over Python's 4,300-digit printing limit as a difference
    ],
)
def test_correct_answers_math_verify_misread_are_credited_quickly(answer, truth):
    start = time.monotonic()
    result = score(f"</think> \\boxed{{{answer}}}", truth)
    assert (result["correct"], result["verify_failed"]) == (1.0, 0.0)
    assert time.monotonic() - start < 2.0


@pytest.mark.parametrize("truth", [float("nan"), float("inf"), "nan", "NaN", "-inf", "Infinity", ["1", float("nan")]])
def test_a_nan_or_infinite_ground_truth_is_a_data_error(truth):
    # Before: a NaN ground truth was accepted and marked every answer wrong.
    with pytest.raises(ValueError, match="a float NaN or infinity"):
        score("</think> \\boxed{1}", truth)


def test_a_check_that_raises_is_not_checked_never_wrong(caplog):
    # sympy raising inside math-verify is no verdict: before, it was scored as a wrong answer.
    checker = AnswerChecker(workers=1)
    verdict = checker.check("1", ["\\frac{1}{0}^{\\frac{1}{0}}"], Deadline.after(5))
    assert verdict.value in (False, None)  # math-verify catches most errors itself: this one only must not hang
    checker.close()


# ------------------------------------------------------------------------------------------ bounds


@pytest.mark.parametrize("truth", ["1", {"all_of": ["1", "2"]}])
def test_a_response_of_110000_boxes_is_read_in_one_pass(truth):
    # Before: the box scan searched the rest of the text for every box: 49 s, outside any timeout.
    text = "</think> " + "\\boxed{1}" * 110_000
    start = time.monotonic()
    score(text, truth)
    score("</think> " + "\\boxed{" * 110_000, truth)
    assert time.monotonic() - start < 2.0


def test_every_call_returns_within_timeout_s(caplog):
    score("</think> \\boxed{4}")  # the checker processes are running, as in a training run
    for answer in [SLOW, "\\sum_{k=1}^{100} k^{k}", "\\prod_{k=1}^{100} k!", "4"]:
        # a call cut short replaces its checker process; a start never counts against timeout_s (the call waits for
        # it first: test_a_fresh_reward_s_first_answer_...), so each call is timed with the pool started
        REWARD.start()
        start = time.monotonic()
        score(f"</think> \\boxed{{{answer}}}", "1", timeout_s=0.3)
        # the bound plus a second for a busy machine to schedule the call back; unbounded, the sum and the product
        # take minutes
        assert time.monotonic() - start < 0.3 + 1.0, answer


FIRST_CALL = """
import json, sys
from gdpo_verl.rewards.math_length import MathLengthReward
reward = MathLengthReward()  # its checker processes start now, in the background
result = reward("math", sys.argv[1], sys.argv[2], {"response_length": 10}, timeout_s=0.3)
print(json.dumps({"correct": result["correct"], "verify_failed": result["verify_failed"]}))
reward.close()
"""


def test_a_fresh_reward_s_first_answer_is_checked_however_long_its_checker_takes_to_start():
    # Before: the checker's start (a second or more, several on a busy machine) counted against timeout_s, and a
    # correct 4 came back "not checked"; the start is bounded on its own now. 0.3 s is shorter than any start.
    result = subprocess.run([sys.executable, "-c", FIRST_CALL, "</think> \\boxed{4}", "4"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"correct": 1.0, "verify_failed": 0.0}


def test_a_call_is_never_handed_a_process_still_starting_while_another_is_free():
    # Before: the pool was a queue, and a timeout's replacement went in it still starting: two calls later, a
    # correct 4 got that process while the other was free, and came back "not checked".
    checker = AnswerChecker(workers=2)
    checker.start()
    try:
        assert checker.check("1", [SLOW], Deadline.after(0.05)).value is None  # killed; its replacement starts
        for _ in range(3):
            verdict = checker.check("4", ["4"], Deadline.after(0.3))
            assert verdict.value is True, verdict.why
    finally:
        checker.close()


def test_a_response_whose_deadline_is_spent_waits_for_no_start():
    # Before: each part after the first timed-out one waited for the replacement's start, then killed it unused:
    # a 4-part answer with a 0.3 s timeout took 5.6 s and started 4 processes.
    reward = MathLengthReward(workers=1).start()
    try:
        start = time.monotonic()
        result = reward("math", "</think> " + " ".join(["\\boxed{" + SLOW + "}"] * 4), {"all_of": ["1", "2", "3", "4"]},
                        {"response_length": 10}, timeout_s=0.3)
        assert result["verify_failed"] == 1.0
        assert time.monotonic() - start < 0.3 + 0.5
    finally:
        reward.close()


def test_a_checker_that_cannot_start_is_an_error_naming_it_on_every_call(monkeypatch):
    monkeypatch.setattr(verifier.sys, "executable", "/bin/false")  # a process that exits while starting
    checker = AnswerChecker(workers=1)
    try:
        for _ in range(2):
            with pytest.raises(RuntimeError, match="exited with code 1 while starting"):
                checker.check("4", ["4"], Deadline.after(5))
    finally:
        checker.close()


def _start_error(monkeypatch, tmp_path, script: str) -> str:
    """The error of a check whose checker process is ``script`` (a shell script, in place of python)."""
    program = tmp_path / "checker"
    program.write_text("#!/bin/sh\n" + script + "\n")
    program.chmod(0o755)
    monkeypatch.setattr(verifier.sys, "executable", str(program))
    checker = AnswerChecker(workers=1)
    try:
        with pytest.raises(RuntimeError) as raised:
            checker.check("4", ["4"], Deadline.after(5))
    finally:
        checker.close()
    return str(raised.value)


def test_a_checker_that_closes_its_output_before_it_exits_is_named_by_its_exit_code(monkeypatch, tmp_path):
    # Before: a start whose output closed before the kernel had it exit (a busy machine) read as one still under
    # way, and the error said it had not started within 120 s
    error = _start_error(monkeypatch, tmp_path, "exec >&-; sleep 1; exit 3")
    assert "exited with code 3 while starting" in error, error


def test_a_checker_that_prints_something_else_than_ready_is_an_error_quoting_it(monkeypatch, tmp_path):
    error = _start_error(monkeypatch, tmp_path, "echo 'No module named sympy'; sleep 30")
    assert "printed 'No module named sympy' while starting" in error, error


# ------------------------------------------------------------------------------------------ the parser


def test_another_antlr_runtime_is_refused_before_a_checker_process_starts(monkeypatch):
    # latex2sympy picks its parser by the installed ANTLR runtime, and its parsers read answers differently
    # (2\Gamma, \gamma); the reader is checked on the one for the runtime verl's hydra-core pins.
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "4.13.2" if name == "antlr4-python3-runtime" else real(name))
    before = set(_checker_processes())
    with pytest.raises(RuntimeError, match=r"has antlr4-python3-runtime 4\.13\.2.*pip install "
                                           r"antlr4-python3-runtime==4\.9\.3"):
        MathLengthReward()
    assert set(_checker_processes()) <= before  # none started (one an earlier test left may end meanwhile)


def test_a_percentage_is_read_by_the_parser_for_antlr_4_9_3():
    # latex2sympy2_extended 1.11's parser for ANTLR 4.9.3 lacks an accessor its converter calls on every atom past
    # a variable: every percentage raised AttributeError and was not read (the answer table's rows with \%).

    assert [(str(value.expr), value.percent) for value in answers.parse("20\\%")] == [("1/5", True)]
    assert score("</think> \\boxed{20\\%}", "20")["correct"] == 1.0


# ------------------------------------------------------------------------------------- speed: what it may not change


def test_a_checker_process_reads_a_text_once_and_keeps_unreadable_outcomes_by_the_exact_text():
    import sympy


    reads = []

    def read(text):
        reads.append(text)
        if text == "?":
            raise answers.Unreadable("it states no value")
        if text == "!":
            raise ZeroDivisionError("sympy raised")
        return [answers.Value(sympy.Integer(text))]

    kept = verifier._Readings(read)
    assert kept.get("4") == kept.get("4") == ([answers.Value(sympy.Integer(4))], None)
    assert kept.get(" 4")[0] == [answers.Value(sympy.Integer(4))]  # another text: read again
    assert kept.get("?") == kept.get("?") == (None, "it states no value")  # the outcome Unreadable is kept too
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):  # any other exception is not kept: raised every time
            kept.get("!")
    assert reads == ["4", " 4", "?", "!", "!"]


def test_a_checker_process_s_readings_are_bounded_by_their_characters_and_numbers():
    import sympy


    reads = []

    def read(text):
        reads.append(text)
        return [answers.Value(sympy.Integer(10) ** 2000 if text == "huge" else sympy.Integer(len(text)))]

    kept = verifier._Readings(read, max_chars=10)
    for text in ["aaaa", "bbbb", "aaaa", "cccc"]:  # the least recently used goes first: bbbb
        kept.get(text)
    assert len(kept) == 2 and reads == ["aaaa", "bbbb", "cccc"]
    kept.get("bbbb")
    kept.get("x" * 11)  # longer than the bound: not kept
    kept.get("huge")  # a number of 2,001 digits: not kept
    kept.get("huge")
    assert reads == ["aaaa", "bbbb", "cccc", "bbbb", "x" * 11, "huge", "huge"]


def test_a_kept_reading_gives_the_verdict_of_a_first_reading():
    # the second round of checks is answered from the checker process's kept readings
    checks = [("[18, \\infty)", ["x \\geq 18"]), ("[18, \\infty)", ["(18, \\infty)"]), ("(2, -1)", ["(2,-1)"]),
              ("(2, -1)", ["(-1, 2)"]), ("\\frac{3\\pi}{7}", ["\\frac{3}{7}\\pi"]), ("5", ["7 \\\\ 5"]),
              ("5", ["x +"]), ("2", ["2", "2.0"]), ("2", ["2", "3"])]
    checker = AnswerChecker(workers=1)
    try:
        rounds = [[checker.check(gold, given, Deadline.after(10)) for gold, given in checks] for _ in range(2)]
        unreadable_gold = []
        for _ in range(2):
            with pytest.raises(ValueError, match="cannot be read as values") as raised:
                checker.check("x +", ["7"], Deadline.after(10))
            unreadable_gold.append(str(raised.value))
    finally:
        checker.close()
    assert rounds[0] == rounds[1]
    assert [verdict.value for verdict in rounds[0]] == [True, False, True, False, True, False, None, True, False]
    assert rounds[0][5].hedged and rounds[0][8].hedged and "not read" in rounds[0][6].why
    assert unreadable_gold[0] == unreadable_gold[1]


def test_a_process_that_comes_free_goes_to_the_call_that_waited_longest():
    # Before: the thread that had just finished a check took the process back before the woken call could; with
    # one thread checking back to back, another call waited out its whole deadline ("no checker process free").
    checker = AnswerChecker(workers=1)
    checker.start()
    done = threading.Event()

    def back_to_back():
        for n in range(12):  # each about half a second; a text of its own, so none is answered from a kept reading
            if done.is_set():
                return
            checker.check(str(n), ["(" * 6 + str(n) + ")" * 6], Deadline.after(10))

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            busy = pool.submit(back_to_back)
            time.sleep(0.1)  # the first slow check holds the process
            verdict = checker.check("4", ["4"], Deadline.after(3))
            done.set()
            busy.result(timeout=60)
    finally:
        checker.close()
    assert verdict.value is True, verdict.why


def test_direct_calls_of_compute_score_share_one_reward_and_start_no_process(monkeypatch):
    direct = math_length._DirectReward()
    monkeypatch.setattr(math_length, "_direct", direct)
    started = []

    class Counted(verifier._Worker):
        def __init__(self):
            started.append(self)
            super().__init__()

    try:
        assert compute_score("math", "</think> \\boxed{4}", "4", {"response_length": 3})["correct"] == 1.0
        reward = direct.get()
        monkeypatch.setattr(verifier, "_Worker", Counted)
        for answer, correct in [("4", 1.0), ("5", 0.0), ("\\frac{8}{2}", 1.0), ("(4, 4)", 0.0)]:
            result = compute_score("math", f"</think> \\boxed{{{answer}}}", "4", {"response_length": 3})
            assert result["correct"] == correct
        assert started == [] and direct.get() is reward
    finally:
        direct.close()


def test_direct_calls_from_several_threads_at_once_make_one_reward(monkeypatch):
    direct = math_length._DirectReward()
    monkeypatch.setattr(math_length, "_direct", direct)
    made = []

    class Slow(MathLengthReward):  # slow to make: calls that raced past an unlocked check would each make one
        def __init__(self):
            made.append(self)
            time.sleep(0.2)
            super().__init__()

    monkeypatch.setattr(math_length, "MathLengthReward", Slow)
    together = threading.Barrier(8)

    def call(n):
        together.wait(timeout=10)
        return compute_score("math", f"</think> \\boxed{{{n}}}", "4", {"response_length": 1})["correct"]

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(call, range(8)))
    finally:
        direct.close()
    assert results == [1.0 if n == 4 else 0.0 for n in range(8)]
    assert len(made) == 1
    assert compute_score.reward_class is not Slow  # the reward manager's class is fixed at import


EXITS = r"""
import atexit, json, os
from pathlib import Path

def checkers():
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and b"gdpo_verl.answers.checker" in command:
            found.append(int(entry.name))
    return found

pids = []
# registered before the module's own hook, so it runs after it (last in, first out), while this process and its
# pipes still exist: only the hook can have stopped the checker processes by then
atexit.register(lambda: print(json.dumps({"pids": pids, "after_exit_hooks": checkers()}), flush=True))
from gdpo_verl.rewards.math_length import compute_score
assert compute_score("math", "</think> \\boxed{4}", "4", {"response_length": 3})["correct"] == 1.0
pids.extend(checkers())
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds checker processes through /proc (Linux)")
def test_a_script_that_calls_compute_score_and_exits_leaves_no_checker_process_running():
    done = subprocess.run([sys.executable, "-c", EXITS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["pids"] and report["after_exit_hooks"] == []
    for pid in report["pids"]:  # gone (a zombie has no command line)
        command = Path(f"/proc/{pid}/cmdline")
        assert not command.exists() or b"gdpo_verl.answers.checker" not in command.read_bytes()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_a_forked_child_makes_its_own_direct_reward_and_leaves_the_parent_s_alone(monkeypatch):
    import select
    import signal

    direct = math_length._DirectReward()
    monkeypatch.setattr(math_length, "_direct", direct)
    try:
        assert compute_score("math", "</think> \\boxed{4}", "4", {"response_length": 3})["correct"] == 1.0
        reward = direct.get()
        reward.start()
        parents = {process.pid for process in reward.checker.processes()}
        reading, writing = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                os.close(reading)
                forgot = direct._reward is None
                correct = compute_score("math", "</think> \\boxed{4}", "4", {"response_length": 3})["correct"]
                own = direct.get()
                own.start()
                pids = [process.pid for process in own.checker.processes()]
                direct.close()  # its own processes; the parent's are not its to close
                os.write(writing, json.dumps({"forgot": forgot, "correct": correct, "pids": pids}).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writing)
        try:
            if not select.select([reading], [], [], 60)[0]:
                os.kill(pid, signal.SIGKILL)
                pytest.fail("the forked child did not report within 60 s")
            report = json.loads(os.read(reading, 65536) or b"null")
        finally:
            os.close(reading)
            os.waitpid(pid, 0)  # it has written its report, its last act, or was killed
        assert report is not None, "the forked child failed before its report"
        assert report["forgot"] and report["correct"] == 1.0
        assert report["pids"] and not set(report["pids"]) & parents
        assert all(process.poll() is None for process in reward.checker.processes())  # the parent's still run
        assert {process.pid for process in reward.checker.processes()} == parents
        assert direct.get() is reward
        assert compute_score("math", "</think> \\boxed{5}", "5", {"response_length": 3})["correct"] == 1.0
    finally:
        direct.close()
