"""The gdpo/ step metrics, on batches whose answers are worked out by hand."""

import pytest
import torch

from gdpo_verl.core.advantage import gdpo_outcome_parts, gdpo_parts
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.diagnostics import advantage_metrics, distinct_counts, distinct_per_group


def parts_for(rows, weights=None, lengths=None, batch_norm="token"):
    """rows: list of (group, correct, length)."""
    lengths = lengths or [3] * len(rows)
    mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
    rewards = {
        "correct": torch.tensor([float(c) for _, c, _ in rows]),
        "length": torch.tensor([float(n) for _, _, n in rows]),
    }
    return gdpo_parts(rewards, mask, [g for g, *_ in rows], weights, batch_norm=batch_norm)


ALL_FOUR = [("a", 1, 0), ("a", 0, 1), ("a", 1, 1), ("a", 0, 0)]


def test_gdpo_keeps_combinations_apart_that_grpo_merges():
    # (1, 0) and (0, 1) have the same sum; "correct" is 1 twice and "length" once, so their group stds
    # differ and GDPO gives the two combinations different advantages.
    rows = [("a", 1, 0), ("a", 0, 1), ("a", 0, 0), ("a", 0, 0), ("a", 1, 0)]
    metrics = advantage_metrics(parts_for(rows))
    assert metrics["gdpo/distinct_adv_per_group"] == 3
    assert metrics["gdpo/grpo_distinct_adv_per_group"] == 2  # sums 1 and 0
    # With all four combinations in one group, both rewards have the same std: (1, 0) and (0, 1) tie.
    metrics = advantage_metrics(parts_for(ALL_FOUR))
    assert metrics["gdpo/distinct_adv_per_group"] == metrics["gdpo/grpo_distinct_adv_per_group"] == 3


def test_collapsed_groups_are_those_where_different_reward_vectors_share_an_advantage():
    rows = [
        ("a", 1, 0), ("a", 0, 1), ("a", 0, 0), ("a", 0, 0), ("a", 1, 0),  # GRPO merges (1,0) and (0,1); GDPO not
        ("b", 1, 1), ("b", 0, 0),  # sums 2 and 0: nothing merged
        ("c", 1, 0), ("c", 1, 0),  # one combination only: nothing to merge
        *[("d", *rewards) for _, *rewards in ALL_FOUR],  # (1,0) and (0,1) tie under both
    ]
    metrics = advantage_metrics(parts_for(rows))
    assert metrics["gdpo/grpo_collapsed_group_frac"] == pytest.approx(2 / 4)  # a and d
    assert metrics["gdpo/collapsed_group_frac"] == pytest.approx(1 / 4)  # d


def test_equal_weights_and_a_constant_sum_cancel_but_unequal_weights_do_not():
    rows = [("a", 1, 0), ("a", 0, 1), ("b", 1, 1), ("b", 0, 1)]
    metrics = advantage_metrics(parts_for(rows))
    assert metrics["gdpo/cancelled_group_frac"] == 0.5
    assert metrics["gdpo/distinct_adv_per_group"] == 1.5
    weighted = advantage_metrics(parts_for(rows, weights={"correct": 1.0, "length": 0.5}))
    assert weighted["gdpo/cancelled_group_frac"] == 0.0
    assert weighted["gdpo/distinct_adv_per_group"] == 2.0


def test_raw_means_and_zero_variance_fractions_per_reward():
    rows = [("a", 1, 1), ("a", 1, 0), ("b", 0, 1), ("b", 0, 1), ("c", 1, 0), ("c", 0, 0)]
    metrics = advantage_metrics(parts_for(rows))
    assert metrics["gdpo/correct/mean"] == pytest.approx(0.5)
    assert metrics["gdpo/length/mean"] == pytest.approx(0.5)
    assert metrics["gdpo/correct/zero_var_group_frac"] == pytest.approx(2 / 3)  # a and b
    assert metrics["gdpo/length/zero_var_group_frac"] == pytest.approx(2 / 3)  # b and c
    assert metrics["gdpo/cancelled_group_frac"] == 0.0


@pytest.mark.parametrize("batch_norm", ["token", "sequence", "none"])
def test_contribution_std_is_on_the_scale_of_the_final_advantage(batch_norm):
    # Only "correct" varies, so the final advantage is its contribution shifted by the batch mean.
    rows = [("a", 1, 1), ("a", 0, 1), ("a", 0, 1), ("b", 1, 0), ("b", 1, 0), ("b", 0, 0)]
    parts = parts_for(rows, lengths=[1, 2, 3, 4, 5, 6], batch_norm=batch_norm)
    metrics = advantage_metrics(parts)
    assert metrics["gdpo/correct/adv_contribution_std"] == pytest.approx(parts.final.std(unbiased=False).item())
    assert metrics["gdpo/length/adv_contribution_std"] == 0.0


def test_responses_without_valid_tokens_are_left_out():
    rows = [*ALL_FOUR, ("pad", 1, 1), ("pad", 1, 1)]
    metrics = advantage_metrics(parts_for(rows, lengths=[3, 3, 3, 3, 0, 0]))
    assert metrics == pytest.approx(advantage_metrics(parts_for(ALL_FOUR)))


def test_distinct_count_packs_widely_spread_values_too():
    values = torch.tensor([0.0, 1e15, 1e15, -1e15], dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1])
    assert distinct_per_group(values, group, 2) == 2.0
    assert distinct_per_group(values[:2], group[:2], 1) == 2.0


def test_rewards_near_the_float64_limit_are_counted_not_overflowed():
    # 0 and 1e305 in one reward (was: OverflowError in the metrics). The distinct counts are taken on normalized
    # advantages, so no value near the limit reaches the rounding here; test_distinct_count_keeps_huge_values_...
    # checks the rounding's overflow path itself.
    parts = gdpo_outcome_parts(
        {"correct": [0.0, 1e305, 1e305, 0.0, 1e305, 1e305], "length": [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]},
        [3] * 6, ["a", "a", "a", "a", "b", "b"], {"correct": 1.0, "length": 0.5},
    )
    metrics = advantage_metrics(parts)
    # a: GDPO keeps all four combinations apart. GRPO's sum absorbs the length reward next to 1e305
    # (1e305 + 0.5 == 1e305), and its advantage divides the sums 0 and 0.5 by a std of ~6e304, so (0, 0) and
    # (0, 1) get the same advantage too: two distinct. b: one combination.
    assert metrics["gdpo/distinct_adv_per_group"] == 2.5
    assert metrics["gdpo/grpo_distinct_adv_per_group"] == 1.5
    assert (metrics["gdpo/collapsed_group_frac"], metrics["gdpo/grpo_collapsed_group_frac"]) == (0.0, 0.5)
    assert metrics["gdpo/correct/mean"] == pytest.approx(4e305 / 6)


def test_distinct_count_keeps_huge_values_apart_from_scaled_ones():
    # 1e301 scaled for rounding is 1e305: it must not be taken for the unscaled 1e305 next to it.
    values = torch.tensor([1e301, 1e305, 2e305, 2e305, float("inf"), float("inf")], dtype=torch.float64)
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    assert distinct_counts(values, group, 2).tolist() == [3, 1]


def test_distinct_advantages_are_told_apart_as_the_papers_count_tells_them():
    # one home for "the same advantage": rounded to COLLAPSE_DECIMALS, as the paper's count of distinct groups
    from gdpo_verl.core.collapse import COLLAPSE_DECIMALS

    step = 10.0**-COLLAPSE_DECIMALS
    values = torch.tensor([0.0, step / 10, 1.0, 1.0 + 2 * step], dtype=torch.float64)
    assert distinct_counts(values, torch.tensor([0, 0, 1, 1]), 2).tolist() == [1, 2]


def test_grpos_distinct_count_is_taken_on_its_advantage_not_on_the_summed_reward():
    # Before: GRPO's count was taken on the summed reward. With "the same advantage" a rounding at a fixed scale,
    # sums 3e-5 apart were counted as one value, though GRPO's advantage divides them by a std of about 1e-4 and
    # gives them advantages about 0.5 apart.
    tiny = 3e-5
    parts = gdpo_outcome_parts({"a": [0.0, tiny, 2 * tiny, 3 * tiny], "b": [0.0, 0.0, 0.0, 0.0]}, [3] * 4, ["g"] * 4,
                               {"a": 1.0, "b": 1.0}, options=GdpoOptions(eps=0.0))
    metrics = advantage_metrics(parts)
    assert metrics["gdpo/grpo_distinct_adv_per_group"] == 4.0 == metrics["gdpo/distinct_adv_per_group"]
    assert metrics["gdpo/grpo_collapsed_group_frac"] == 0.0


def test_gdpos_distinct_count_does_not_change_with_the_scale_of_the_weights():
    # Before: GDPO's count was taken on the summed normalized advantages, which scale with the weights: at weights
    # 1e-5 and 2e-5 every advantage rounded to 0 (1 distinct, the group "collapsed"), though training (after the
    # batch normalization) sees the same advantages as with weights 1 and 2.
    rewards = {"a": [0.0, 1.0, 0.0, 1.0], "b": [0.0, 0.0, 1.0, 1.0]}
    counts = []
    for scale in (1.0, 1e-5):
        metrics = advantage_metrics(gdpo_outcome_parts(rewards, [3] * 4, ["g"] * 4, {"a": scale, "b": 2 * scale}))
        counts.append((metrics["gdpo/distinct_adv_per_group"], metrics["gdpo/collapsed_group_frac"]))
    assert counts == [(4.0, 0.0), (4.0, 0.0)]
