"""verl's own advantage stage on a rollout batch given as plain rows (for ``gdpo-verl demo``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import verl  # noqa: F401  (loads the plugin entry point)
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage


def build_batch(rows: list[dict[str, Any]], names: list[str]) -> DataProto:
    """A DataProto laid out as verl's trainer has it after the reward step (summed score on the last token)."""
    lengths = torch.tensor([int(row["response_length"]) for row in rows])
    if (lengths < 1).any():
        raise ValueError("every response_length must be at least 1.")
    response_mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()
    components = {name: np.array([float(row[name]) for row in rows]) for name in names}
    scores = torch.zeros(response_mask.shape)
    scores[torch.arange(len(rows)), lengths - 1] = torch.tensor(sum(components.values()), dtype=torch.float32)
    non_tensors = {"uid": np.array([str(row["uid"]) for row in rows], dtype=object), **components}
    tensors = {"response_mask": response_mask, "token_level_scores": scores, "token_level_rewards": scores.clone()}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def verl_advantages(rows: list[dict[str, Any]], names: list[str], algorithm: dict[str, Any]) -> np.ndarray:
    """One advantage per response (the value on its first token) from verl's compute_advantage on the rows."""
    batch = build_batch(rows, names)
    config = OmegaConf.create({"norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False, **algorithm})
    out = compute_advantage(
        batch, adv_estimator=config.adv_estimator, norm_adv_by_std_in_grpo=True, config=config
    )
    return out.batch["advantages"][:, 0].numpy().astype(np.float64)
