"""The learning study's rewards, rule by rule: the first task's (correct, short, format) and the second's (correct,
length only when correct, format), and the second task's warm-start examples."""

import pytest

from gdpo_verl.rewards.learning_study import (
    ANSWERS,
    TASKS,
    WARM_RIGHT,
    WORDS,
    compute_conditioned_score,
    compute_score,
    prompts,
    warm_start_examples,
)


def score(text, truth="4", length=3, **options):
    result = compute_score("learning_study", text, truth, {"response_length": length}, **options)
    assert set(result) == {"score", *compute_score.needs.returns}  # what it declares (the config check reads it)
    return result


def test_all_three_hold_for_the_ideal_answer():
    assert score("</think> \\boxed{4}") == {"score": 3.0, "correct": 1.0, "short": 1.0, "format": 1.0}


@pytest.mark.parametrize(
    ("text", "correct"),
    [("\\boxed{2} \\boxed{4}", 1.0), ("\\boxed{4} \\boxed{2}", 0.0), ("4", 0.0), ("so x = 4", 0.0), ("", 0.0)],
)
def test_correct_reads_the_last_boxed_answer(text, correct):
    assert score(text)["correct"] == correct


@pytest.mark.parametrize(("text", "formatted"), [("</think> x", 1.0), ("x </think>", 0.0), ("", 0.0)])
def test_format_asks_for_an_opening_think_tag(text, formatted):
    assert score(text)["format"] == formatted


def test_short_counts_tokens_end_token_included():
    assert score("x", length=6)["short"] == 1.0
    assert score("x", length=7)["short"] == 0.0
    assert score("x", length=2, max_length=1)["short"] == 0.0


def test_every_prompt_and_answer_is_in_the_vocabulary():
    for prompt, answer in prompts():
        assert set(prompt.split()) <= set(WORDS) and f"\\boxed{{{answer}}}" in WORDS
    assert len(prompts()) == 12


def test_bad_options_and_a_missing_length_are_named():
    with pytest.raises(ValueError, match="max_length"):
        score("x", max_length=0)
    with pytest.raises(ValueError, match="unknown reward_kwargs"):
        score("x", max_lenght=3)
    with pytest.raises(ValueError, match="reward_manager.name=gdpo_verl"):
        compute_score("s", "x", "4", {})


def conditioned(text, truth="4", length=3, **options):
    result = compute_conditioned_score("learning_study", text, truth, {"response_length": length}, **options)
    assert set(result) == {"score", *compute_conditioned_score.needs.returns}
    return result


@pytest.mark.parametrize(
    ("text", "length", "expected"),
    [
        ("</think> \\boxed{4}", 3, (1.0, 1.0, 1.0)),
        ("</think> \\boxed{4}", 5, (1.0, 0.0, 1.0)),           # correct but over 4 tokens: no length
        ("</think>", 2, (0.0, 0.0, 1.0)),                      # short and empty: length pays nothing
        ("</think> \\boxed{2}", 3, (0.0, 0.0, 1.0)),           # short and wrong: nothing for length
        ("\\boxed{4} \\boxed{2}", 3, (0.0, 0.0, 0.0)),         # the last answer counts
        ("\\boxed{2} \\boxed{4}", 3, (1.0, 1.0, 0.0)),
        ("4", 2, (0.0, 0.0, 0.0)),                             # the number without \\boxed{}
        ("\\boxed{4}", 4, (1.0, 1.0, 0.0)),                    # 4 tokens: within the bound
    ],
)
def test_conditioned_length_pays_only_for_a_correct_answer_within_four_tokens(text, length, expected):
    result = conditioned(text, length=length)
    assert (result["correct"], result["length"], result["format"]) == expected
    assert result["score"] == sum(expected)  # what GRPO trains on: the same conditioned components, summed


def test_conditioned_score_checks_its_options_as_the_first():
    assert conditioned("\\boxed{4}", length=2, max_length=1)["length"] == 0.0
    with pytest.raises(ValueError, match="max_length"):
        conditioned("x", max_length=0)
    with pytest.raises(ValueError, match="reward_manager.name=gdpo_verl"):
        compute_conditioned_score("s", "x", "4", {})


def test_tasks_name_their_reward_function_and_components():
    import gdpo_verl.rewards.learning_study as module

    for task in TASKS.values():
        result = getattr(module, task.reward_function)("s", "</think> \\boxed{4}", "4", {"response_length": 3})
        assert set(result) == {"score", *task.reward_keys}


def test_warm_start_examples_are_drawn_from_the_task_and_answer_right_at_the_set_share():
    examples = warm_start_examples(4000, seed=3)
    assert examples == warm_start_examples(4000, seed=3) != warm_start_examples(4000, seed=4)
    task = dict(prompts())
    right = 0
    for prompt, response in examples:
        words = response.split()
        assert set(words) <= set(WORDS)
        boxed = [word for word in words if word.startswith("\\boxed")]
        assert len(boxed) == 1 and boxed[0] in {f"\\boxed{{{answer}}}" for answer in ANSWERS}
        right += boxed[0] == f"\\boxed{{{task[prompt]}}}"
    assert abs(right / len(examples) - WARM_RIGHT) < 0.03
