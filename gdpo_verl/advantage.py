"""The GDPO advantage (arXiv 2601.05242), in plain torch.

For prompt i, rollout j and reward k:

    step 1  A_k(i,j)  = (r_k(i,j) - mean_j r_k(i,.)) / (std_j r_k(i,.) + eps)   per reward, per group
    step 2  A_sum(i,j) = sum_k w_k * A_k(i,j)                                    weights act on normalized values
    step 3  A(i,j)     = batch normalization of A_sum over the whole batch       (Eq. 6 of the paper)

This module imports torch and numpy only; verl reaches it through ``gdpo_verl.verl_adapter``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

BATCH_NORMS = ("token", "sequence", "none")

# verl's masked_whiten adds this to the variance before the inverse square root.
WHITEN_VAR_EPS = 1e-8


def group_ids(index: Any, batch_size: int, device: torch.device | str | None = None) -> tuple[torch.Tensor, int]:
    """Map arbitrary group labels to contiguous ids.

    Args:
        index: ``(B,)`` group labels: verl's ``uid`` numpy object array of strings, a list, or an integer tensor.
        batch_size: B, the number of responses the labels must cover.
        device: where the returned ids live.

    Returns:
        ``(ids, num_groups)``: ``ids`` is a ``(B,)`` long tensor with values in ``0 .. num_groups - 1``.
    """
    if isinstance(index, torch.Tensor):
        if index.dim() != 1 or index.shape[0] != batch_size:
            raise ValueError(f"index must have shape ({batch_size},) like the batch; got {tuple(index.shape)}.")
        if index.is_floating_point() or index.is_complex():
            raise ValueError(f"an index tensor must hold integer group ids; got dtype {index.dtype}.")
        uniques, ids = torch.unique(index.to(device), return_inverse=True)
        return ids, int(uniques.numel())

    labels = np.asarray(index)
    if labels.ndim != 1 or labels.shape[0] != batch_size:
        raise ValueError(f"index must have shape ({batch_size},) like the batch; got {labels.shape}.")
    try:
        uniques, ids = np.unique(labels, return_inverse=True)
    except TypeError as exc:
        raise ValueError(
            "index labels must be mutually comparable (for example all strings, as verl's uid); "
            f"got a mix of types: {sorted({type(v).__name__ for v in labels.tolist()})}."
        ) from exc
    return torch.as_tensor(ids.reshape(-1), dtype=torch.long, device=device), len(uniques)


def group_normalize(
    values: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    *,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    ddof: int = 1,
) -> torch.Tensor:
    """Step 1: normalize each column of ``values`` within its group, in float64.

    Args:
        values: ``(B, K)`` one outcome score per response and reward.
        group: ``(B,)`` long group ids in ``0 .. num_groups - 1``.
        num_groups: G.
        norm_by_std: divide by ``std + eps``; if False only subtract the group mean (GRPO w/o std).
        eps: added to the std.
        ddof: 1 for the unbiased std (verl, the estimator), 0 for the population std (the paper's counting).

    Returns:
        ``(B, K)`` float64. A group whose values are all equal, including a group of one, gives exactly 0.
    """
    x = values.to(torch.float64)
    num_rewards = x.shape[1]
    counts = torch.bincount(group, minlength=num_groups).to(torch.float64).unsqueeze(1)
    mean = torch.zeros(num_groups, num_rewards, dtype=torch.float64, device=x.device).index_add_(0, group, x) / counts
    deviation = x - mean[group]
    if norm_by_std:
        squares = torch.zeros_like(mean).index_add_(0, group, deviation * deviation)
        std = (squares / (counts - ddof).clamp(min=1)).sqrt()
        z = deviation / (std[group] + eps)
    else:
        z = deviation
    # Deciding "constant group" from max == min, not from the std, keeps round-off in the mean
    # (0.1 + 0.1 + 0.1 != 0.3) from turning into a small non-zero advantage.
    varies = group_varies(x, group, num_groups)[group]
    return torch.where(varies, z, torch.zeros((), dtype=z.dtype, device=z.device))


def group_varies(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """``(G, K)`` bool: True where column k of ``values`` ``(B, K)`` takes more than one value in group g."""
    rows = group.unsqueeze(1).expand_as(values)
    shape = (num_groups, values.shape[1])
    group_max = values.new_full(shape, -math.inf).scatter_reduce_(0, rows, values, "amax")
    group_min = values.new_full(shape, math.inf).scatter_reduce_(0, rows, values, "amin")
    return group_max > group_min


def batch_normalize(
    advantages: torch.Tensor, valid_tokens: torch.Tensor, mode: str = "token", eps: float = 1e-6
) -> torch.Tensor:
    """Step 3: normalize the summed advantage over the whole batch.

    Args:
        advantages: ``(B,)`` float64, one value per response.
        valid_tokens: ``(B,)`` float64, the number of valid response tokens of each response.
        mode: ``"token"`` — verl's ``masked_whiten``: every valid token counts once, unbiased variance,
            ``(A - mean) * rsqrt(var + 1e-8)``. ``"sequence"`` — the paper's Eq. 6: every response with a
            valid token counts once, ``(A - mean) / (std + eps)`` with the unbiased std. ``"none"`` — unchanged.
        eps: added to the std in ``"sequence"`` mode.

    Returns:
        ``(B,)`` float64.
    """
    if mode == "none":
        return advantages
    if mode == "token":
        weight, unit, scale = valid_tokens, "valid response tokens", None
    elif mode == "sequence":
        weight, unit, scale = (valid_tokens > 0).to(torch.float64), "responses with a valid token", eps
    else:
        raise ValueError(f"batch_norm must be one of {BATCH_NORMS}; got {mode!r}.")
    total = weight.sum()
    count = total.item()
    if count < 2:
        raise ValueError(
            f"batch_norm={mode!r} needs at least 2 {unit} in the batch to estimate a variance; got {int(count)}. "
            "Check the response_mask, or use batch_norm='none'."
        )
    mean = (weight * advantages).sum() / total
    centered = advantages - mean
    var = (weight * centered * centered).sum() / (total - 1)
    if scale is None:
        return centered * torch.rsqrt(var + WHITEN_VAR_EPS)
    return centered / (var.sqrt() + scale)


@dataclass(frozen=True)
class GdpoParts:
    """Everything one GDPO computation produced; diagnostics read these instead of recomputing them.

    Attributes:
        advantages: ``(B, T)`` float32, the result, zero outside the response mask (None when computed
            from outcome scores alone).
        names: the reward names, in column order.
        scores: ``(B, K)`` float64 outcome score of each response and reward.
        normalized: ``(B, K)`` float64 step-1 values (per reward, per group).
        weights: ``(K,)`` float64.
        summed: ``(B,)`` float64 step-2 values.
        final: ``(B,)`` float64 step-3 values, one per response.
        group: ``(B,)`` long group ids; ``num_groups`` of them.
        valid_tokens: ``(B,)`` float64 valid response tokens per response.
    """

    advantages: torch.Tensor | None
    names: tuple[str, ...]
    scores: torch.Tensor
    normalized: torch.Tensor
    weights: torch.Tensor
    summed: torch.Tensor
    final: torch.Tensor
    group: torch.Tensor
    num_groups: int
    valid_tokens: torch.Tensor


def gdpo_advantage(
    rewards: Mapping[str, torch.Tensor],
    response_mask: torch.Tensor,
    index: Any,
    weights: Mapping[str, float] | None = None,
    *,
    norm_by_std: bool = True,
    batch_norm: str = "token",
    eps: float = 1e-6,
) -> torch.Tensor:
    """GDPO advantages for a batch of responses.

    Args:
        rewards: reward name -> ``(B,)`` outcome scores or ``(B, T)`` token-level scores. A token-level
            reward's outcome score is the sum of its scores over the response's valid tokens.
        response_mask: ``(B, T)`` 1 on valid response tokens, 0 elsewhere.
        index: ``(B,)`` group ids: verl's ``uid`` numpy object array, a list, or an integer tensor.
        weights: reward name -> weight on that reward's normalized advantage; ``None`` weighs all 1.0.
        norm_by_std: divide by the group std (step 1); False only centres (verl's ``norm_adv_by_std_in_grpo``).
        batch_norm: ``"token"`` (verl's masked whitening), ``"sequence"`` (the paper's Eq. 6) or ``"none"``.
        eps: added to every std.

    Returns:
        ``(B, T)`` float32 advantages, zero outside ``response_mask``.
    """
    return gdpo_parts(
        rewards, response_mask, index, weights, norm_by_std=norm_by_std, batch_norm=batch_norm, eps=eps
    ).advantages


def gdpo_parts(
    rewards: Mapping[str, torch.Tensor],
    response_mask: torch.Tensor,
    index: Any,
    weights: Mapping[str, float] | None = None,
    *,
    norm_by_std: bool = True,
    batch_norm: str = "token",
    eps: float = 1e-6,
) -> GdpoParts:
    """``gdpo_advantage`` with its intermediate values; same arguments."""
    names = _check_rewards(rewards, response_mask)
    # The float32 copy of the mask is the output buffer too: one (B, T) allocation, filled in place at the
    # end. (Multiplying by an integer or bool mask directly takes a type-promotion path twice as slow.)
    output = response_mask.to(torch.float32, copy=True)
    scores = outcome_scores(rewards, names, output)
    valid_tokens = output.sum(dim=-1).to(torch.float64)
    parts = _steps(names, scores, valid_tokens, index, weights, norm_by_std, batch_norm, eps)
    output.mul_(parts.final.to(torch.float32).unsqueeze(-1))
    return replace(parts, advantages=output)


def gdpo_outcome_parts(
    scores: Mapping[str, torch.Tensor],
    valid_tokens: torch.Tensor,
    index: Any,
    weights: Mapping[str, float] | None = None,
    *,
    norm_by_std: bool = True,
    batch_norm: str = "token",
    eps: float = 1e-6,
) -> GdpoParts:
    """GDPO on per-response values only, without a ``(B, T)`` mask (``advantages`` is None).

    Args:
        scores: reward name -> ``(B,)`` outcome scores.
        valid_tokens: ``(B,)`` number of valid response tokens of each response (weights for ``"token"``).
        index, weights, norm_by_std, batch_norm, eps: as for ``gdpo_advantage``.
    """
    names = list(scores)
    if not names:
        raise ValueError("scores must name at least one reward.")
    valid_tokens = torch.as_tensor(valid_tokens, dtype=torch.float64)
    columns = [torch.as_tensor(scores[name], dtype=torch.float64).reshape(-1) for name in names]
    if any(column.shape != valid_tokens.shape for column in columns) or valid_tokens.dim() != 1:
        raise ValueError(
            f"scores and valid_tokens must all have shape ({valid_tokens.shape[0]},); got "
            f"{[tuple(column.shape) for column in columns]} and {tuple(valid_tokens.shape)}."
        )
    stacked = torch.stack(columns, dim=1)
    _check_finite(stacked, names)
    return _steps(names, stacked, valid_tokens, index, weights, norm_by_std, batch_norm, eps)


def _steps(
    names: Sequence[str],
    scores: torch.Tensor,
    valid_tokens: torch.Tensor,
    index: Any,
    weights: Mapping[str, float] | None,
    norm_by_std: bool,
    batch_norm: str,
    eps: float,
) -> GdpoParts:
    """Steps 1-3 on ``(B, K)`` outcome scores."""
    weight_vector = weight_vector_for(names, weights).to(scores.device)
    check_options(batch_norm, eps)
    group, num_groups = group_ids(index, scores.shape[0], scores.device)
    normalized = group_normalize(scores, group, num_groups, norm_by_std=norm_by_std, eps=eps)  # step 1
    summed = normalized @ weight_vector  # step 2
    final = batch_normalize(summed, valid_tokens, batch_norm, eps)  # step 3
    return GdpoParts(
        None, tuple(names), scores, normalized, weight_vector, summed, final, group, num_groups, valid_tokens
    )


def outcome_scores(
    rewards: Mapping[str, torch.Tensor], names: Sequence[str], response_mask: torch.Tensor
) -> torch.Tensor:
    """``(B, K)`` float64 outcome scores, one column per name; raises on NaN or Inf.

    A ``(B, T)`` reward is summed over valid tokens in its own dtype (a float64 accumulator over a
    float32 tensor is three times slower on CPU; torch's float32 sum is already cascaded).
    """
    columns = []
    for name in names:
        reward = rewards[name].to(response_mask.device)
        if reward.dim() == 2:
            reward = (reward * response_mask).sum(dim=-1)
        columns.append(reward.to(torch.float64))
    scores = torch.stack(columns, dim=1)
    _check_finite(scores, names)
    return scores


def _check_finite(scores: torch.Tensor, names: Sequence[str]) -> None:
    bad = (~torch.isfinite(scores)).sum(dim=0).tolist()
    if any(bad):
        listed = ", ".join(f"{name!r}: {count}" for name, count in zip(names, bad, strict=True) if count)
        raise ValueError(
            f"non-finite reward values (NaN or Inf) in {listed} of {scores.shape[0]} responses. "
            "Fix the reward function so that it returns a finite number for every response."
        )


def _check_rewards(rewards: Mapping[str, torch.Tensor], response_mask: torch.Tensor) -> list[str]:
    if not isinstance(response_mask, torch.Tensor) or response_mask.dim() != 2:
        shape = tuple(response_mask.shape) if isinstance(response_mask, torch.Tensor) else type(response_mask).__name__
        raise ValueError(f"response_mask must be a (B, T) tensor; got {shape}.")
    if not isinstance(rewards, Mapping) or not rewards:
        raise ValueError("rewards must be a non-empty mapping of reward name -> tensor; got none.")
    batch_size, length = response_mask.shape
    for name, reward in rewards.items():
        if not isinstance(reward, torch.Tensor):
            raise ValueError(f"reward {name!r} must be a torch.Tensor; got {type(reward).__name__}.")
        if tuple(reward.shape) not in ((batch_size,), (batch_size, length)):
            raise ValueError(
                f"reward {name!r} has shape {tuple(reward.shape)}; expected ({batch_size},) outcome scores or "
                f"({batch_size}, {length}) token-level scores, like response_mask {tuple(response_mask.shape)}."
            )
    return list(rewards)


def check_options(batch_norm: str, eps: float) -> None:
    """Raise ValueError unless ``batch_norm`` is one of BATCH_NORMS and ``eps`` a finite number >= 0."""
    if batch_norm not in BATCH_NORMS:
        raise ValueError(f"batch_norm must be one of {BATCH_NORMS}; got {batch_norm!r}.")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0; got {eps!r}.")


def weight_vector_for(names: Sequence[str], weights: Mapping[str, float] | None) -> torch.Tensor:
    """``(K,)`` float64 weights in the order of ``names``; raises ValueError on unknown, missing or bad weights."""
    if weights is None:
        return torch.ones(len(names), dtype=torch.float64)
    if not isinstance(weights, Mapping):
        raise ValueError(f"weights must be a mapping of reward name -> float, or None; got {type(weights).__name__}.")
    unknown = [name for name in weights if name not in names]
    missing = [name for name in names if name not in weights]
    if unknown or missing:
        raise ValueError(
            f"weights must name exactly the rewards {list(names)}; "
            f"unknown: {unknown or 'none'}, missing: {missing or 'none'}."
        )
    values = []
    for name in names:
        value = weights[name]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"weight of reward {name!r} must be a finite number; got {value!r}.")
        values.append(float(value))
    return torch.tensor(values, dtype=torch.float64)
