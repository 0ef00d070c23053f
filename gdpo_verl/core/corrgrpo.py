"""CorrGRPO (arXiv 2609.36820; HKUST-KnowComp/CorrGRPO's verl fork, estimator ``grpo_covariance_coefficient``).

For prompt group g with weighted reward components ``R_ik = w_k * r_ik`` (response i, reward k):

    C_ik   = R_ik - mean_{j in g} R_jk                                   centred per reward, per group
    rho_kl = Pearson correlation of C_k and C_l over the group          rows/columns of a constant reward are 0
    A_i    = sum_k C_ik / sqrt(max(sum_kl rho_kl, 0) + eps)             no batch step

The group-centred sum is GRPO's numerator on the weighted sum; the denominator is the std that sum would have if
every reward had unit variance, so the rewards' correlation, not their scales, decides how much a group is shrunk
(K perfectly correlated rewards: sqrt(K^2); K uncorrelated ones: sqrt(K)). ``norm_by_std=False`` (verl's
``norm_adv_by_std_in_grpo``) returns the centred sum, as the authors' code does.

A reward that does not apply to a response (``applies``) is left out of its group's statistics for that response,
as GDPO leaves it: the group's mean is taken over the responses it applies to, and its centred value there is 0
(it adds nothing to the numerator, nor to any sum of products in the correlation, which is then the cosine of the
zero-filled centred columns; with every reward applying, exactly the Pearson correlation). A response no reward
applies to gets 0. Conditions (``Condition``) gate the scores first, as in GDPO.

The result is a ``GdpoParts`` (``estimator="corrgrpo"``), so the ``gdpo/`` metrics, records and trainer steps read
it as they read GDPO's: ``normalized`` holds ``C_ik / (w_k * D_g)`` (``D_g`` the group's denominator; ``C_ik / w_k``
with ``norm_by_std=False``), ``weights`` the ``w_k``, ``summed`` and ``final`` the advantage; ``batch_mean`` 0 and
``batch_scale`` 1. Torch and numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from gdpo_verl.core.advantage import GdpoParts, _check_finite, gdpo_parts, group_ids, group_normalize
from gdpo_verl.core.conditions import applies_under_conditions, apply_conditions, check_conditions
from gdpo_verl.core.inputs import outcome_inputs, weight_vector_for
from gdpo_verl.core.options import DEFAULTS, GDPO_ONLY, GdpoOptions, as_options

ESTIMATOR = "corrgrpo"
# The name the authors' verl fork registers it under (``algorithm.adv_estimator=grpo_covariance_coefficient``).
AUTHORS_NAME = "grpo_covariance_coefficient"


def corrgrpo_outcome_parts(
    scores: Mapping[str, Any],
    valid_tokens: Any,
    index: Any,
    weights: Mapping[str, float] | None = None,
    options: GdpoOptions = GdpoOptions(),
    *,
    applies: Mapping[str, Any] | None = None,
) -> GdpoParts:
    """CorrGRPO on one outcome score per response and reward (``advantages`` is None).

    Args:
        scores, valid_tokens, index, weights, applies: as for ``gdpo_outcome_parts`` (a None score is a reward that
            does not apply to that response).
        options: ``GdpoOptions``; CorrGRPO reads ``conditions`` (as GDPO does), ``norm_by_std`` (divide each
            group's centred sum by ``sqrt(max(sum of the correlation matrix, 0) + eps)``; False returns the centred
            sum) and ``eps`` (added under the square root: the authors' ``epsilon``). The options of GDPO's own
            steps (``options.GDPO_ONLY``) must be at their defaults. The result's ``options`` say
            ``batch_norm="none"``: CorrGRPO has no batch step.

    Returns:
        ``GdpoParts`` with ``estimator="corrgrpo"``; ``final`` ``(B,)`` float64 is the advantage. Guarantees: a group
        of one, a group where every reward is constant, and a response no reward applies to get exactly 0; the
        denominator does not change when a reward's scores or weight are multiplied by a positive factor
        (correlations are scale-free); with every reward applying, the advantages of a group sum to 0.

    Raises:
        ValueError: on the inputs ``gdpo_outcome_parts`` refuses, on a GDPO-only option away from its default, and
            on ``eps`` not above 0 with ``norm_by_std`` (where the correlations sum to 0, as for two rewards that
            always move in opposite directions, eps is all that keeps the denominator from 0).
    """
    names, raw_scores, valid_tokens, applied = outcome_inputs(scores, valid_tokens, applies)
    weight = weight_vector_for(names, weights).to(raw_scores.device)
    options = as_options(options)
    changed = [f"{name}={getattr(options, name)!r}" for name in GDPO_ONLY if getattr(options, name) != DEFAULTS[name]]
    if changed:
        raise ValueError(f"{', '.join(changed)}: options of GDPO's own steps, which CorrGRPO has no place for. Leave "
                         "them at their defaults, or compute GDPO (gdpo_outcome_parts).")
    if options.norm_by_std and options.eps <= 0:
        raise ValueError(f"CorrGRPO needs eps above 0 (it is added under the square root, and the rewards' "
                         f"correlations can sum to 0); got {options.eps!r}. Use the default, {DEFAULTS['eps']:g}.")
    options = replace(options, conditions=check_conditions(names, options.conditions), batch_norm="none")
    group, num_groups = group_ids(index, raw_scores.shape[0], raw_scores.device)

    rewards = apply_conditions(raw_scores, names, options.conditions, applied)
    applied = applies_under_conditions(applied, names, options.conditions)
    # C / w: centred per reward and group among the responses it applies to; exactly 0 where it does not apply and
    # where it is constant in the group (round-off in the mean of equal values left out).
    centred = group_normalize(rewards, group, num_groups, norm_by_std=False, eps=options.eps, baseline="mean",
                              applies=applied)
    weighted = centred * weight
    if options.norm_by_std:
        scale = group_denominator(weighted, group, num_groups, options.eps)[group]
        normalized = centred / scale.unsqueeze(1)
    else:
        normalized = centred
    summed = (normalized * weight).sum(dim=1)
    _check_finite(summed)
    rewarded = torch.ones_like(group, dtype=torch.bool) if applied is None else applied.any(dim=1)
    return GdpoParts(
        advantages=None, names=names, raw_scores=raw_scores, scores=rewards, normalized=normalized, weights=weight,
        summed=summed, final=summed, batch_mean=0.0, batch_scale=1.0, group=group, num_groups=num_groups,
        valid_tokens=valid_tokens, options=options, applies=applied, keep=torch.ones_like(group, dtype=torch.bool),
        base_weights=weight, rewarded=rewarded, estimator=ESTIMATOR,
    )


def group_denominator(weighted: torch.Tensor, group: torch.Tensor, num_groups: int, eps: float) -> torch.Tensor:
    """``(G,)`` float64 ``sqrt(max(sum_kl rho_kl, 0) + eps)`` per group, from the weighted centred values
    ``weighted`` ``(B, K)`` (0 where a reward does not apply or is constant in the group).

    ``rho_kl = sum_i C_ik C_il / sqrt(sum_i C_ik^2 sum_i C_il^2)``: the Pearson correlation (the ``1 / (n - 1)`` of
    the covariance cancels), 0 in the row and column of a reward whose ``sum_i C_ik^2`` is 0. Each column is first
    divided by its largest magnitude in the group (correlations do not change), so rewards near 1e300 do not
    overflow when squared.
    """
    rows = group.unsqueeze(1).expand_as(weighted)
    largest = weighted.new_zeros(num_groups, weighted.shape[1]).scatter_reduce_(0, rows, weighted.abs(), "amax")
    unit = weighted / torch.where(largest > 0, largest, torch.ones_like(largest))[group]
    products = unit.unsqueeze(2) * unit.unsqueeze(1)  # (B, K, K)
    gram = weighted.new_zeros(num_groups, *products.shape[1:]).index_add_(0, group, products)
    variances = gram.diagonal(dim1=1, dim2=2)
    inverse = torch.where(variances > 0, variances.rsqrt(), torch.zeros_like(variances))
    coefficients = gram * inverse.unsqueeze(2) * inverse.unsqueeze(1)
    return (coefficients.sum(dim=(1, 2)).clamp(min=0) + eps).sqrt()


def corrgrpo_parts(
    rewards: Mapping[str, torch.Tensor], response_mask: torch.Tensor, index: Any,
    weights: Mapping[str, float] | None = None, **options: Any,
) -> GdpoParts:
    """``gdpo_parts`` (verl's ``(B,)`` or ``(B, T)`` rewards, the response mask, ``sessions``, ``applies``, the
    options as keywords or ``options=``) with CorrGRPO's per-response computation."""
    return gdpo_parts(rewards, response_mask, index, weights, outcome=corrgrpo_outcome_parts, **options)


def corrgrpo_advantage(
    rewards: Mapping[str, torch.Tensor], response_mask: torch.Tensor, index: Any,
    weights: Mapping[str, float] | None = None, **options: Any,
) -> torch.Tensor:
    """``(B, T)`` float32 CorrGRPO advantages, zero outside ``response_mask`` (arguments as ``corrgrpo_parts``)."""
    return corrgrpo_parts(rewards, response_mask, index, weights, **options).advantages
