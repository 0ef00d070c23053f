"""Per-batch diagnostics of a GDPO computation: what each reward contributed and what collapsed.

Everything is read from ``GdpoParts``, the values the estimator already computed; nothing is normalized
again. All work is on ``(B,)`` and ``(B, K)`` tensors, never ``(B, T)``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import torch

from gdpo_verl.advantage import GdpoParts, group_ids, group_normalize, group_varies

PREFIX = "gdpo/"

# Advantages are compared after rounding to this many decimals (z-scores are of order 1).
DISTINCT_DECIMALS = 6

# A group counts as cancelled when its summed advantage is below this fraction of its largest term.
CANCEL_RTOL = 1e-9


def advantage_metrics(parts: GdpoParts) -> dict[str, float]:
    """Metrics logged under ``gdpo/`` every step.

    Only responses with at least one valid token count (verl pads V1 batches with empty responses).

    Returns:
        ``gdpo/<reward>/mean``: raw mean of the reward's outcome score.
        ``gdpo/<reward>/zero_var_group_frac``: fraction of groups where that reward is constant.
        ``gdpo/<reward>/adv_contribution_std``: std over responses of ``w_k * A_k`` scaled like the final
        advantage (divided by the batch-normalization scale), i.e. how much the reward moves the advantage.
        ``gdpo/cancelled_group_frac``: fraction of groups where some reward varies but the weighted sum of
        the normalized rewards is zero for every response (GDPO gives the group no signal).
        ``gdpo/sign_conflict_frac``: fraction of responses where one reward's normalized advantage is
        positive and another's negative (the rewards pull that response in opposite directions).
        ``gdpo/distinct_adv_per_group``: distinct advantage values per group under GDPO, and
        ``gdpo/grpo_distinct_adv_per_group`` under GRPO on the weighted summed reward, same batch.
        ``gdpo/collapsed_group_frac``: fraction of groups where two responses with different reward vectors
        get the same GDPO advantage, and ``gdpo/grpo_collapsed_group_frac`` the same under GRPO on the
        weighted summed reward (the paper's advantage collapse, counted in the batch).
    """
    keep = parts.valid_tokens > 0
    if not bool(keep.all()):
        parts = _select(parts, keep)
    if parts.scores.shape[0] == 0:
        return {}
    group, num_groups = parts.group, parts.num_groups
    contributions = parts.normalized * parts.weights

    metrics: dict[str, float] = {}
    means = parts.scores.mean(dim=0).tolist()
    varies = group_varies(parts.scores, group, num_groups)
    zero_var = (~varies).to(torch.float64).mean(dim=0).tolist()
    scale = _batch_scale(parts)
    contribution_std = (contributions / scale).std(dim=0, unbiased=False).tolist()
    for k, name in enumerate(parts.names):
        metrics[f"{PREFIX}{name}/mean"] = means[k]
        metrics[f"{PREFIX}{name}/zero_var_group_frac"] = zero_var[k]
        metrics[f"{PREFIX}{name}/adv_contribution_std"] = contribution_std[k]

    any_varies = varies.any(dim=1)
    largest_term = _group_abs_max(contributions.abs().amax(dim=1), group, num_groups)
    largest_sum = _group_abs_max(parts.summed, group, num_groups)
    cancelled = any_varies & (largest_sum <= CANCEL_RTOL * largest_term)
    metrics[f"{PREFIX}cancelled_group_frac"] = cancelled.to(torch.float64).mean().item()
    conflict = (parts.normalized > 0).any(dim=1) & (parts.normalized < 0).any(dim=1)
    metrics[f"{PREFIX}sign_conflict_frac"] = conflict.to(torch.float64).mean().item()

    # Within a group GRPO's advantage is an increasing affine map of the summed reward (or 0 for all when
    # the sum is constant), so it has exactly as many distinct values as the summed reward itself.
    grpo_summed = parts.scores @ parts.weights
    combinations = distinct_counts(_row_ids(parts.scores).to(torch.float64), group, num_groups)
    for name, values in (("", parts.summed), ("grpo_", grpo_summed)):
        counts = distinct_counts(values, group, num_groups)
        metrics[f"{PREFIX}{name}distinct_adv_per_group"] = counts.sum().item() / num_groups
        metrics[f"{PREFIX}{name}collapsed_group_frac"] = (counts < combinations).to(torch.float64).mean().item()
    return metrics


def distinct_per_group(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> float:
    """Mean over groups of the number of distinct ``values`` ``(B,)`` (rounded) inside each group."""
    return distinct_counts(values, group, num_groups).sum().item() / num_groups


def distinct_counts(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """``(num_groups,)`` long: the number of distinct ``values`` ``(B,)`` (rounded) in each group."""
    rounded = torch.round(values * 10**DISTINCT_DECIMALS)
    low, high = rounded.min().item(), rounded.max().item()
    span = int(high - low + 1)
    if span * num_groups < 2**62:
        # One int64 key per (group, value), then a flat unique (torch.unique(dim=...) is ~50x slower).
        keys = group * span + (rounded - low).to(torch.int64)
    else:  # values too spread out to pack next to the group id: pack the group with the value's rank
        span = values.shape[0]
        keys = group * span + torch.unique(rounded, return_inverse=True)[1]
    return torch.bincount(torch.unique(keys) // span, minlength=num_groups)


def _row_ids(values: torch.Tensor) -> torch.Tensor:
    """``(B,)`` ids equal exactly where the rows of ``values`` ``(B, K)`` are equal.

    Column by column, renumbered after each so ids stay below B (``torch.unique(dim=0)`` is ~10x slower).
    """
    ids = torch.zeros(values.shape[0], dtype=torch.long, device=values.device)
    for column in values.T:
        column_ids = torch.unique(column, return_inverse=True)[1]
        ids = torch.unique(ids * (int(column_ids.max()) + 1) + column_ids, return_inverse=True)[1]
    return ids


def _batch_scale(parts: GdpoParts) -> float:
    """The factor step 3 divided by: final = (summed - mean) / scale; 1.0 when nothing varies."""
    centered_summed = parts.summed - parts.summed.mean()
    centered_final = parts.final - parts.final.mean()
    peak = int(centered_summed.abs().argmax())
    if centered_final[peak] == 0:
        return 1.0
    return float(centered_summed[peak] / centered_final[peak])


def _group_abs_max(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    return values.new_zeros(num_groups).scatter_reduce_(0, group, values.abs(), "amax")


def _select(parts: GdpoParts, keep: torch.Tensor) -> GdpoParts:
    """The responses in ``keep``; ``advantages`` ``(B, T)`` is left whole (metrics never read it)."""
    group, num_groups = group_ids(parts.group[keep], int(keep.sum()), parts.group.device)
    return replace(
        parts,
        scores=parts.scores[keep],
        normalized=parts.normalized[keep],
        summed=parts.summed[keep],
        final=parts.final[keep],
        group=group,
        num_groups=num_groups,
        valid_tokens=parts.valid_tokens[keep],
    )


# --------------------------------------------------------------------------- the paper's counting (Fig. 2/3)

COLLAPSE_METHODS = ("grpo", "grpo_no_std", "gdpo")

# The paper rounds advantage vectors to 1e-4 before comparing them.
COLLAPSE_DECIMALS = 4

# Multisets per batch of the enumeration: keeps memory to a few hundred MB however many groups there are.
COLLAPSE_CHUNK = 1 << 18


def multiset_count(num_types: int, size: int) -> int:
    """Number of multisets of ``size`` items drawn from ``num_types`` kinds."""
    return math.comb(num_types + size - 1, size)


def distinct_advantage_groups(num_rewards: int, num_rollouts: int) -> dict[str, int]:
    """The paper's distinct-advantage-group count for K binary rewards and groups of G rollouts.

    Every multiset of G rollouts (each a vector of K binary rewards) is one group; each method's
    advantage vector for the group is computed with the estimator's own ``group_normalize`` (population
    std, no eps, as in the paper), rounded to 1e-4 and sorted; distinct vectors are counted, the all-zero
    vector included. The batch step is left out: it does not change the count.

    Returns:
        ``{"grpo": n, "grpo_no_std": n, "gdpo": n}``.
    """
    if num_rewards < 1 or num_rollouts < 1:
        raise ValueError(f"rewards and rollouts must be at least 1; got {num_rewards} and {num_rollouts}.")
    num_types = 2**num_rewards
    bits = torch.tensor([[(kind >> k) & 1 for k in range(num_rewards)] for kind in range(num_types)], dtype=torch.float64)
    seen: dict[str, np.ndarray | None] = dict.fromkeys(COLLAPSE_METHODS)
    multisets = itertools.combinations_with_replacement(range(num_types), num_rollouts)
    while True:
        chunk = np.fromiter(
            itertools.chain.from_iterable(itertools.islice(multisets, COLLAPSE_CHUNK)), dtype=np.int64
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
        "grpo": group_normalize(summed, group, count, eps=0.0, ddof=0)[:, 0],
        "grpo_no_std": group_normalize(summed, group, count, norm_by_std=False, eps=0.0, ddof=0)[:, 0],
        "gdpo": group_normalize(flat, group, count, eps=0.0, ddof=0).sum(dim=1),
    }
    out = {}
    for method, values in advantages.items():
        rounded = torch.round(values.reshape(count, size), decimals=COLLAPSE_DECIMALS) + 0.0
        out[method] = np.unique(torch.sort(rounded, dim=1).values.numpy(), axis=0)
    return out
