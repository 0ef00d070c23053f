"""The options beyond the paper (gdpo_verl.core.variants and their place in gdpo_verl.core.advantage): rewards that do
not apply, the leave-one-out baseline, GD2PO's conflict masking, SAW's weights and weight schedules.

Each is checked against tests/reference.py's per-sample float64 version written from the formulas, and GD2PO, SAW and
NeMo-RL's leave-one-out against numbers their authors' public code gives on fixed batches (the code run unchanged
on these batches, outside this project):

- GD2PO: Qwen-Applications/GD2PO at f1ad765bc9a330e6cf387f95e9c1e5a6c4bb2d02, tool-calling/verl/trainer/ppo/
  ray_trainer.py (estimators gdpo_filter_group_ratio, "hard", and gdpo_filter_ratio_conflict_group_ratio, "snr").
- SAW: Zhaolutuan/SAW at 119951f63fa92f93d4d5878c2cc0791db98a7f06, verl/trainer/ppo/ray_trainer.py (gdpo-h).
- NeMo-RL: NVIDIA-NeMo/RL at 7ea279abfbeb698b092856d0dab61e7cf39bc909, nemo_rl/algorithms/utils.py
  (calculate_baseline_and_std_per_prompt with leave_one_out_baseline=True).
"""

import random

import numpy as np
import pytest
import torch

from gdpo_verl.core.advantage import gdpo_outcome_parts, gdpo_parts, group_ids, group_normalize
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.core.variants import WeightSchedule, read_weight, schedule_breakpoints, weights_at
from tests.reference import reference_variants

R1 = [1, 0, 1, 0, 1, 1, 0, 0]
R2 = [0.2, 0.9, 0.5, 0.1, 0.3, 0.3, 0.8, 0.6]
R3 = [1, 1, 0, 0, 0, 1, 1, 0]
GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]
EQUAL = [5] * 8  # batch A: every response 5 tokens
UNEQUAL = [5, 3, 4, 2, 5, 5, 1, 4]  # batch B


# --------------------------------------------------------------------------- the authors' numbers

AUTHORS = {
    # (rewards, lengths, options): the final advantage of each response, as the authors' code computes it
    "gd2po snr tau 0.2, batch A": (
        {"a": R1, "b": R2, "c": R3}, EQUAL, {"conflict": "snr", "conflict_threshold": 0.2},
        [0.691017039472, 0.822216295428, 0, -1.58578183157, -0.644190656226, 0.760822040783, 1.01162879474,
         -1.05571168266]),
    "gd2po snr tau 0.2, batch B": (
        {"a": R1, "b": R2, "c": R3}, UNEQUAL, {"conflict": "snr", "conflict_threshold": 0.2},
        [0.753599326837, 0.897699260096, 0, -1.74707465162, -0.712897860478, 0.830268176494, 1.10573648035,
         -1.16488329295]),
    "gd2po hard, two rewards, batch A": (
        {"a": R1, "b": R2}, EQUAL, {"conflict": "hard"}, [0, 0, 0.948683289854, -0.948683290318, 0, 0, 0, 0]),
    "gd2po snr tau 0.8, two rewards, batch B": (
        {"a": R1, "b": R2}, UNEQUAL, {"conflict": "snr"}, [0, 0, 0.645497219068, -1.29099443771, 0, 0, 0, 0]),
    # SAW's code adds 3 to its correctness reward before its CV (a fixed step there): given here shifted. Its
    # advantages do not move with the shift; its weights do: [0.394409946524, 1.60559002765].
    "saw gdpo-h, batch A": (
        {"correct": [r + 3 for r in R1], "format": R2}, EQUAL, {"adaptive_weights": "saw"},
        [-0.537191456926, 1.44129480427, 0.547732559892, -1.45183590724, -0.784722535391, -0.784722535391,
         1.31533458093, 0.254110489852]),
    "saw gdpo-h, batch B": (
        {"correct": [r + 3 for r in R1], "format": R3}, UNEQUAL, {"adaptive_weights": "saw"},
        [1.08653699326, 0.812540703717, -0.831437000682, -1.10543329023, -0.831437000682, 1.08653699326,
         0.812540703717, -1.10543329023]),
}


@pytest.mark.parametrize("case", sorted(AUTHORS))
def test_gd2po_and_saw_match_their_authors_code(case):
    rewards, lengths, options, expected = AUTHORS[case]
    parts = gdpo_outcome_parts(rewards, lengths, GROUPS, options=GdpoOptions(**options))
    # 1e-4: where one response alone is kept, GD2PO's whitening leaves its epsilons' trace (about 1e-5) on it;
    # here 0 (a batch of equal values has nothing to normalize). Elsewhere the two agree to 1e-9.
    np.testing.assert_allclose(parts.final.numpy(), expected, atol=1e-4)
    if case.startswith("saw gdpo-h, batch A"):
        np.testing.assert_allclose(parts.weights.numpy(), [0.394409946524, 1.60559002765], rtol=1e-10)


def test_gd2po_with_one_response_kept_gives_zero_where_its_code_leaves_a_rounding_trace():
    # batch A with three rewards: hard and snr 0.8 keep response 3 alone; GD2PO's code gives it -1.318e-5
    # (x * 1e-8 / (5 + 1e-8) / 1e-4 from its epsilons) and 0 to every other: the same up to that trace.
    for options in ({"conflict": "hard"}, {"conflict": "snr"}):
        parts = gdpo_outcome_parts({"a": R1, "b": R2, "c": R3}, EQUAL, GROUPS, options=GdpoOptions(**options))
        assert parts.keep.tolist() == [False, False, False, True, False, False, False, False]
        assert parts.final.abs().max().item() == 0.0


def test_leave_one_out_matches_nemo_rl():
    group, count = group_ids(GROUPS, 8)
    got = group_normalize(torch.tensor(R2, dtype=torch.float64).unsqueeze(1), group, count, norm_by_std=True,
                          eps=0.0, baseline="leave_one_out")[:, 0]
    # NeMo-RL's baselines and stds (each response's others), then (r - baseline) / std
    baseline = [0.5, 0.266666666667, 0.4, 0.533333333333, 0.566666666667, 0.566666666667, 0.4, 0.466666666667]
    std = [0.4, 0.208166599947, 0.435889894354, 0.351188458428, 0.251661147842, 0.251661147842, 0.173205080757,
           0.288675134595]
    np.testing.assert_allclose(got.numpy(), [(r - b) / s for r, b, s in zip(R2, baseline, std)], rtol=1e-9)

    # groups of 1, 2 and 3: a group of one gives 0 (as NeMo-RL), a group of three divides by the others' std (as
    # NeMo-RL: [1, 0, 0.5] -> baselines 0.25, 0.75, 0.5, stds 0.3535..., 0.3535..., 0.7071...). In a group of two
    # the other's std is 0: NeMo-RL leaves r - b = -0.7, +0.7 unscaled; here the group's std scales it (docs)
    values = torch.tensor([0.7, 0.2, 0.9, 1.0, 0.0, 0.5], dtype=torch.float64).unsqueeze(1)
    group, count = group_ids([0, 1, 1, 2, 2, 2], 6)
    got = group_normalize(values, group, count, norm_by_std=True, eps=0.0, baseline="leave_one_out")[:, 0]
    pair_std = 0.7 / 2**0.5
    np.testing.assert_allclose(got.numpy(), [0.0, -0.7 / pair_std, 0.7 / pair_std, 0.75 / 0.353553390593,
                                             -0.75 / 0.353553390593, 0.0], rtol=1e-9, atol=1e-12)


def test_leave_one_out_others_equal_up_to_round_off_are_equal_and_the_scale_does_not_follow_the_reward():
    group, count = group_ids([0] * 4, 4)
    near = group_normalize(torch.tensor([[0.3], [0.1 + 0.2], [0.3], [1.0]], dtype=torch.float64), group, count,
                           norm_by_std=True, eps=1e-6, baseline="leave_one_out")[:, 0]
    assert near.abs().max().item() < 10  # not 1 / (1e-17 + eps) ~ 7e5
    small = group_normalize(torch.tensor([[0.0]] * 7 + [[1.0]], dtype=torch.float64), *group_ids([0] * 8, 8),
                            norm_by_std=True, eps=1e-6, baseline="leave_one_out")[:, 0]
    large = group_normalize(torch.tensor([[0.0]] * 7 + [[100.0]], dtype=torch.float64), *group_ids([0] * 8, 8),
                            norm_by_std=True, eps=1e-6, baseline="leave_one_out")[:, 0]
    np.testing.assert_allclose(small.numpy(), large.numpy(), rtol=1e-5)


# --------------------------------------------------------------------------- the formulas, on random batches


def random_case(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 6) for _ in range(rng.randint(2, 6))]
    index = [f"p{g}" for g, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(index)
    size = len(index)
    valid = [rng.randint(0 if rng.random() < 0.1 else 1, 9) for _ in range(size)]
    valid[-1] = valid[-2] = 9
    scores, applies = {}, {}
    for k in range(rng.randint(2, 4)):
        kind = rng.choice(["binary", "continuous"])
        scores[f"r{k}"] = [float(rng.randint(0, 1)) if kind == "binary" else rng.choice([0.1, rng.uniform(-2, 3)])
                           for _ in range(size)]
        if rng.random() < 0.5:
            applies[f"r{k}"] = [rng.random() < 0.7 for _ in range(size)]
    if rng.random() < 0.5:  # responses no reward applies to
        unrewarded = [rng.random() < 0.3 for _ in range(size)]
        for name in scores:
            applies[name] = [not none and present for none, present in
                             zip(unrewarded, applies.get(name, [True] * size), strict=True)]
    weights = {name: rng.choice([1.0, 0.5, 2.0, -0.5]) for name in scores}
    return scores, valid, index, weights, applies


@pytest.mark.parametrize("options", [
    {"baseline": "leave_one_out"},
    {"baseline": "leave_one_out", "norm_by_std": False, "batch_norm": "sequence"},
    {"conflict": "hard"},
    {"conflict": "snr", "threshold": 0.8},
    {"conflict": "snr", "threshold": 0.3, "batch_norm": "sequence"},
    {"conflict": "hard", "batch_norm": "none"},
    {"adaptive": "saw"},
    {"adaptive": "saw", "conflict": "snr", "baseline": "leave_one_out"},
    {},
], ids=str)
@pytest.mark.parametrize("seed", range(10))
def test_every_option_matches_the_reference_written_from_its_formula(seed, options):
    scores, valid, index, weights, applies = random_case(seed)
    expected = reference_variants(scores, valid, index, weights, applies=applies, **options)
    renamed = {"threshold": "conflict_threshold", "adaptive": "adaptive_weights"}
    given = {renamed.get(name, name): value for name, value in options.items()}
    parts = gdpo_outcome_parts(
        {name: [None if not applies.get(name, [True] * len(valid))[b] else value for b, value in enumerate(values)]
         for name, values in scores.items()},
        valid, index, weights, options=GdpoOptions(**given))
    np.testing.assert_allclose(parts.final.numpy(), expected, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- rewards that do not apply


def test_a_reward_that_does_not_apply_is_left_out_of_its_group_and_adds_nothing():
    # group p: code applies to rollouts 0-2 only; group q: code applies to none of them
    scores = {"correct": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0], "code": [1.0, 0.0, 0.0, None, None, None]}
    parts = gdpo_outcome_parts(scores, [4] * 6, ["p", "p", "p", "p", "q", "q"], options=GdpoOptions(batch_norm="none"))
    alone = gdpo_outcome_parts({"code": [1.0, 0.0, 0.0]}, [4] * 3, ["p"] * 3, options=GdpoOptions(batch_norm="none"))
    code = parts.normalized[:, 1]
    np.testing.assert_allclose(code[:3].numpy(), alone.normalized[:, 0].numpy())  # statistics of the 3 that have it
    assert code[3:].tolist() == [0.0, 0.0, 0.0]
    assert parts.applies[:, 1].tolist() == [True, True, True, False, False, False]
    # the same through the (B, T) path with an applies mask: the score under a False is ignored
    mask = torch.ones(6, 4)
    through = gdpo_parts({"correct": torch.tensor(scores["correct"]), "code": torch.tensor([1.0, 0, 0, 9, 9, 9])},
                         mask, np.array(["p", "p", "p", "p", "q", "q"], dtype=object),
                         applies={"code": torch.tensor([True, True, True, False, False, False])}, batch_norm="none")
    np.testing.assert_allclose(through.final.numpy(), parts.final.numpy())


@pytest.mark.parametrize("batch_norm", ["token", "sequence", "none"])
def test_a_response_no_reward_applies_to_gets_nothing_and_moves_nothing(batch_norm):
    # Three groups of four with uneven lengths; no reward applies to group "c". Before: under token and sequence
    # whitening its responses got advantages of 0.16, and the others' advantages moved by 0.31 to 0.34.
    correct = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    length = [0.2, 0.9, 0.5, 0.1, 0.3, 0.7, 0.8, 0.6]
    valid = [5, 3, 4, 2, 5, 6, 1, 4]
    index = ["a"] * 4 + ["b"] * 4
    alone = gdpo_outcome_parts({"correct": correct, "length": length}, valid, index,
                               options=GdpoOptions(batch_norm=batch_norm))
    parts = gdpo_outcome_parts({"correct": correct + [None] * 4, "length": length + [None] * 4},
                               valid + [9, 1, 7, 2], index + ["c"] * 4, options=GdpoOptions(batch_norm=batch_norm))
    assert parts.final[8:].tolist() == [0.0] * 4
    np.testing.assert_allclose(parts.final[:8].numpy(), alone.final.numpy(), rtol=1e-12, atol=1e-12)
    assert (parts.batch_mean, parts.batch_scale) == pytest.approx((alone.batch_mean, alone.batch_scale))
    assert parts.rewarded.tolist() == [True] * 8 + [False] * 4
    # the (B, T) path: zero advantage on every token of those responses
    mask = torch.zeros(12, 9)
    for row, tokens in enumerate(valid + [9, 1, 7, 2]):
        mask[row, :tokens] = 1
    applies = torch.tensor([True] * 8 + [False] * 4)
    advantages = gdpo_parts({"correct": torch.tensor(correct + [0.0] * 4), "length": torch.tensor(length + [0.0] * 4)},
                            mask, np.array(index + ["c"] * 4, dtype=object),
                            applies={"correct": applies, "length": applies}, batch_norm=batch_norm).advantages
    assert advantages[8:].abs().sum().item() == 0.0
    metrics = advantage_metrics(parts)
    assert metrics["gdpo/unrewarded_frac"] == pytest.approx(4 / 12)


def test_nan_is_still_an_error_where_a_reward_applies_and_none_is_not_a_number_elsewhere():
    with pytest.raises(ValueError, match=r"non-finite reward values .* 'code': 1 .*None for a reward"):
        gdpo_outcome_parts({"correct": [1.0, 0.0], "code": [float("nan"), None]}, [3, 3], [0, 0])
    with pytest.raises(ValueError, match=r"applies names \['typo'\]"):
        gdpo_outcome_parts({"correct": [1.0, 0.0]}, [3, 3], [0, 0], applies={"typo": [True, True]})


def test_a_reward_conditioned_on_one_that_does_not_apply_does_not_apply_either():
    from gdpo_verl.core.conditions import Condition

    parts = gdpo_outcome_parts({"correct": [1.0, None, 1.0, 0.0], "length": [0.5, 0.7, 0.2, 0.9]}, [2] * 4, [0] * 4,
                               options=GdpoOptions(conditions=[Condition("length", "correct", 1.0)]))
    assert parts.applies[:, 1].tolist() == [True, False, True, True]
    assert parts.scores[:, 1].tolist() == [0.5, 0.0, 0.2, 0.0]  # response 3: not correct, so no length


# --------------------------------------------------------------------------- weight schedules


def test_a_schedule_is_linear_between_its_points_and_constant_outside():
    schedule = read_weight([[10, 0.0], [20, 1.0], [30, 0.5]], "w")
    assert [schedule.at(step) for step in (0, 10, 15, 20, 25, 30, 99)] == [0.0, 0.0, 0.5, 1.0, 0.75, 0.5, 0.5]
    assert weights_at({"a": 1.0, "b": schedule}, 15) == {"a": 1.0, "b": 0.5}
    with pytest.raises(ValueError, match="outside verl's trainer"):
        weights_at({"b": schedule}, None)
    assert weights_at({"a": 2.0}, None) == {"a": 2.0}


@pytest.mark.parametrize("value, message", [
    ([], "empty list"),
    ([[0, 1.0], [0, 2.0]], r"steps of a schedule must increase; got \[0, 0\]"),
    ([[5, 1.0], [2, 2.0]], "must increase"),
    ([[0, 1.0, 3]], r"each point of a schedule must be \[step, weight\]"),
    ([[-1, 1.0]], "at least 0"),
    ([[1.5, 1.0]], "whole number"),
    ([[0, float("nan")]], "finite number"),
    ("1.0", "finite number"),
])
def test_a_bad_schedule_is_refused_naming_what_is_wrong(value, message):
    with pytest.raises(ValueError, match=message):
        read_weight(value, "weight of reward 'length'")


def test_the_steps_where_all_weights_could_vanish_include_every_zero_crossing():
    weights = {"a": WeightSchedule(((0, 1.0), (10, -1.0))), "b": WeightSchedule(((0, -1.0), (10, 1.0)))}
    assert 5 in schedule_breakpoints(weights)  # both cross 0 at step 5
    assert schedule_breakpoints({"a": WeightSchedule(((0, 1.0), (3, -2.0)))}) == [0, 1, 3]


def test_sessions_take_the_options_on_their_last_outputs_and_give_every_output_its_sessions_advantage():
    from gdpo_verl.core.advantage import Sessions

    # 3 sessions of prompt p (2, 1 and 2 outputs) and 2 of prompt q; the last output of each stands for it
    final_rows, row_session = [1, 2, 4, 5, 6], torch.tensor([0, 0, 1, 2, 2, 3, 4])
    correct = torch.tensor([9.0, 1.0, 0.0, 9.0, 1.0, 0.0, 1.0])  # rows 0 and 3 are not the last: never read
    code = torch.tensor([9.0, 1.0, 0.0, 9.0, 0.5, 0.0, 0.0])
    applies = {"code": torch.tensor([True, True, True, True, True, False, False])}
    mask = torch.ones(7, 3)
    options = {"conflict": "hard", "baseline": "leave_one_out", "adaptive_weights": "saw", "batch_norm": "sequence"}
    parts = gdpo_parts({"correct": correct, "code": code}, mask, np.array(list("pppppqq"), dtype=object),
                       sessions=Sessions(final_rows, row_session), applies=applies, **options)
    alone = gdpo_outcome_parts({"correct": [1.0, 0.0, 1.0, 0.0, 1.0], "code": [1.0, 0.0, 0.5, None, None]},
                               [3] * 5, list("pppqq"), options=GdpoOptions(**options))
    np.testing.assert_allclose(parts.final.numpy(), alone.final.numpy())
    np.testing.assert_allclose(parts.advantages[:, 0].numpy(), alone.final[row_session].float().numpy())


def test_the_metrics_under_conflict_count_cancelled_groups_before_the_mask_and_collapse_among_kept_responses():
    from gdpo_verl.core.diagnostics import advantage_metrics

    scores = {"a": [1.0, 0.0, 0.6], "b": [0.0, 1.0, 0.3]}
    plain = advantage_metrics(gdpo_outcome_parts(scores, [3] * 3, ["g"] * 3))
    masked = advantage_metrics(gdpo_outcome_parts(scores, [3] * 3, ["g"] * 3, options=GdpoOptions(conflict="hard")))
    assert masked["gdpo/conflict_masked_frac"] > 0
    assert masked["gdpo/cancelled_group_frac"] == plain["gdpo/cancelled_group_frac"] == 0.0
    assert masked["gdpo/collapsed_group_frac"] == plain["gdpo/collapsed_group_frac"] == 0.0
