"""Reading what the V1 advantage stage needs from TransferQueue, where verl's V1 trainer keeps its samples.

verl's own ``_compute_advantage`` fetches uid, masks, ``rm_scores`` and log-probs only; the reward components
live per sample in ``extra_fields["reward_extra_info"]`` (agent-loop reward) or as top-level fields (a
colocated reward model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from gdpo_verl.verl_adapter.components import per_token_gap, reward_fields
from gdpo_verl.verl_adapter.estimator import StepInputs


def fetch_step_inputs(keys: Sequence[str], partition_id: str, reward_keys: Sequence[str]) -> StepInputs:
    """Each sample's GDPO reward components from TransferQueue, in the order of ``keys``."""
    import transfer_queue as tq

    names = [name for key in reward_keys for name in reward_fields(key)]
    data = tq.kv_batch_get(keys=list(keys), partition_id=partition_id, select_fields=["extra_fields", *names])
    return step_inputs_from_fields(keys, {name: data[name] for name in data.keys()}, reward_keys)


def fetch_groups(keys: Sequence[str], partition_id: str) -> tuple[torch.Tensor, np.ndarray]:
    """``(response_mask (B, T), uid (B,))`` of the samples, as verl's V1 advantage stage reads them."""
    import transfer_queue as tq

    data = tq.kv_batch_get(keys=list(keys), partition_id=partition_id, select_fields=["uid", "response_mask"])
    padded = data.to_padded_tensor()
    return padded["response_mask"], _object_array(list(padded["uid"]))


def step_inputs_from_fields(keys: Sequence[str], fields: Mapping[str, Any], reward_keys: Sequence[str]) -> StepInputs:
    """Build ``StepInputs`` from the fields TransferQueue returned (fields it does not hold are absent).

    Top-level fields (a colocated reward model writes ``reward_extra_info`` keys there) take precedence
    over the agent loop's ``extra_fields["reward_extra_info"]``.
    """
    tensors: dict[str, torch.Tensor] = {}
    components: dict[str, np.ndarray] = {}
    for name, value in fields.items():
        if name == "extra_fields":
            continue
        if isinstance(value, torch.Tensor) and value.is_nested:
            tensors[name] = value.to_padded_tensor(0.0)
        elif isinstance(value, torch.Tensor) and value.dim() == 1:
            components[name] = value.cpu().numpy()
        elif isinstance(value, torch.Tensor):
            tensors[name] = value
        else:
            components[name] = _object_array([getattr(item, "data", item) for item in value])

    infos = [_reward_extra_info(item) for item in fields.get("extra_fields", [None] * len(keys))]
    absent = []
    for key in reward_keys:
        names = reward_fields(key)
        if any(name in components or name in tensors for name in names):
            continue
        found = next((name for name in names if any(name in info for info in infos)), None)
        if found is None:
            absent.append(key)
            continue
        # A sample without the component: one that did not pass through verl's RewardLoopWorker (where a key left
        # out stops the run, components.require_components); it does not apply there (None).
        values = [info.get(found) for info in infos]
        other = [sample for sample, info in zip(keys, infos, strict=True) if found not in info and names[1] in info]
        if found == names[0] and (other or any(value is None for value in values)):
            if all(info.get(names[1]) is None for info in infos if found not in info):  # a gap in a per-token one
                raise ValueError(per_token_gap(key))
            raise ValueError(
                f"reward component {key!r} is per token ({names[0]!r}) in some samples and one value ({key!r}) in "
                f"others (first: {other[0]!r}). compute_score must return it the same way for every response."
            )
        components[found] = _object_array(values)
    if absent and infos:
        # Only for the estimator's error message: the keys every sample does carry.
        for name in set.intersection(*(set(info) for info in infos)):
            components.setdefault(name, _object_array([info[name] for info in infos]))
    return StepInputs(keys=list(keys), components=components, tensors=tensors)


def _reward_extra_info(extra_fields: Any) -> Mapping[str, Any]:
    extra_fields = getattr(extra_fields, "data", extra_fields)
    info = extra_fields.get("reward_extra_info", None) if isinstance(extra_fields, Mapping) else None
    return info if isinstance(info, Mapping) else {}


def _object_array(values: list) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array
