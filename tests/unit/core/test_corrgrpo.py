"""CorrGRPO (gdpo_verl.core.corrgrpo): the authors' numbers on fixed batches, an independent per-sample version for
what their code does not cover (rewards that do not apply, conditions), and the guarantees in its docstring.

The expected numbers of ``AUTHORS`` come from HKUST-KnowComp/CorrGRPO at 3586915ec333077914fbe2d276f4f908f50bb830,
verl/trainer/ppo/core_algos.py, ``compute_grpo_covariance_coefficient_outcome_advantage`` (their
``algorithm.adv_estimator=grpo_covariance_coefficient``), its body run outside this project on these batches with the
components given in ``non_tensor_batch``. Their code reads the components as float32; the numbers here are from the
same body with that one cast made float64 (the run as is agrees to 6e-7 everywhere but group "3" of seed 2, see
``test_anti_correlated_rewards_leave_only_eps``).
"""

import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from gdpo_verl.core.advantage import Sessions, gdpo_outcome_parts
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.conditions import Condition
from gdpo_verl.core.corrgrpo import corrgrpo_advantage, corrgrpo_outcome_parts, corrgrpo_parts
from gdpo_verl.core.diagnostics import UNREWARDED, advantage_metrics

NAMES = ("correct", "quality", "format")

# (seed, norm_adv_by_std_in_grpo, the group of each response, weights, correct, quality, format, the authors' advantage)
AUTHORS = [
    (0, True, "0000001111222233", [1.0, 1.0, 1.0],
     [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
     [1.375, 1.875, 1, 1.25, 2, 1.5, 0.5, 1.625, 1.375, 0, 0.125, 1.75, 0, 1.125, 0, 0.25],
     [1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1],
     [-0.20623942628622619, 0.14731387591873302, -0.4714044029399456, -0.29462775183746603, 0.23570220146997287, 0.5892555036749321, -0.4426805597041645, 0.6324007995773778, 0.5059206396619023, -0.6956408795351157, -0.3167637164123724, 1.055879054707908, -0.42235162188316316, -0.3167637164123724, -0.3124999609375073, 0.3124999609375073]),
    (1, True, "000111122222333333", [1.0, 0.5, 2.0],
     [0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0],
     [2, 0.5, 0.625, 0.5, 0.75, 1.25, 1.125, 1.625, 0.25, 0.625, 0.25, 0.875, 0.5, 1, 1, 0.125, 2, 1.5],
     [1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1],
     [0.13701330218468621, -0.5676265376222716, 0.43061323543758534, -0.34074746071202733, -0.7647887451536614, 0.32560312912482614, 0.7799330767408627, 0.9285870215643426, -0.28876791524256995, -0.2038361754653435, -0.7417371940544444, 0.3057542631980153, 0.0337822459088266, -0.31369228343910377, 0.14960708902480344, -0.9796851313559704, 0.8445561477206642, 0.2654319321407802]),
    (2, True, "00000011233", [1.0, -0.5, 0.75],
     [0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1],
     [1.625, 1.5, 2, 0.375, 1.75, 0, 0.375, 1.375, 0.25, 1.375, 2],
     [1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0],
     [-0.3197564831339417, 0.30745815685955935, -0.43044141960338306, 0.04919330509752948, -0.35665146195708886, 0.7501979027373248, 0.3749998125001407, -0.3749998125001407, 0.0, -343.74999998091806, 343.74999998091806]),
    (3, True, "0000012233", [2.0, 1.0, -1.0],
     [0, 1, 1, 1, 0, 0, 1, 0, 1, 0],
     [0.125, 0.625, 0.875, 1.25, 1, 0.25, 0.125, 0.875, 0.875, 1.375],
     [1, 1, 1, 1, 1, 1, 0, 1, 1, 0],
     [-1.084975154361407, 0.38120748666752136, 0.5278257507704142, 0.7477531469247534, -0.571811230001282, 0.0, 1.124999437500422, -1.124999437500422, 0.2499998750000938, -0.2499998750000938]),
    (3, False, "0000012233", [2.0, 1.0, -1.0],
     [0, 1, 1, 1, 0, 0, 1, 0, 1, 0],
     [0.125, 0.625, 0.875, 1.25, 1, 0.25, 0.125, 0.875, 0.875, 1.375],
     [1, 1, 1, 1, 1, 1, 0, 1, 1, 0],
     [-1.85, 0.65, 0.9, 1.275, -0.975, 0.0, 1.125, -1.125, 0.25, -0.25]),
    (4, True, "000001111112222223333", [-1.0, 0.25, 1.5],
     [1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1],
     [1.25, 0.5, 0.75, 1.25, 1.625, 0.625, 1.875, 0.125, 1, 1.875, 0.875, 0.875, 1.25, 0.625, 1.375, 0.75, 2, 0.75, 2, 1.875, 0.625],
     [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1],
     [-0.19097276025779705, -0.2914847393408481, -0.2579807463131644, 0.34509112818514204, 0.3953471177266676, -0.5658697235288216, 0.5372698097042601, -0.02655706283709272, 0.05924267863659141, 0.5372698097042601, -0.5413555116791976, -0.38875770355717615, 0.4549292275669083, -0.4218434655620422, -0.32258617954744406, 0.38875770355717615, 0.289500417542578, -0.017686830312627917, 0.3360497759399304, -0.8312810246935121, 0.5129180790662096]),
]


@pytest.mark.parametrize("case", AUTHORS, ids=[f"seed{case[0]}-std{case[1]}" for case in AUTHORS])
def test_matches_the_authors_code(case):
    seed, norm_by_std, groups, weights, *columns, expected = case
    parts = corrgrpo_outcome_parts(dict(zip(NAMES, columns, strict=True)), torch.ones(len(groups)), list(groups),
                                   dict(zip(NAMES, weights, strict=True)), options=GdpoOptions(norm_by_std=norm_by_std))
    torch.testing.assert_close(parts.final, torch.tensor(expected, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    assert parts.estimator == "corrgrpo"


def test_anti_correlated_rewards_leave_only_eps():
    """Two responses: any two rewards that vary are perfectly correlated, here -1 (weights 1 and -0.5), so the
    correlations sum to 0 and sqrt(eps) alone divides: (-0.5 + 0.15625) / 1e-3. The authors' float32 code leaves a
    round-off of ~1.3e-7 in that sum and gives -324.93; the formula's value is -343.75."""
    parts = corrgrpo_outcome_parts({"a": [0.0, 1.0], "b": [1.375, 2.0]}, torch.ones(2), ["p", "p"],
                                   {"a": 1.0, "b": -0.5}, options=GdpoOptions(eps=1e-6))
    torch.testing.assert_close(parts.final, torch.tensor([-343.75, 343.75], dtype=torch.float64))


def reference_corrgrpo(rewards, index, weights, *, norm_by_std=True, eps=1e-6):
    """Per sample, in Python floats, from the formula in docs/estimator.md: a None is left out of its group's mean
    and counts 0 in every centred sum and product."""
    names = list(rewards)
    members = defaultdict(list)
    for row, uid in enumerate(index):
        members[uid].append(row)
    final = [0.0] * len(index)
    for rows in members.values():
        centred = {}
        for name in names:
            values = [rewards[name][row] for row in rows if rewards[name][row] is not None]
            mean = sum(values) / len(values) if values else 0.0
            constant = len(set(values)) <= 1
            centred[name] = [0.0 if rewards[name][row] is None or constant
                             else weights[name] * (rewards[name][row] - mean) for row in rows]
        total = 0.0
        for k in names:
            for m in names:
                norms = math.sqrt(sum(v * v for v in centred[k]) * sum(v * v for v in centred[m]))
                total += sum(a * b for a, b in zip(centred[k], centred[m])) / norms if norms > 0 else 0.0
        scale = math.sqrt(max(total, 0.0) + eps) if norm_by_std else 1.0
        for i, row in enumerate(rows):
            final[row] = sum(centred[name][i] for name in names) / scale
    return final


def random_batch(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, size=rng.integers(2, 6))
    index = [f"g{g}" for g, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(index)
    n = len(index)
    rewards = {
        "binary": rng.integers(0, 2, size=n).astype(float).tolist(),
        "continuous": rng.normal(size=n).tolist(),
        "sparse": [None if rng.random() < 0.4 else float(rng.integers(0, 3)) for _ in range(n)],
    }
    weights = {"binary": 1.0, "continuous": float(rng.choice([0.5, -0.3])), "sparse": 2.0}
    return rewards, index, weights


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_rewards_that_do_not_apply_are_left_out_of_their_group(seed, norm_by_std):
    rewards, index, weights = random_batch(seed)
    parts = corrgrpo_outcome_parts(rewards, torch.ones(len(index)), index, weights,
                                   options=GdpoOptions(norm_by_std=norm_by_std))
    expected = reference_corrgrpo(rewards, index, weights, norm_by_std=norm_by_std)
    torch.testing.assert_close(parts.final, torch.tensor(expected, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    applies = torch.tensor([value is not None for value in rewards["sparse"]])
    assert torch.equal(parts.applies[:, 2], applies)


def test_a_response_no_reward_applies_to_gets_zero():
    rewards = {"a": [1.0, 0.0, None, 1.0], "b": [0.5, 0.2, None, 0.1]}
    parts = corrgrpo_outcome_parts(rewards, torch.ones(4), ["p"] * 4)
    assert parts.final[2].item() == 0.0
    assert parts.rewarded.tolist() == [True, True, False, True]
    assert advantage_metrics(parts)[UNREWARDED] == 0.25
    # the others are computed as if the response were not there
    alone = corrgrpo_outcome_parts({"a": [1.0, 0.0, 1.0], "b": [0.5, 0.2, 0.1]}, torch.ones(3), ["p"] * 3)
    torch.testing.assert_close(parts.final[[0, 1, 3]], alone.final)


def test_groups_without_signal_get_exactly_zero():
    rewards = {"a": [1.0, 0.1, 0.1, 0.1, 0.7, 0.2], "b": [3.0, 2.0, 2.0, 2.0, 1.0, 0.0]}
    parts = corrgrpo_outcome_parts(rewards, torch.ones(6), ["one", "flat", "flat", "flat", "var", "var"])
    assert parts.final[:4].tolist() == [0.0, 0.0, 0.0, 0.0]  # a group of one; a group where every reward is constant
    assert parts.final[4].item() > 0 > parts.final[5].item()


def test_denominator_is_the_correlation_sum():
    """Two perfectly correlated rewards: the correlations sum to 4, so the centred sum is halved (up to eps); one
    constant reward beside them changes nothing (its row and column are 0)."""
    a = [0.0, 1.0, 1.0, 0.0]
    b = [2.0, 6.0, 6.0, 2.0]
    parts = corrgrpo_outcome_parts({"a": a, "b": b, "c": [5.0] * 4}, torch.ones(4), ["p"] * 4,
                                   options=GdpoOptions(eps=0.0 + 1e-12))
    centred = [(x - 0.5) + (y - 4.0) for x, y in zip(a, b)]
    torch.testing.assert_close(parts.final, torch.tensor(centred, dtype=torch.float64) / 2)
    # scaling one reward leaves the denominator alone: the advantage moves by the numerator only
    scaled = corrgrpo_outcome_parts({"a": a, "b": [v * 10 for v in b]}, torch.ones(4), ["p"] * 4,
                                    options=GdpoOptions(eps=1e-12))
    centred = [(x - 0.5) + 10 * (y - 4.0) for x, y in zip(a, b)]
    torch.testing.assert_close(scaled.final, torch.tensor(centred, dtype=torch.float64) / 2)


def test_huge_rewards_do_not_overflow():
    a = [1e300, 0.0, 2e300, 0.0]
    b = [1.0, 0.0, 0.0, 1.0]
    parts = corrgrpo_outcome_parts({"a": a, "b": b}, torch.ones(4), ["p"] * 4, {"a": 1e-300, "b": 1.0})
    small = corrgrpo_outcome_parts({"a": [1.0, 0.0, 2.0, 0.0], "b": b}, torch.ones(4), ["p"] * 4)
    torch.testing.assert_close(parts.final, small.final)


def test_conditions_gate_the_scores_first():
    rewards = {"correct": [1.0, 0.0, 1.0, 0.0, 1.0], "short": [0.9, 0.8, 0.2, 0.4, 0.5]}
    condition = Condition(reward="short", given="correct", at_least=1)
    parts = corrgrpo_outcome_parts(rewards, torch.ones(5), ["p"] * 5, options=GdpoOptions(conditions=[condition]))
    gated = {"correct": rewards["correct"], "short": [0.9, 0.0, 0.2, 0.0, 0.5]}
    expected = reference_corrgrpo(gated, ["p"] * 5, {"correct": 1.0, "short": 1.0})
    torch.testing.assert_close(parts.final, torch.tensor(expected, dtype=torch.float64))
    assert parts.raw_scores[1, 1].item() == 0.8 and parts.scores[1, 1].item() == 0.0


def test_eps_must_be_above_zero():
    with pytest.raises(ValueError, match="CorrGRPO needs eps above 0"):
        corrgrpo_outcome_parts({"a": [1.0, 0.0]}, torch.ones(2), ["p", "p"], options=GdpoOptions(eps=0.0))
    # without the division it is not read
    assert corrgrpo_outcome_parts({"a": [1.0, 0.0]}, torch.ones(2), ["p", "p"],
                                  options=GdpoOptions(eps=0.0, norm_by_std=False)).final.tolist() == [0.5, -0.5]


def test_parts_add_up_for_the_metrics():
    rewards, index, weights = random_batch(3)
    parts = corrgrpo_outcome_parts(rewards, torch.ones(len(index)), index, weights)
    torch.testing.assert_close((parts.normalized * parts.weights).sum(dim=1), parts.final)
    assert (parts.batch_mean, parts.batch_scale) == (0.0, 1.0)
    metrics = advantage_metrics(parts)
    assert metrics["gdpo/sparse/applies_frac"] < 1
    # not GDPO's numbers on the same batch
    assert not torch.allclose(parts.final, gdpo_outcome_parts(rewards, torch.ones(len(index)), index, weights).final)


def test_token_level_rewards_masks_and_sessions():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0]])
    rewards = {"a": torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0]),
               "b": torch.tensor([[0.5, 0.5, 9.0], [0.2, 9.0, 9.0], [0.1, 0.1, 0.1], [0.0, 0.0, 0.0], [7.0, 0, 0]])}
    index = np.array(["p", "p", "q", "q", "p"], dtype=object)
    advantages = corrgrpo_advantage(rewards, mask, index)
    outcome = corrgrpo_outcome_parts({"a": [1.0, 0.0, 1.0, 0.0, 0.0], "b": [1.0, 0.2, 0.3, 0.0, 7.0]},
                                     mask.sum(dim=1), index)
    torch.testing.assert_close(advantages, (outcome.final.to(torch.float32)[:, None] * mask))
    # sessions: rows 0 and 4 are one session whose last output is row 4; the session's advantage goes to both
    sessions = Sessions(final_rows=[4, 1, 2, 3], row_session=torch.tensor([0, 1, 2, 3, 0]))
    parts = corrgrpo_parts(rewards, mask, index, sessions=sessions)
    last = corrgrpo_outcome_parts({"a": [0.0, 0.0, 1.0, 0.0], "b": [7.0, 0.2, 0.3, 0.0]}, mask.sum(dim=1)[[4, 1, 2, 3]],
                                  index[[4, 1, 2, 3]])
    assert parts.advantages[0, 0].item() == pytest.approx(last.final[0].item())
    assert parts.advantages[4, 0].item() == pytest.approx(last.final[0].item())


def test_a_corrgrpo_record_is_recomputed_as_corrgrpo(tmp_path):
    from gdpo_verl.records.steps import RecordWriter, load_steps, step_parts

    rewards, index, weights = random_batch(5)
    parts = corrgrpo_outcome_parts(rewards, torch.ones(len(index)), index, weights)
    RecordWriter().append(tmp_path, parts, index, step=9)
    (record,) = load_steps(tmp_path)
    assert record.estimator == "corrgrpo"
    torch.testing.assert_close(step_parts(record).final, parts.final)
    as_gdpo = step_parts(record, {"estimator": "gdpo"})
    assert as_gdpo.estimator == "gdpo" and as_gdpo.options.batch_norm == "token"
    with pytest.raises(ValueError, match="baseline=leave_one_out: GDPO's options, and step 9 is computed with CorrGRPO"):
        step_parts(record, {"baseline": "leave_one_out"})
