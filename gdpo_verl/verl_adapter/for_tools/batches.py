"""verl's own advantage stage on a rollout batch given as plain rows (for ``gdpo-verl demo``)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
import verl  # noqa: F401  (loads the plugin entry point)
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.verl_adapter.names import OUR_ESTIMATORS
from gdpo_verl.verl_adapter.estimator import Step, running
from gdpo_verl.verl_adapter.settings import settings_from_config


def build_batch(rows: list[dict[str, Any]], names: list[str]) -> DataProto:
    """A DataProto laid out as verl's trainer has it after the reward step (summed score on the last token)."""
    lengths = torch.tensor([int(row["response_length"]) for row in rows])
    if (lengths < 1).any():
        raise ValueError("every response_length must be at least 1.")
    response_mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()
    # None: the component does not apply to that rollout (it adds 0 to the summed score, as in TRL)
    components = {name: _component([row[name] for row in rows]) for name in names}
    summed = sum(np.array([0.0 if value is None else float(value) for value in values]) for values in components.values())
    scores = torch.zeros(response_mask.shape)
    scores[torch.arange(len(rows)), lengths - 1] = torch.tensor(summed, dtype=torch.float32)
    non_tensors = {"uid": np.array([str(row["uid"]) for row in rows], dtype=object), **components}
    tensors = {"response_mask": response_mask, "token_level_scores": scores, "token_level_rewards": scores.clone()}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def _component(values: list[Any]) -> np.ndarray:
    if any(value is None for value in values):
        array = np.empty(len(values), dtype=object)
        array[:] = [None if value is None else float(value) for value in values]
        return array
    return np.array([float(value) for value in values])


def verl_advantages(rows: list[dict[str, Any]], names: list[str], algorithm: dict[str, Any],
                    global_step: int | None = None) -> np.ndarray:
    """One advantage per response (the value on its first token) from verl's compute_advantage on the rows;
    ``global_step``: the trainer step a GDPO step is taken at (scheduled weights are read there)."""
    batch = build_batch(rows, names)
    config = OmegaConf.create({"norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False, **algorithm})
    step = None
    if config.adv_estimator in OUR_ESTIMATORS:
        step = Step(settings_from_config(config), global_step)
    with running(step) if step is not None else nullcontext():
        out = compute_advantage(
            batch, adv_estimator=config.adv_estimator, norm_adv_by_std_in_grpo=True, config=config
        )
    return out.batch["advantages"][:, 0].numpy().astype(np.float64)
