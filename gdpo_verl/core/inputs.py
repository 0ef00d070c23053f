"""The inputs of an advantage step, read and checked once: each reward's outcome score per response (a None
entry is a reward that does not apply there), the rewards' weights, and verl's ``(B,)`` or ``(B, T)`` reward
tensors against the response mask. Torch and numpy only; GDPO (``advantage``) and CorrGRPO (``corrgrpo``) read
their inputs here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.checks import finite_number


def outcome_scores(
    rewards: Mapping[str, torch.Tensor], names: Sequence[str], response_mask: torch.Tensor
) -> torch.Tensor:
    """``(B, K)`` float64 outcome scores, one column per name.

    A ``(B, T)`` reward is summed over valid tokens in its own dtype (a float64 accumulator over a
    float32 tensor is three times slower on CPU; torch's float32 sum is already cascaded).
    """
    columns = []
    for name in names:
        reward = rewards[name].to(response_mask.device)
        if reward.dim() == 2:
            reward = (reward * response_mask).sum(dim=-1)
        columns.append(reward.to(torch.float64))
    return torch.stack(columns, dim=1)


def outcome_inputs(
    scores: Mapping[str, Any], valid_tokens: Any, applies: Mapping[str, Any] | None = None
) -> tuple[tuple[str, ...], torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(names, ``(B, K)`` float64 scores (0 where a reward does not apply), ``(B,)`` float64 valid tokens,
    ``(B, K)`` bool where each reward applies or None when every one applies everywhere); raises on bad shapes,
    unknown names in ``applies`` or non-finite scores where a reward applies."""
    names = tuple(scores)
    if not names:
        raise ValueError("scores must name at least one reward.")
    valid_tokens = torch.as_tensor(valid_tokens, dtype=torch.float64)
    unknown = sorted(set(applies or {}) - set(names))
    if unknown:
        raise ValueError(f"applies names {unknown}, which are not among the rewards {list(names)}.")
    columns, masks = [], []
    for name in names:
        column, present = score_column(name, scores[name])
        if applies is not None and name in applies:
            given = torch.as_tensor(applies[name]).reshape(-1)
            if given.dtype != torch.bool or given.shape != column.shape:
                raise ValueError(f"applies[{name!r}] must be a bool array of shape {tuple(column.shape)}; got "
                                 f"{given.dtype} {tuple(given.shape)}.")
            present = given.to(column.device) if present is None else present & given.to(column.device)
        columns.append(column)
        masks.append(present)
    if valid_tokens.dim() != 1 or any(column.shape != valid_tokens.shape for column in columns):
        raise ValueError(
            f"scores and valid_tokens must all have shape ({valid_tokens.shape[0]},); got "
            f"{[tuple(column.shape) for column in columns]} and {tuple(valid_tokens.shape)}."
        )
    stacked = torch.stack(columns, dim=1).to(valid_tokens.device)
    applied = None
    if any(mask is not None for mask in masks):
        applied = torch.stack([torch.ones_like(column, dtype=torch.bool) if mask is None else mask
                               for column, mask in zip(columns, masks, strict=True)], dim=1).to(stacked.device)
        stacked = torch.where(applied, stacked, torch.zeros((), dtype=stacked.dtype, device=stacked.device))
    bad = (~torch.isfinite(stacked)).sum(dim=0).tolist()
    if any(bad):
        listed = ", ".join(f"{name!r}: {count}" for name, count in zip(names, bad, strict=True) if count)
        raise ValueError(
            f"non-finite reward values (NaN or Inf) in {listed} of {stacked.shape[0]} responses. "
            "Fix the reward function so that it returns a finite number for every response (None for a reward "
            "that does not apply to it)."
        )
    return names, stacked, valid_tokens, applied


def score_column(name: str, values: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(B,)`` float64 scores and, when some entry is None (the reward does not apply there), where they apply."""
    if isinstance(values, torch.Tensor):
        return values.to(torch.float64).reshape(-1), None
    array = np.asarray(values)
    if array.dtype != object:
        return torch.as_tensor(array, dtype=torch.float64).reshape(-1), None
    array = array.reshape(-1)
    missing = np.fromiter((value is None for value in array), dtype=bool, count=array.shape[0])
    if not missing.any():
        return torch.as_tensor(array.astype(np.float64)), None
    filled = np.where(missing, 0.0, array).astype(np.float64)
    return torch.as_tensor(filled), torch.as_tensor(~missing)


def check_rewards(rewards: Mapping[str, torch.Tensor], response_mask: torch.Tensor) -> list[str]:
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
    values = [finite_number(weights[name], f"weight of reward {name!r}") for name in names]
    if not any(values):
        raise ValueError(f"every weight is 0 ({dict(weights)}): GDPO would train on nothing. Give a reward a "
                         "non-zero weight.")
    return torch.tensor(values, dtype=torch.float64)
