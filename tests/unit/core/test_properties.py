"""Properties the math fixes, checked on generated batches (hypothesis): each transformation of the input
leaves GDPO's advantages as the formula says it must.

- permuting the rows permutes the advantages;
- renaming the groups changes nothing;
- adding a constant to a reward changes nothing (step 1 centres each group);
- scaling a reward by a positive factor changes nothing when step 1 divides by the std (eps set to 0, so the
  identity is exact up to rounding), even by 1e300, where the squares of the deviations overflow float64: steps 1
  and 2 give the same values, so step 3 (a function of step 2's values alone) does too;
- a reward given twice with half its weight each is the reward given once.
"""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gdpo_verl.core.advantage import BATCH_NORMS, gdpo_outcome_parts
from gdpo_verl.core.options import GdpoOptions

EXACT = {"rtol": 1e-9, "atol": 1e-9}


@st.composite
def batches(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=6).filter(lambda sizes: sum(sizes) >= 2))  # one row: refused
    rows = sum(sizes)
    count = draw(st.integers(1, 3))
    values = st.lists(st.integers(-3, 3).map(float), min_size=rows, max_size=rows)
    rewards = {f"r{k}": draw(values) for k in range(count)}
    weights = {name: draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])) for name in rewards}
    uids = [f"group-{g}" for g, size in enumerate(sizes) for _ in range(size)]
    lengths = draw(st.lists(st.integers(1, 5).map(float), min_size=rows, max_size=rows))
    return {"rewards": rewards, "weights": weights, "uids": uids, "lengths": lengths,
            "batch_norm": draw(st.sampled_from(BATCH_NORMS)), "norm_by_std": draw(st.booleans())}


def final(batch, *, eps=1e-6, **changes):
    return computed(batch, eps=eps, **changes).final.numpy()


def computed(batch, *, eps=1e-6, **changes):
    batch = {**batch, **changes}
    return gdpo_outcome_parts(
        {name: torch.tensor(values, dtype=torch.float64) for name, values in batch["rewards"].items()},
        torch.tensor(batch["lengths"], dtype=torch.float64),
        np.array(batch["uids"], dtype=object),
        batch["weights"],
        options=GdpoOptions(norm_by_std=batch["norm_by_std"], batch_norm=batch["batch_norm"], eps=eps),
    )


@settings(max_examples=200, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_permuting_the_rows_permutes_the_advantages(batch, generator):
    order = list(range(len(batch["uids"])))
    generator.shuffle(order)
    permuted = {
        "rewards": {name: [values[i] for i in order] for name, values in batch["rewards"].items()},
        "uids": [batch["uids"][i] for i in order],
        "lengths": [batch["lengths"][i] for i in order],
    }
    np.testing.assert_allclose(final(batch, **permuted), final(batch)[order], **EXACT)


@settings(max_examples=200, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_renaming_the_groups_changes_nothing(batch, generator):
    names = sorted(set(batch["uids"]))
    renamed = dict(zip(names, generator.sample(range(10**6), len(names)), strict=True))
    np.testing.assert_allclose(final(batch, uids=[renamed[uid] for uid in batch["uids"]]), final(batch), **EXACT)


@settings(max_examples=200, deadline=None)
@given(batches(), st.floats(-1e3, 1e3))
def test_adding_a_constant_to_a_reward_changes_nothing(batch, constant):
    name = next(iter(batch["rewards"]))
    shifted = {**batch["rewards"], name: [value + constant for value in batch["rewards"][name]]}
    np.testing.assert_allclose(final(batch, rewards=shifted), final(batch), rtol=1e-6, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from([1e-3, 0.5, 3.0, 1e6, 1e300]))
def test_scaling_a_reward_by_a_positive_factor_changes_nothing_when_divided_by_its_std(batch, factor):
    batch = {**batch, "norm_by_std": True}
    name = next(iter(batch["rewards"]))
    scaled = {**batch["rewards"], name: [value * factor for value in batch["rewards"][name]]}
    # Compared before step 3: where the weighted sum cancels to 0 up to rounding (r0 = [0, 1], r1 = [0, -1], equal
    # weights), whitening with eps 0 blows the 1e-16 residue up to +-1, and which way depends on the rounding.
    ours, theirs = computed(batch, rewards=scaled, eps=0.0), computed(batch, eps=0.0)
    np.testing.assert_allclose(ours.normalized.numpy(), theirs.normalized.numpy(), rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(ours.summed.numpy(), theirs.summed.numpy(), rtol=1e-7, atol=1e-7)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_a_reward_given_twice_with_half_its_weight_is_the_reward_given_once(batch):
    name = next(iter(batch["rewards"]))
    rewards = {**batch["rewards"], f"{name}-copy": batch["rewards"][name]}
    weights = {**batch["weights"], name: batch["weights"][name] / 2, f"{name}-copy": batch["weights"][name] / 2}
    np.testing.assert_allclose(final(batch, rewards=rewards, weights=weights), final(batch), **EXACT)
