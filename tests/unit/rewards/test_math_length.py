"""The math length-constrained rewards, with math-verify, including hostile answers."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gdpo_verl.rewards.math_length import _verdict, compute_score, final_answer, last_boxed, parse_ground_truth
from gdpo_verl.rewards.verifier import AnswerChecker


def score(text, truth="4", length=100, **options):
    return compute_score("math", text, truth, {"response_length": length}, **options)


def test_correct_and_short():
    result = score("Let me add. 2+2=4 </think> So the answer is \\boxed{4}.")
    assert result == {
        "score": 2.0, "correct": 1.0, "length": 1.0, "short": 1.0,
        "response_length": 100.0, "answer_found": 1.0, "verify_failed": 0.0,
    }


@pytest.mark.parametrize(
    ("answer", "truth"),
    [("\\frac{1}{2}", "0.5"), ("\\dfrac{3}{6}", "\\frac{1}{2}"), ("2\\sqrt{2}", "\\sqrt{8}"), ("x = 7", "7")],
)
def test_equivalent_forms_count_as_correct(answer, truth):
    assert score(f"</think> \\boxed{{{answer}}}", truth)["correct"] == 1.0


def test_the_last_boxed_answer_after_the_reasoning_counts():
    text = "I first guessed \\boxed{5} </think> Actually \\boxed{3}, no: the final answer is \\boxed{4}"
    assert final_answer(text) == "4"
    assert score("maybe \\boxed{4} </think> the answer is \\boxed{5}")["correct"] == 0.0


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
    # 5000! passes the guards (16,326 digits) but no check answers within 1 ms: the check is cut short.
    result = score("</think> \\boxed{5000!}", "1", timeout_s=0.001)
    assert (result["correct"], result["verify_failed"]) == (0.0, 1.0)
    assert "no verdict within timeout_s=0.001 s" in caplog.text
    assert score("</think> \\boxed{4}")["correct"] == 1.0


def test_the_checks_of_one_response_share_timeout_s():
    checker = AnswerChecker(timeout_s=5.0, workers=1)
    calls = []
    checker.timed_check = lambda gold, answer, timeout_s: (calls.append(timeout_s), (True, 0.3))[1]
    checker.timeout_s = 0.5
    truth = parse_ground_truth({"all_of": ["1", "2", "3"]})
    verdict = _verdict(truth, "</think> \\boxed{1, 2, 3}", "1, 2, 3", "required", checker)
    # each check takes 0.3 s: the second gets what is left, the third finds the half second spent
    assert verdict == (None, "timeout_s spent") and calls == pytest.approx([0.5, 0.2])


def test_a_killed_checker_process_is_replaced_in_the_background():
    checker = AnswerChecker(timeout_s=5.0, workers=1)
    assert checker.check("1", "5000!", timeout_s=0.001) is None
    deadline = time.monotonic() + 60
    while checker._idle.empty():  # the spare starts while nobody is checking
        assert time.monotonic() < deadline, "no spare checker process within 60 s"
        time.sleep(0.05)
    start = time.perf_counter()
    assert checker.check("4", "4") is True
    assert time.perf_counter() - start < 0.5  # no second spent importing sympy and math-verify
    checker.close()


@pytest.mark.parametrize(
    "answer",
    ["9" * 5000, "(" * 3000, "\\frac{1}{0}", "\\sqrt{-1}", "\x00\x01\ufffd", "{" * 500 + "}" * 500, "\\begin{pmatrix}"],
)
def test_pathological_answers_never_raise(answer):
    result = score(f"</think> \\boxed{{{answer}}}", timeout_s=2.0)
    assert result["correct"] == 0.0
    assert set(result) == {"score", "correct", "length", "short", "response_length", "answer_found", "verify_failed"}


def test_checks_from_many_threads_at_once(tmp_path):
    # verl calls compute_score from a thread pool, where math-verify's own SIGALRM timeouts cannot work.
    texts = [f"</think> \\boxed{{{n}}}" for n in range(12)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda text: score(text), texts))
    assert [r["correct"] for r in results] == [1.0 if n == 4 else 0.0 for n in range(12)]


def test_checker_reports_a_dead_process_as_unchecked():
    checker = AnswerChecker(timeout_s=5.0, workers=1)
    assert checker.check("4", "4") is True
    worker = checker._idle.get_nowait()
    worker.process.kill()
    worker.process.wait()
    checker._idle.put(worker)
    assert checker.check("4", "4") is None
    assert checker.check("4", "4") is True
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


def test_waiting_for_a_busy_checker_process_is_not_charged_to_the_check():
    # verl scores responses from many threads, and each reward worker has few checker processes: the time a
    # response waits for one must not eat its timeout_s, or a busy pool would turn correct answers into
    # verify_failed.
    checker = AnswerChecker(workers=1)
    assert checker.check("1", "1") is True  # the process is up
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = pool.submit(checker.timed_check, "1", "\\binom{66000}{33000}")  # passes the guards; takes a while
        time.sleep(0.05)
        start = time.monotonic()
        verdict, spent = pool.submit(checker.timed_check, "4", "4").result()
        waited = time.monotonic() - start
    assert verdict is True and slow.result()[0] is False
    assert spent < waited - 0.1, (spent, waited)
    checker.close()
