"""A batch laid out as verl's legacy trainer has it after the reward step (``rollout_batch``): a ``DataProto`` with
the reward components in its ``non_tensor_batch``."""

import numpy as np
import torch

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto

PROMPT_LENGTH = 5


def rollout_batch(seed=0, groups=6, group_size=4, length=10, rewards=("correct", "length"), object_arrays=True):
    """A batch laid out as verl's legacy trainer has it after the reward step."""
    generator = torch.Generator().manual_seed(seed)
    batch_size = groups * group_size
    lengths = torch.randint(1, length + 1, (batch_size,), generator=generator)
    response_mask = (torch.arange(length)[None] < lengths[:, None]).long()
    components = {name: torch.randint(0, 2, (batch_size,), generator=generator).double() for name in rewards}
    score = sum(components.values())
    token_level_scores = torch.zeros(batch_size, length)
    token_level_scores[torch.arange(batch_size), lengths - 1] = score.float()
    uid = np.array([f"uid-{i // group_size}" for i in range(batch_size)], dtype=object)
    non_tensors = {"uid": uid}
    for name, values in components.items():
        values = values.numpy()
        non_tensors[name] = values.astype(object) if object_arrays else values
    tensors = {
        "prompts": torch.zeros(batch_size, PROMPT_LENGTH, dtype=torch.long),
        "responses": torch.zeros(batch_size, length, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(batch_size, PROMPT_LENGTH, dtype=torch.long), response_mask], 1),
        "response_mask": response_mask,
        "token_level_scores": token_level_scores,
        "token_level_rewards": token_level_scores.clone(),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors), components
