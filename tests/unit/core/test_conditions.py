"""Conditioned rewards in the core: applied to outcome scores before step 1, the raw values kept."""

import pytest
import torch

from gdpo_verl.core import Condition, gdpo_outcome_parts
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.conditions import apply_conditions, check_conditions
from gdpo_verl.core.diagnostics import advantage_metrics

NAMES = ("correct", "length")
LENGTH_IF_CORRECT = Condition(reward="length", given="correct", at_least=1)


def test_a_conditioned_reward_is_kept_only_where_the_given_one_reaches_the_threshold():
    scores = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    gated = apply_conditions(scores, NAMES, [LENGTH_IF_CORRECT])
    assert gated.tolist() == [[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    assert scores[1, 1] == 1.0  # the input is left as it was


def test_the_given_reward_is_read_before_any_condition_applies():
    names = ("a", "b", "c")
    scores = torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64)
    # b is zeroed by a; c is conditioned on b's raw value (1), so it stays
    gated = apply_conditions(scores, names, [Condition("b", "a", 1), Condition("c", "b", 1)])
    assert gated.tolist() == [[0.0, 0.0, 1.0]]


def test_gdpo_with_a_condition_equals_gdpo_on_the_conditioned_scores():
    correct = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    length = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    index = [0, 0, 0, 1, 1, 1]
    valid = torch.tensor([3.0, 4.0, 5.0, 2.0, 3.0, 4.0])
    parts = gdpo_outcome_parts({"correct": correct, "length": length}, valid, index,
                               options=GdpoOptions(conditions=[LENGTH_IF_CORRECT]))
    expected = gdpo_outcome_parts({"correct": correct, "length": length * correct}, valid, index)
    torch.testing.assert_close(parts.final, expected.final, rtol=0, atol=0)
    metrics = advantage_metrics(parts)
    assert metrics["gdpo/length/raw_mean"] == pytest.approx(length.mean().item())
    assert metrics["gdpo/length/mean"] == pytest.approx((length * correct).mean().item())
    assert "gdpo/correct/raw_mean" not in metrics


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        (Condition("length", "correctness", 1), r"conditions name \['correctness'\], which are not among the rewards"),
        (Condition("length", "length", 1), "cannot be conditioned on itself"),
        (Condition("length", "correct", float("nan")), "at_least of 'length' must be a finite number"),
        (Condition("length", "correct", True), "at_least of 'length' must be a finite number"),
    ],
)
def test_bad_conditions_are_named(condition, message):
    with pytest.raises(ValueError, match=message):
        check_conditions(NAMES, [condition])
