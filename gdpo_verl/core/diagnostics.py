"""Per-batch diagnostics of a GDPO computation: what each reward contributed and what collapsed.

Everything is read from ``GdpoParts``, the values the estimator already computed; nothing is normalized
again. All work is on ``(B,)`` and ``(B, K)`` tensors, never ``(B, T)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import torch

from gdpo_verl.core.advantage import GdpoParts, group_ids, group_normalize, group_varies
from gdpo_verl.core.collapse import COLLAPSE_DECIMALS

# Every metric's name, here only. Per reward: gdpo/<reward>/<field>.
PREFIX = "gdpo/"
MEAN, RAW_MEAN, ZERO_VAR, CONTRIBUTION = "mean", "raw_mean", "zero_var_group_frac", "adv_contribution_std"
APPLIES, WEIGHT = "applies_frac", "weight"
CONFLICT_MASKED = PREFIX + "conflict_masked_frac"
UNREWARDED = PREFIX + "unrewarded_frac"
CANCELLED = PREFIX + "cancelled_group_frac"
SIGN_CONFLICT = PREFIX + "sign_conflict_frac"
DISTINCT = PREFIX + "distinct_adv_per_group"
GRPO_DISTINCT = PREFIX + "grpo_distinct_adv_per_group"
COLLAPSED = PREFIX + "collapsed_group_frac"
GRPO_COLLAPSED = PREFIX + "grpo_collapsed_group_frac"

# A group counts as cancelled when its summed advantage is below this fraction of its largest term.
CANCEL_RTOL = 1e-9


def advantage_metrics(parts: GdpoParts) -> dict[str, float]:
    """Metrics logged under ``gdpo/`` every step.

    Only responses with at least one valid token count (verl pads V1 batches with empty responses).

    Returns:
        ``gdpo/<reward>/mean``: mean of the reward's outcome score (after its condition, if it has one) over the
        responses it applies to (0 when none), and ``gdpo/<reward>/raw_mean`` the mean before, for a conditioned
        reward.
        ``gdpo/<reward>/applies_frac``: fraction of responses the reward applies to (1 unless some ``compute_score``
        returned None for it).
        ``gdpo/<reward>/weight``: its weight in force this step (a schedule's value at the step, times SAW's).
        ``gdpo/<reward>/zero_var_group_frac``: fraction of groups where that reward is constant (among the
        responses it applies to; a group where it applies to none counts as constant).
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
        ``gdpo/conflict_masked_frac`` (with ``conflict``): fraction of responses masked for conflicting rewards;
        cancelled groups are counted before the masking, distinct and collapsed advantages among the kept responses.
        ``gdpo/unrewarded_frac``: fraction of responses no reward applies to (advantage 0, out of step 3's
        statistics); distinct and collapsed advantages are counted without them.
    """
    keep = parts.valid_tokens > 0
    if not bool(keep.all()):
        parts = _select(parts, keep)
    if parts.scores.shape[0] == 0:
        return {}
    group, num_groups = parts.group, parts.num_groups
    contributions = parts.normalized * parts.weights

    metrics: dict[str, float] = {}
    applies = parts.applies
    present = torch.ones_like(parts.scores) if applies is None else applies.to(torch.float64)
    count = present.sum(dim=0)
    means = ((parts.scores * present).sum(dim=0) / count.clamp(min=1)).tolist()
    raw_means = ((parts.raw_scores * present).sum(dim=0) / count.clamp(min=1)).tolist()
    applies_frac = (count / parts.scores.shape[0]).tolist()
    conditioned = {condition.reward for condition in parts.conditions}
    varies = group_varies(parts.scores, group, num_groups, applies)
    zero_var = (~varies).to(torch.float64).mean(dim=0).tolist()
    contribution_std = (contributions / parts.batch_scale).std(dim=0, unbiased=False).tolist()
    weights = parts.weights.tolist()
    for k, name in enumerate(parts.names):
        metrics[reward_metric(name, MEAN)] = means[k]
        if name in conditioned:
            metrics[reward_metric(name, RAW_MEAN)] = raw_means[k]
        metrics[reward_metric(name, APPLIES)] = applies_frac[k]
        metrics[reward_metric(name, WEIGHT)] = weights[k]
        metrics[reward_metric(name, ZERO_VAR)] = zero_var[k]
        metrics[reward_metric(name, CONTRIBUTION)] = contribution_std[k]
    if parts.options.conflict != "none" and parts.keep is not None:
        metrics[CONFLICT_MASKED] = (~parts.keep).to(torch.float64).mean().item()
    rewarded = parts.rewarded
    metrics[UNREWARDED] = 0.0 if rewarded is None else (~rewarded).to(torch.float64).mean().item()

    any_varies = varies.any(dim=1)
    largest_term = _group_abs_max(contributions.abs().amax(dim=1), group, num_groups)
    largest_sum = _group_abs_max(contributions.sum(dim=1), group, num_groups)  # before any conflict masking
    cancelled = any_varies & (largest_sum <= CANCEL_RTOL * largest_term)
    metrics[CANCELLED] = cancelled.to(torch.float64).mean().item()
    conflict = (parts.normalized > 0).any(dim=1) & (parts.normalized < 0).any(dim=1)
    metrics[SIGN_CONFLICT] = conflict.to(torch.float64).mean().item()

    # Each estimator's count is taken on the advantage it trains on, because "the same advantage" is a rounding at a
    # fixed scale: GDPO's final (batch-normalized) advantage, which does not change with the scale of the weights, and
    # GRPO's advantage on the weighted summed reward, normalized as GDPO normalizes each reward (not the sum itself:
    # sums 1e-5 apart are apart by more than that once divided by a small group std, and by less after a large one).
    options = parts.options
    grpo = group_normalize((parts.scores @ parts.weights).unsqueeze(1), group, num_groups,
                           norm_by_std=options.norm_by_std, eps=options.eps, baseline="mean")[:, 0]
    # A reward that does not apply is a value of its own (its score there is 0, like a real 0).
    rows = parts.scores if applies is None else torch.cat([parts.scores, applies.to(torch.float64)], dim=1)
    row_ids = _row_ids(rows).to(torch.float64)
    # Responses GD2PO masked, and those no reward applies to (advantage 0), are left out of the counts: their 0 is no
    # advantage they earned.
    kept = parts.keep if parts.keep is not None else None
    if rewarded is not None:
        kept = rewarded if kept is None else kept & rewarded
    kept = kept if kept is not None and not bool(kept.all()) else None
    if kept is not None:
        row_ids, group, grpo, final = row_ids[kept], group[kept], grpo[kept], parts.final[kept]
    else:
        final = parts.final
    combinations = distinct_counts(row_ids, group, num_groups)
    for distinct, collapsed, values in (
        (DISTINCT, COLLAPSED, final),
        (GRPO_DISTINCT, GRPO_COLLAPSED, grpo),
    ):
        counts = distinct_counts(values, group, num_groups)
        metrics[distinct] = counts.sum().item() / num_groups
        metrics[collapsed] = (counts < combinations).to(torch.float64).mean().item()
    return metrics


def reward_metric(reward: str, field: str) -> str:
    """``gdpo/<reward>/<field>``."""
    return f"{PREFIX}{reward}/{field}"


def reward_names(metric_names: Iterable[str]) -> list[str]:
    """The rewards that have a ``gdpo/<reward>/mean`` among ``metric_names``, sorted."""
    return sorted({name.split("/")[1] for name in metric_names
                   if name.startswith(PREFIX) and name.count("/") == 2 and name.endswith("/" + MEAN)})


def distinct_per_group(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> float:
    """Mean over groups of the number of distinct ``values`` ``(B,)`` (rounded) inside each group."""
    return distinct_counts(values, group, num_groups).sum().item() / num_groups


def distinct_counts(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """``(num_groups,)`` long: the number of distinct ``values`` ``(B,)`` in each group, rounded to
    ``COLLAPSE_DECIMALS`` as the paper's count is (two advantages closer than that are the same advantage).

    Values above ~1.8e304 in magnitude overflow when scaled for rounding; they are whole numbers already and
    are compared as they are (an infinite value counts as one value, each NaN as its own).
    """
    rounded = torch.round(values * 10**COLLAPSE_DECIMALS)
    scaled = torch.isfinite(rounded)
    if values.shape[0] and bool(scaled.all()):
        low, high = rounded.min().item(), rounded.max().item()
        span = int(high - low + 1)
        if span * num_groups < 2**62:
            # One int64 key per (group, value), then a flat unique (torch.unique(dim=...) is ~50x slower).
            keys = group * span + (rounded - low).to(torch.int64)
            return torch.bincount(torch.unique(keys) // span, minlength=num_groups)
    # Values too spread out to pack next to the group id, or too large to scale: pack the group with the
    # value's rank, ranking the scaled values and the unscaled ones apart (1e301 scaled is not 1e305).
    rank = torch.empty(values.shape[0], dtype=torch.long, device=values.device)
    scaled_uniques, rank[scaled] = torch.unique(rounded[scaled], return_inverse=True)
    rank[~scaled] = torch.unique(values[~scaled], return_inverse=True)[1] + scaled_uniques.numel()
    span = max(values.shape[0], 1)
    keys = group * span + rank
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


def _group_abs_max(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    return values.new_zeros(num_groups).scatter_reduce_(0, group, values.abs(), "amax")


def _select(parts: GdpoParts, keep: torch.Tensor) -> GdpoParts:
    """The responses in ``keep``; ``advantages`` ``(B, T)`` is left whole (metrics never read it)."""
    group, num_groups = group_ids(parts.group[keep], int(keep.sum()), parts.group.device)
    return replace(
        parts,
        raw_scores=parts.raw_scores[keep],
        scores=parts.scores[keep],
        normalized=parts.normalized[keep],
        summed=parts.summed[keep],
        final=parts.final[keep],
        group=group,
        num_groups=num_groups,
        valid_tokens=parts.valid_tokens[keep],
        applies=None if parts.applies is None else parts.applies[keep],
        keep=None if parts.keep is None else parts.keep[keep],
        rewarded=None if parts.rewarded is None else parts.rewarded[keep],
    )


