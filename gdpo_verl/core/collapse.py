"""The paper's count of distinct advantage groups (Fig. 2/3): how many different advantage vectors GRPO,
GRPO without std and GDPO can give a group of G rollouts with K binary rewards."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from gdpo_verl.core.advantage import group_normalize

COLLAPSE_METHODS = ("grpo", "grpo_no_std", "gdpo")

# Two advantages are the same advantage when they agree to this many decimals: the paper rounds advantage vectors
# to 1e-4 before comparing them, and the step's gdpo/ metrics count distinct advantages the same way.
COLLAPSE_DECIMALS = 4

# Rewards per batch of the enumeration (multisets x rollouts x rewards): keeps each batch's tensors to a few
# tens of MB however large the groups; the distinct vectors kept are bounded by the callers (the CLI refuses
# more than 5e7 values).
COLLAPSE_CHUNK_VALUES = 1 << 22


def multiset_count(num_types: int, size: int) -> int:
    """Number of multisets of ``size`` items drawn from ``num_types`` kinds."""
    return math.comb(num_types + size - 1, size)


def distinct_advantage_groups(num_rewards: int, num_rollouts: int) -> dict[str, int]:
    """The paper's distinct-advantage-group count for K binary rewards and groups of G rollouts.

    Every multiset of G rollouts (each a vector of K binary rewards) is one group; each method's
    advantage vector for the group is computed with the estimator's own ``group_normalize`` (population
    std, no eps; the paper's worked example uses the unbiased std, which for a fixed G only scales every
    vector by sqrt(G / (G - 1)) and leaves the count unchanged), rounded to 1e-4 as in the paper and sorted;
    distinct vectors are counted, the all-zero vector included. The batch step is left out: it does not change the count.

    Returns:
        ``{"grpo": n, "grpo_no_std": n, "gdpo": n}``.
    """
    if num_rewards < 1 or num_rollouts < 1:
        raise ValueError(f"rewards and rollouts must be at least 1; got {num_rewards} and {num_rollouts}.")
    num_types = 2**num_rewards
    bits = torch.tensor([[(kind >> k) & 1 for k in range(num_rewards)] for kind in range(num_types)], dtype=torch.float64)
    seen: dict[str, np.ndarray | None] = dict.fromkeys(COLLAPSE_METHODS)
    multisets = itertools.combinations_with_replacement(range(num_types), num_rollouts)
    chunk_size = max(1, COLLAPSE_CHUNK_VALUES // (num_rollouts * num_rewards))
    while True:
        chunk = np.fromiter(
            itertools.chain.from_iterable(itertools.islice(multisets, chunk_size)), dtype=np.int64
        ).reshape(-1, num_rollouts)
        if chunk.shape[0] == 0:
            break
        for method, vectors in _group_advantages(bits[torch.from_numpy(chunk)]).items():
            previous = seen[method]
            stacked = vectors if previous is None else np.concatenate([previous, vectors])
            seen[method] = np.unique(stacked, axis=0)
    return {method: int(rows.shape[0]) for method, rows in seen.items()}


def _group_advantages(rewards: torch.Tensor) -> dict[str, np.ndarray]:
    """``rewards`` ``(N, G, K)`` -> per method, the ``(N, G)`` sorted, rounded advantage vectors."""
    count, size, num_rewards = rewards.shape
    flat = rewards.reshape(count * size, num_rewards)
    group = torch.arange(count).repeat_interleave(size)
    summed = flat.sum(dim=1, keepdim=True)
    advantages = {
        "grpo": group_normalize(summed, group, count, norm_by_std=True, eps=0.0, baseline="mean", ddof=0)[:, 0],
        "grpo_no_std": group_normalize(summed, group, count, norm_by_std=False, eps=0.0, baseline="mean",
                                       ddof=0)[:, 0],
        "gdpo": group_normalize(flat, group, count, norm_by_std=True, eps=0.0, baseline="mean", ddof=0).sum(dim=1),
    }
    out = {}
    for method, values in advantages.items():
        rounded = torch.round(values.reshape(count, size), decimals=COLLAPSE_DECIMALS) + 0.0
        out[method] = np.unique(torch.sort(rounded, dim=1).values.numpy(), axis=0)
    return out
