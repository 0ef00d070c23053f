"""The math length-constrained rewards, with math-verify, including hostile answers."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl.trainer.ppo.reward import get_custom_reward_fn

from gdpo_verl.rewards.math_length import compute_score, final_answer, last_boxed
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
        ({"max_length": 0}, "max_length must be a positive integer"),
        ({"max_length": "4000"}, "max_length must be a positive integer"),
        ({"conditioned": "yes"}, "conditioned must be true or false"),
        ({"think": "auto"}, "think must be one of"),
        ({"timeout_s": 0}, "timeout_s must be a positive number"),
        ({"max_lenght": 3000}, r"unknown reward.custom_reward_function.reward_kwargs \['max_lenght'\]"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        score("</think> \\boxed{4}", **options)


# ----------------------------------------------------------------------------- hostile answers


def test_an_answer_that_would_hang_scores_zero_within_the_time_bound_and_is_counted():
    start = time.perf_counter()
    result = score("</think> \\boxed{9^{9^{9^{9^{9}}}}}", timeout_s=1.0)
    assert time.perf_counter() - start < 15  # one second of checking, plus starting a fresh checker
    assert (result["correct"], result["verify_failed"], result["answer_found"]) == (0.0, 1.0, 1.0)
    # The checker recovers: the next answer is checked normally.
    assert score("</think> \\boxed{4}", timeout_s=1.0)["correct"] == 1.0


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


def test_verl_loads_it_by_package_path_with_reward_kwargs():
    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {
            "path": "pkg://gdpo_verl.rewards.math_length", "name": "compute_score",
            "reward_kwargs": {"max_length": 50, "conditioned": True},
        }}}
    )
    fn = get_custom_reward_fn(config)
    result = fn(data_source="math", solution_str="</think> \\boxed{4}", ground_truth="4", extra_info={"response_length": 60})
    assert (result["correct"], result["length"]) == (1.0, 0.0)
