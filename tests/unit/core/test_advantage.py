"""The pure core, gdpo_verl.core.advantage, against an independent per-sample reference and the paper."""

import math
import random

import numpy as np
import pytest
import torch

from gdpo_verl import gdpo_advantage
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.advantage import gdpo_outcome_parts, group_ids, group_normalize
from tests.reference import reference_gdpo


def random_batch(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 8) for _ in range(rng.randint(2, 7))]
    index = [f"prompt-{g}" for g, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(index)
    batch_size, length = len(index), rng.randint(1, 12)
    mask = []
    for b in range(batch_size):
        n = 0 if b == 0 and seed % 3 == 0 else rng.randint(0 if rng.random() < 0.1 else 1, length)
        mask.append([1] * n + [0] * (length - n))
    mask[-1] = [1] * length  # the batch step needs at least two valid tokens
    mask[-2] = [1] * length
    rewards = {}
    for k in range(rng.randint(1, 4)):
        kind = rng.choice(["binary", "continuous", "tokens"])
        if kind == "binary":
            rewards[f"r{k}"] = [float(rng.randint(0, 1)) for _ in range(batch_size)]
        elif kind == "continuous":
            rewards[f"r{k}"] = [rng.choice([0.1, 0.3, rng.uniform(-2, 2)]) for _ in range(batch_size)]
        else:
            rewards[f"r{k}"] = [[rng.choice([0.0, 0.0, 0.5, -1.0]) for _ in range(length)] for _ in range(batch_size)]
    weights = {name: rng.choice([1.0, 0.25, 2.0, -0.5]) for name in rewards}
    return rewards, mask, index, weights


@pytest.mark.parametrize("batch_norm", ["token", "sequence", "none"])
@pytest.mark.parametrize("norm_by_std", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_matches_per_sample_reference_on_random_batches(seed, norm_by_std, batch_norm):
    rewards, mask, index, weights = random_batch(seed)
    expected = reference_gdpo(rewards, mask, index, weights, norm_by_std=norm_by_std, batch_norm=batch_norm)
    got = gdpo_advantage(
        {name: torch.tensor(values) for name, values in rewards.items()},
        torch.tensor(mask),
        np.array(index, dtype=object),
        weights,
        norm_by_std=norm_by_std,
        batch_norm=batch_norm,
    )
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float32), rtol=1e-5, atol=1e-5)


def paper_example():
    # Two prompts, two rollouts each, rewards (correct, format). Totals (0, 1) in the first group, (0, 2) in the second.
    rewards = {"correct": torch.tensor([0.0, 1.0, 0.0, 1.0]), "format": torch.tensor([0.0, 0.0, 0.0, 1.0])}
    return rewards, torch.ones(4, 3, dtype=torch.int64), ["a", "a", "b", "b"]


def test_paper_example_grpo_gives_one_advantage_pair_gdpo_two():
    rewards, mask, index = paper_example()
    total = rewards["correct"] + rewards["format"]
    grpo = gdpo_advantage({"total": total}, mask, index, batch_norm="none")[:, 0]
    gdpo = gdpo_advantage(rewards, mask, index, batch_norm="none")[:, 0]
    s = 1 / math.sqrt(2)
    torch.testing.assert_close(grpo, torch.tensor([-s, s, -s, s]), rtol=0, atol=1e-5)
    torch.testing.assert_close(gdpo, torch.tensor([-s, s, -2 * s, 2 * s]), rtol=0, atol=1e-5)
    assert len(set(grpo.round(decimals=4).tolist())) == 2
    assert len(set(gdpo.round(decimals=4).tolist())) == 4


@pytest.mark.parametrize("value", [0.1, 1 / 3, 0.7, -2.2, 1e6 + 0.1])
def test_zero_variance_group_gets_exactly_zero_advantage(value):
    # 0.1 + 0.1 + 0.1 != 0.3 in floating point: the mean of a constant group is not the constant.
    varying = torch.tensor([0.0, 1.0, 0.25])
    reward = torch.cat([torch.full((5,), value, dtype=torch.float64), varying.double()])
    index = [0] * 5 + [1] * 3
    out = gdpo_advantage({"r": reward}, torch.ones(8, 4), index, batch_norm="none", eps=1e-8)
    assert out[:5].abs().max().item() == 0.0
    assert out[5:].abs().min().item() > 0.1


def test_group_of_one_gets_zero_advantage():
    out = gdpo_advantage({"r": torch.tensor([7.0, 0.0, 1.0])}, torch.ones(3, 2), [0, 1, 1], batch_norm="none")
    assert out[0].abs().max().item() == 0.0
    assert out[1:].abs().min().item() > 0.5


def test_empty_mask_rows_get_zero_and_stay_out_of_the_sequence_statistics():
    rewards = {"r": torch.tensor([0.0, 1.0, 0.0, 1.0, 5.0])}
    mask = torch.tensor([[1, 1], [1, 0], [0, 0], [1, 1], [1, 1]])
    index = ["a", "a", "b", "b", "b"]
    out = gdpo_advantage(rewards, mask, index, batch_norm="sequence")
    assert out[2].abs().max().item() == 0.0
    expected = reference_gdpo({"r": rewards["r"].tolist()}, mask.tolist(), index, batch_norm="sequence")
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("batch_norm", ["token", "sequence"])
def test_one_group_batch_is_whitened_and_keeps_order(batch_norm):
    rewards = {"correct": torch.tensor([0.0, 1.0, 1.0, 0.0]), "length": torch.tensor([1.0, 1.0, 0.0, 0.0])}
    out = gdpo_advantage(rewards, torch.ones(4, 3), [3, 3, 3, 3], batch_norm=batch_norm)[:, 0]
    assert out[1] > out[0] > out[3] and out[1] > out[2] > out[3]
    assert abs(out.mean().item()) < 1e-6


def test_token_level_reward_is_summed_over_valid_tokens_only():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1]])
    token_level = torch.tensor([[0.5, 0.5, 9.0], [2.0, 9.0, 9.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    outcome = torch.tensor([1.0, 2.0, 0.0, 3.0])
    index = [0, 0, 1, 1]
    torch.testing.assert_close(
        gdpo_advantage({"r": token_level}, mask, index), gdpo_advantage({"r": outcome}, mask, index)
    )


def test_index_forms_agree():
    rewards, mask, index = paper_example()
    as_strings = gdpo_advantage(rewards, mask, np.array(index, dtype=object))
    as_list = gdpo_advantage(rewards, mask, index)
    as_tensor = gdpo_advantage(rewards, mask, torch.tensor([10, 10, -4, -4]))
    torch.testing.assert_close(as_strings, as_list)
    torch.testing.assert_close(as_strings, as_tensor)


def test_norm_by_std_false_only_centres():
    out = gdpo_advantage({"r": torch.tensor([0.0, 4.0, 1.0, 1.0])}, torch.ones(4, 1), [0, 0, 1, 1], norm_by_std=False,
                         batch_norm="none")
    assert out[:, 0].tolist() == [-2.0, 2.0, 0.0, 0.0]


def test_weights_scale_normalized_advantages_not_raw_rewards():
    rewards, mask, index = paper_example()
    plain = gdpo_advantage(rewards, mask, index, batch_norm="none")
    rewards_x100 = {"correct": rewards["correct"] * 100, "format": rewards["format"]}
    weighted = gdpo_advantage(rewards_x100, mask, index, {"correct": 1.0, "format": 0.5}, batch_norm="none")
    # Scaling a reward changes nothing (it is normalized); a weight does.
    torch.testing.assert_close(gdpo_advantage(rewards_x100, mask, index, batch_norm="none"), plain)
    assert weighted[3, 0] == pytest.approx(plain[3, 0].item() - 0.5 / math.sqrt(2), abs=1e-5)


def test_population_std_without_eps_for_counting():
    # ddof=0, eps=0 is the paper's distinct-group count setting: (0, 1) -> (-1, 1).
    values = torch.tensor([[0.0], [1.0]])
    group, num_groups = group_ids([0, 0], 2)
    out = group_normalize(values, group, num_groups, norm_by_std=True, eps=0.0, baseline="mean", ddof=0)
    assert out[:, 0].tolist() == [-1.0, 1.0]


def test_constant_sum_rewards_cancel_exactly():
    # Two equally weighted rewards with r2 = 1 - r1: z2 = -z1, so GDPO gives 0 like GRPO (no free lunch).
    r1 = torch.tensor([0.0, 1.0, 1.0, 0.0])
    out = gdpo_advantage({"a": r1, "b": 1 - r1}, torch.ones(4, 2), [0, 0, 0, 0], batch_norm="none")
    assert out.abs().max().item() < 1e-12


# --- bad inputs -------------------------------------------------------------------------------------------


def call(**overrides):
    rewards, mask, index = paper_example()
    arguments = {"rewards": rewards, "response_mask": mask, "index": index} | overrides
    return gdpo_advantage(**arguments)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_reward_is_rejected_with_name_and_count(bad):
    correct = torch.tensor([0.0, bad, bad, 1.0])
    with pytest.raises(ValueError, match=r"'correct': 2 of 4 responses"):
        call(rewards={"correct": correct, "format": torch.zeros(4)})


def test_nan_in_token_level_reward_is_rejected():
    token_level = torch.zeros(4, 3)
    token_level[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"'process': 1 of 4"):
        call(rewards={"process": token_level})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rewards": {}}, "non-empty mapping"),
        ({"rewards": [torch.zeros(4)]}, "non-empty mapping"),
        ({"rewards": {"r": [0.0, 1.0, 0.0, 1.0]}}, "'r' must be a torch.Tensor"),
        ({"rewards": {"r": torch.zeros(5)}}, r"'r' has shape \(5,\); expected \(4,\)"),
        ({"rewards": {"r": torch.zeros(4, 2)}}, r"\(4, 3\) token-level"),
        ({"response_mask": torch.ones(4)}, r"response_mask must be a \(B, T\) tensor"),
        ({"index": ["a", "a", "b"]}, r"index must have shape \(4,\)"),
        ({"index": torch.tensor([0.0, 0.0, 1.0, 1.0])}, "integer group ids"),
        ({"index": ["a", 1, "b", None]}, "mutually comparable"),
        ({"weights": {"correct": 1.0}}, r"missing: \['format'\]"),
        ({"weights": {"correct": 1.0, "format": 1.0, "lenght": 1.0}}, r"unknown: \['lenght'\]"),
        ({"weights": {"correct": 1.0, "format": float("nan")}}, "'format' must be a finite number"),
        ({"weights": {"correct": 1.0, "format": "1"}}, "'format' must be a finite number"),
        ({"weights": [1.0, 1.0]}, "weights must be a mapping"),
        ({"batch_norm": "batch"}, "batch_norm must be one of"),
        ({"eps": -1e-6}, "eps must be at least 0"),
        ({"response_mask": torch.tensor([[1, 0, 0]] + [[0, 0, 0]] * 3)}, "at least 2 valid response tokens"),
        (
            {"response_mask": torch.tensor([[1, 1, 1]] + [[0, 0, 0]] * 3), "batch_norm": "sequence"},
            "at least 2 responses with a valid token",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(overrides, message):
    with pytest.raises(ValueError, match=message):
        call(**overrides)


@pytest.mark.parametrize(
    ("index", "message"),
    [
        # True == 1: numpy would put both in one group
        (np.array([True, True, 1, 1], dtype=object), r"group id \(uid\) True at response 0 is a bool"),
        ([1, 1, True, True], r"group id \(uid\) True at response 2 is a bool"),
        ([0, 0, np.False_, np.False_], r"group id \(uid\) np.False_ at response 2 is a bool"),
        (np.array([True, True, False, False]), r"group ids \(uid\) must not be bools; got np.True_"),
        (torch.tensor([True, True, False, False]), "integer group ids; got dtype torch.bool"),
        # NaN: a float array puts every NaN in one group, an object array each in its own
        ([float("nan")] * 2 + [1.0] * 2, r"group id \(uid\) nan at 2 response\(s\), the first response 0"),
        (np.array([3, 3, float("nan"), float("nan")], dtype=object), r"group id \(uid\) nan at response 2"),
        (np.array([1.0, 1.0, np.float32("nan"), 2.0], dtype=object), r"group id \(uid\) nan at response 2"),
    ],
)
def test_uids_that_would_merge_or_split_groups_silently_are_refused(index, message):
    with pytest.raises(ValueError, match=message) as refused:
        call(index=index)
    assert "uid of its prompt" in str(refused.value) or "integer group ids" in str(refused.value)


def test_uids_of_one_kind_still_group_as_before():
    for index in (["a", "a", "b", "b"], [7, 7, 3, 3], np.array([7.0, 7.0, 3.5, 3.5]), torch.tensor([7, 7, 3, 3])):
        assert group_ids(index, 4)[1] == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_response_mask_is_left_unchanged_and_output_is_float32(dtype):
    rewards, mask, index = paper_example()
    mask = mask.to(dtype)
    before = mask.clone()
    out = gdpo_advantage(rewards, mask, index)
    assert torch.equal(mask, before)
    assert out.dtype == torch.float32 and out.data_ptr() != mask.data_ptr()


@pytest.mark.parametrize("batch_norm", ["token", "sequence", "none"])
def test_the_batch_step_returns_the_statistics_it_applied(batch_norm):
    from gdpo_verl.core import gdpo_outcome_parts

    scores = {"a": torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0]), "b": torch.tensor([0.0, 1.0, 1.0, 1.0, 0.0])}
    parts = gdpo_outcome_parts(scores, torch.tensor([2.0, 5.0, 1.0, 3.0, 4.0]), [0, 0, 1, 1, 1],
                               options=GdpoOptions(batch_norm=batch_norm))
    torch.testing.assert_close(parts.final, (parts.summed - parts.batch_mean) / parts.batch_scale)
    if batch_norm == "none":
        assert (parts.batch_mean, parts.batch_scale) == (0.0, 1.0)


# --------------------------------------------------------------------------- inputs that would give silently wrong advantages


def _batch():
    rewards = {"a": torch.tensor([1.0, 0.0, 1.0, 0.0]), "b": torch.tensor([0.0, 0.0, 1.0, 1.0])}
    return rewards, torch.ones(4, 3, dtype=torch.long), ["g", "g", "h", "h"]


@pytest.mark.parametrize("value", [2, -1, float("nan")], ids=["twos", "minus one", "nan"])
def test_a_response_mask_outside_zero_and_one_is_refused(value):
    rewards, mask, index = _batch()
    mask = mask.to(torch.float32)
    mask[1, 1] = value
    with pytest.raises(ValueError, match="response_mask must hold 1 on valid response tokens and 0 elsewhere"):
        gdpo_advantage(rewards, mask, index)


def test_all_zero_weights_are_refused():
    rewards, mask, index = _batch()
    with pytest.raises(ValueError, match="every weight is 0"):
        gdpo_advantage(rewards, mask, index, {"a": 0.0, "b": 0.0})


def test_an_eps_that_would_flatten_every_advantage_is_refused():
    rewards, mask, index = _batch()
    with pytest.raises(ValueError, match="eps must be at most 1"):
        gdpo_advantage(rewards, mask, index, eps=1e308)


def test_weights_that_overflow_float64_are_refused_not_turned_into_nan():
    rewards, mask, index = _batch()
    with pytest.raises(ValueError, match="NaN or infinite"):
        gdpo_advantage(rewards, mask, index, {"a": 1e308, "b": 1e308})


@pytest.mark.parametrize("flag", [True, 1, np.bool_(True), torch.tensor(True), False, 0, torch.tensor(0)])
def test_norm_by_std_takes_a_bool_or_one_or_zero_and_the_result_carries_it(flag):
    scores = {"r": torch.tensor([1.0, 0.0, 3.0, 0.0])}
    parts = gdpo_outcome_parts(scores, torch.ones(4), [0, 0, 1, 1],
                               options=GdpoOptions(norm_by_std=flag, batch_norm="none"))
    assert parts.options.norm_by_std is bool(flag)
    expected = [0.7071, -0.7071, 0.7071, -0.7071] if bool(flag) else [0.5, -0.5, 1.5, -1.5]
    assert parts.final.tolist() == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("flag", ["false", 2, 0.5, None, torch.tensor([1, 0])])
def test_norm_by_std_refuses_what_is_not_a_bool(flag):
    with pytest.raises(ValueError, match="norm_by_std must be true or false"):
        gdpo_outcome_parts({"r": torch.tensor([1.0, 0.0])}, torch.ones(2), [0, 0],
                           options=GdpoOptions(norm_by_std=flag))
