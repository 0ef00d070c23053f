"""Samples written to TransferQueue as verl's agent loop writes them for the V1 trainer's advantage stage
(``put_samples``, ``random_samples``; read back by ``read_advantages``), and the stage's trainer object (``trainer``),
made without the __init__ that would allocate GPUs for workers: ``_compute_advantage`` reads only ``self.config``."""

import uuid

import numpy as np
import torch
import transfer_queue as tq
from hydra import compose, initialize_config_module
from transfer_queue.metadata import KVBatchMeta

import verl  # noqa: F401  (loads the entry point)
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

KEYS = ["correct", "length"]


def compose_config(*overrides):
    with initialize_config_module("gdpo_verl.config", version_base=None):
        return compose(
            "gdpo_trainer",
            overrides=[
                "algorithm.gdpo_reward_keys=[correct,length]",
                *overrides,
            ],
        )


def trainer(*overrides):
    instance = object.__new__(PPOTrainerSync)
    instance.config = compose_config(*overrides)
    return instance


def put_samples(samples, *, top_level=False):
    """samples: list of (uid, session_id, output_index, length, info). Returns the KVBatchMeta of their keys."""
    keys, fields, tags = [], [], []
    for uid, session, output, length, info in samples:
        score = float(sum(value for key, value in info.items() if key in KEYS))
        rm_scores = torch.zeros(length)
        rm_scores[-1] = score
        field = {
            "prompts": torch.ones(3, dtype=torch.int64),
            "responses": torch.arange(length, dtype=torch.int64),
            "response_mask": torch.ones(length, dtype=torch.int64),
            "rm_scores": rm_scores,
            "old_log_probs": torch.zeros(length),
            "uid": uid,
            "extra_fields": {"reward_extra_info": {} if top_level else dict(info), "min_global_steps": 0},
        }
        if top_level:  # what _compute_reward_colocate writes for a colocated reward model
            field.update(info)
        keys.append(f"{uid}_{session}_{output}")
        fields.append(field)
        tags.append({"status": "success", "seq_len": 3 + length, "min_global_steps": 0, "max_global_steps": 0})
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
    return KVBatchMeta(keys=keys, tags=tags, partition_id="train")


def random_samples(seed=0, groups=5, group_size=4, max_length=7):
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(groups):
        uid = uuid.uuid4().hex
        for session in range(group_size):
            info = {"correct": float(rng.integers(0, 2)), "length": float(rng.integers(0, 2)), "acc": 1.0}
            samples.append((uid, session, 0, int(rng.integers(1, max_length + 1)), info))
    return samples


def read_advantages(batch):
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["advantages", "response_mask"])
    return data["advantages"].to_padded_tensor(0.0), data["response_mask"].to_padded_tensor(0)
