"""The paper's count of distinct advantage groups (Fig. 2/3), against the points the paper reports."""

import pytest

from gdpo_verl.core.collapse import distinct_advantage_groups, multiset_count


@pytest.mark.parametrize(
    ("rewards", "rollouts", "counts"),
    [(2, 2, (2, 3, 3)), (2, 4, (7, 10, 14)), (3, 4, (14, 20, 45))],
)
def test_the_papers_points(rewards, rollouts, counts):
    result = distinct_advantage_groups(rewards, rollouts)
    assert (result["grpo"], result["grpo_no_std"], result["gdpo"]) == counts


def test_gdpo_never_keeps_fewer_groups_apart_than_grpo():
    for rollouts in range(2, 7):
        result = distinct_advantage_groups(2, rollouts)
        assert result["gdpo"] >= result["grpo_no_std"] >= result["grpo"]


def test_multisets_and_bad_sizes():
    assert multiset_count(4, 2) == 10  # pairs of 4 kinds, with repetition
    with pytest.raises(ValueError, match="at least 1"):
        distinct_advantage_groups(0, 4)
