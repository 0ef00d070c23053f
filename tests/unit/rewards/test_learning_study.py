"""The learning study's three rewards, rule by rule."""

import pytest

from gdpo_verl.rewards.learning_study import WORDS, compute_score, prompts


def score(text, truth="4", length=3, **options):
    return compute_score("learning_study", text, truth, {"response_length": length}, **options)


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
