"""The "gdpo" advantage estimator with the signature verl's ``compute_advantage`` calls.

verl passes ``non_tensor_batch`` and ``batch`` to the estimator registered as "gdpo" only; this module
gathers each reward's scores from them and hands them to ``gdpo_advantage``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from gdpo_verl.advantage import gdpo_advantage
from gdpo_verl.verl_adapter.settings import settings_from_config

TOKEN_LEVEL_PREFIX = "token_level_scores_"


def compute_gdpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    non_tensor_batch: Mapping[str, np.ndarray] | None = None,
    batch: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GDPO advantages for verl.

    Args:
        token_level_rewards: ``(B, T)`` verl's summed reward; GDPO does not use it (it reads the components).
        response_mask: ``(B, T)``.
        index: ``(B,)`` verl's ``uid`` array: the group of each response.
        config: verl's ``algorithm`` config; see ``gdpo_verl/config/gdpo_trainer.yaml`` for the keys read.
        non_tensor_batch: per-response reward components, as verl stores what ``compute_score`` returns.
        batch: the tensor batch; ``token_level_scores_<key>`` ``(B, T)`` tensors take precedence there.

    Returns:
        ``(advantages, returns)``, both the same ``(B, T)`` tensor.
    """
    settings = settings_from_config(config)
    if index is None:
        raise ValueError(
            "the gdpo estimator needs the group id of every response (verl's non_tensor_batch['uid']); none was given."
        )
    rewards = gather_rewards(settings.reward_keys, response_mask, non_tensor_batch, batch)
    advantages = gdpo_advantage(
        rewards,
        response_mask,
        index,
        settings.weights,
        norm_by_std=settings.norm_by_std,
        batch_norm=settings.batch_norm,
        eps=settings.eps,
    )
    return advantages, advantages


def gather_rewards(
    keys: Sequence[str],
    response_mask: torch.Tensor,
    non_tensor_batch: Mapping[str, Any] | None,
    batch: Any,
) -> dict[str, torch.Tensor]:
    """reward key -> ``(B, T)`` token-level scores from ``batch`` or ``(B,)`` values from ``non_tensor_batch``."""
    non_tensor_batch = non_tensor_batch if non_tensor_batch is not None else {}
    tensor_keys = list(batch.keys()) if batch is not None else []
    rewards = {}
    for key in keys:
        token_level_key = TOKEN_LEVEL_PREFIX + key
        if token_level_key in tensor_keys:
            rewards[key] = batch[token_level_key]
        elif key in non_tensor_batch:
            rewards[key] = _per_response(key, non_tensor_batch[key], response_mask)
        else:
            available = sorted(non_tensor_batch) + sorted(k for k in tensor_keys if k.startswith(TOKEN_LEVEL_PREFIX))
            hint = (
                f"Make compute_score return a dict containing {key!r}, provide batch['{token_level_key}'], "
                "or fix algorithm.gdpo_reward_keys."
            )
            if set(available) <= {"uid"}:
                hint = (
                    "No reward component reached the advantage stage at all: verl 0.9.1's V1 trainer "
                    "(trainer.use_v1=True, verl's default) does not pass them. Set trainer.use_v1=False, "
                    "or start from the packaged config (--config-path pkg://gdpo_verl.config "
                    "--config-name gdpo_trainer), which does."
                )
            raise ValueError(
                f"GDPO reward key {key!r} not found. Available per-response keys: {available or 'none'}. {hint}"
            )
    return rewards


def _per_response(key: str, values: Any, response_mask: torch.Tensor) -> torch.Tensor:
    array = np.asarray(values)
    if array.shape != (response_mask.shape[0],):
        raise ValueError(
            f"reward {key!r} has shape {array.shape} in non_tensor_batch; expected one value per response "
            f"({response_mask.shape[0]},)."
        )
    # numpy would turn None into NaN and "0.5" into 0.5: only numbers are accepted.
    numeric = array.dtype.kind in "biuf" or (array.dtype == object and _is_number(array).all())
    if not numeric:
        kinds = sorted({type(v).__name__ for v in array.tolist() if not isinstance(v, numbers.Real)})
        raise ValueError(
            f"reward {key!r} must hold one number per response; got values of type {kinds}. "
            "Make compute_score return a number for it in every response."
        )
    return torch.from_numpy(array.astype(np.float64)).to(response_mask.device)


_is_number = np.vectorize(lambda value: isinstance(value, (numbers.Real, np.bool_)), otypes=[bool])
