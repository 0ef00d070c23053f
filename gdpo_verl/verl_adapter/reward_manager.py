"""The reward manager registered in verl as "gdpo_verl" (``reward.reward_manager.name=gdpo_verl``).

It behaves like verl's "naive" reward manager (it runs ``compute_score`` on the decoded last output of a
sample and stores every key of a returned dict in ``reward_extra_info``), and adds five things:

- ``extra_info["response_length"]``: the number of valid response tokens, so that ``compute_score`` can
  use the true token count (verl's managers pass only the decoded text). ``extra_info`` is copied per
  response first: verl shares one dict between the rollouts of a prompt.
- per-token components (``token_level_scores_<key>`` lists in the returned dict) are padded with zeros
  to ``data.max_response_length``: verl's legacy trainer stacks each ``reward_extra_info`` key into one
  numpy array, which needs equal lengths.
- ``reward_extra_info["gdpo_signature"]``: one float per response that is equal for two responses exactly
  when all their ``algorithm.gdpo_reward_keys`` components are equal (up to a 2**-48 chance of collision).
  With ``algorithm.filter_groups.metric=gdpo_signature`` verl's dynamic sampling keeps a group when any
  component varies in it, which is when GDPO can give it a signal.
- a time limit on ``compute_score`` (``algorithm.gdpo.reward_timeout_s``, 600 s): a call that hangs fails the
  step with an error naming the limit, where verl would wait on it forever.
- a reward that keeps state (the math reward's checker processes, the coding reward's sandboxes: their
  ``compute_score.reward_class``) gets an instance of its own, made here and owned by this manager for its
  lifetime; one with a ``prepare`` method gets it called with the reward_kwargs at once, so that the coding
  reward checks its sandbox on this node before the first program runs. The coding reward's kwargs gain verl's
  ``reward.sandbox_fusion`` settings when it runs programs there (``sandbox=fusion``): verl hands those only to
  its own scorers; and its sandbox's ``slots`` (runs at once), unless set: this worker's share of its node's cores
  (``node_share_of_cores``).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import struct
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from verl import DataProto
from verl.trainer.ppo.reward import _call_with_kwargs, _call_with_kwargs_async
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from gdpo_verl.core.checks import is_reward_value
from gdpo_verl.verl_adapter.components import TOKEN_LEVEL_PREFIX, find_reward, missing_component
from gdpo_verl.verl_adapter.reward_config import sandboxed_reward_kwargs
from gdpo_verl.verl_adapter.settings import REWARD_MANAGER_NAME, SIGNATURE_KEY, reward_timeout


def reward_signature(components: Sequence[float | None]) -> float:
    """A float in ``[0, 2**48)`` determined by the component values (None: the component does not apply, packed as
    NaN, which no reward value is); distinct values give distinct floats except with probability 2**-48. Exact
    integers are kept below 2**53, so the float is exact."""
    packed = struct.pack(f"<{len(components)}d",
                         *(math.nan if value is None else float(value) + 0.0 for value in components))
    return float(int.from_bytes(hashlib.blake2b(packed, digest_size=6).digest(), "big"))


def signature_components(info: Mapping[str, Any], keys: Sequence[str]) -> list[float | None]:
    """The outcome value of each key in ``info`` (a token-level list is summed; None where the component does not
    apply: None); raises naming what is wrong."""
    values = []
    for key in keys:
        found, token_level = find_reward(key, info)
        if found is None:
            raise ValueError(missing_component(key, info, keys))
        if info[found] is None:
            values.append(None)
            continue
        value = float(np.sum(np.asarray(info[found], dtype=np.float64))) if token_level else info[found]
        if not is_reward_value(value):
            raise ValueError(f"compute_score returned {key}={value!r}; GDPO needs a finite number (or None where the "
                             "component does not apply).")
        values.append(float(value))
    return values


@register(REWARD_MANAGER_NAME)
class GdpoRewardManager(NaiveRewardManager):
    """verl's naive reward manager plus the true response length and the GDPO signature."""

    def __init__(self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None):
        sandboxed = sandboxed_reward_kwargs(config)
        added = {}
        if sandboxed is not None:
            if "sandbox_fusion" in sandboxed:
                added["sandbox_fusion"] = sandboxed["sandbox_fusion"]
            if sandboxed.get("slots") is None:
                added["slots"] = node_share_of_cores(config)
        compute_score = owned_reward(compute_score, added or None)
        super().__init__(config, tokenizer, compute_score, reward_router_address, reward_model_tokenizer)
        keys = config.algorithm.get("gdpo_reward_keys", None)
        self.signature_keys = tuple(keys) if keys else ()
        self.max_response_length = config.get("data", {}).get("max_response_length", None)
        self.timeout_s = reward_timeout(config.algorithm.get("gdpo", None))

    async def run_single(self, data: DataProto) -> dict:
        data = data[-1:]  # like verl's managers: the last output of a multi-output sample is scored
        item = data[0]
        response_width = item.batch["responses"].shape[-1]
        response_length = int(item.batch["attention_mask"][-response_width:].sum())
        extra_info = dict(item.non_tensor_batch.get("extra_info", None) or {})
        extra_info["response_length"] = response_length
        data.non_tensor_batch["extra_info"] = np.array([extra_info], dtype=object)

        try:
            result = await asyncio.wait_for(super().run_single(data), self.timeout_s)
        except TimeoutError as exc:
            raise TimeoutError(
                f"compute_score did not return within algorithm.gdpo.reward_timeout_s={self.timeout_s:g} s (a "
                f"response of {response_length} tokens, data_source {item.non_tensor_batch.get('data_source')!r}). "
                "A reward function must bound its own work (gdpo-verl's math and tool rewards do); fix it, or raise "
                "the limit if it is that slow by design."
            ) from exc
        info = result["reward_extra_info"]
        for key in [key for key in info if key.startswith(TOKEN_LEVEL_PREFIX) and info[key] is not None]:
            info[key] = pad_token_scores(key, info[key], response_length, self.max_response_length)
        if self.signature_keys:
            info[SIGNATURE_KEY] = reward_signature(signature_components(info, self.signature_keys))
        return result


def node_share_of_cores(config: Any) -> int:
    """The sandbox slots of one reward worker: the cores this process may use divided by the reward workers on its
    node, at least 1. verl starts ``reward.num_workers`` reward workers round-robin over the Ray nodes that have
    CPUs, so a node holds at most ceil(num_workers / nodes) of them (all of them outside Ray: one node). Without this
    each worker would size its slots to every core, and 8 workers on a 128-core node would run ~1,024 programs at once
    beside vLLM and FSDP: test cases timing out by load, reward noise. ``reward_kwargs.slots`` (recipes:
    SANDBOX_SLOTS) overrides it."""
    import ray

    workers = int(config.reward.get("num_workers", 1) or 1)
    nodes = 1
    if ray.is_initialized():
        nodes = max(1, sum(1 for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0))
    return max(1, len(os.sched_getaffinity(0)) // math.ceil(workers / nodes))


def owned_reward(compute_score: Any, added_kwargs: Mapping[str, Any] | None = None) -> Any:
    """verl's wrapped ``compute_score`` (``partial(_call_with_kwargs, raw_fn, reward_kwargs)``) with, when the wrapped
    function names a ``reward_class`` (gdpo-verl's math reward: its checker processes; the coding reward: its
    sandboxes), a fresh instance of that class in its place, prepared for the reward_kwargs (and ``added_kwargs``,
    which every call gets too) when it has a ``prepare``: the instance, and the state it keeps, belong to this
    manager. Any other function is returned unchanged."""
    if not (isinstance(compute_score, partial) and compute_score.func in (_call_with_kwargs, _call_with_kwargs_async)):
        return compute_score
    raw_fn, reward_kwargs, *rest = compute_score.args
    reward_class = getattr(raw_fn, "reward_class", None)
    if reward_class is None:
        return compute_score
    reward_kwargs = {**reward_kwargs, **(added_kwargs or {})}
    reward = reward_class()
    prepare = getattr(reward, "prepare", None)
    if prepare is not None:
        prepare(**reward_kwargs)
    return partial(compute_score.func, reward, reward_kwargs, *rest, **compute_score.keywords)


def pad_token_scores(key: str, scores: Any, response_length: int, width: int | None) -> list[float]:
    """A per-token score list as plain floats, zero-padded to ``width`` (when given)."""
    values = [float(value) for value in np.asarray(scores, dtype=np.float64).reshape(-1)]
    if len(values) < response_length:
        raise ValueError(
            f"compute_score returned {len(values)} values for {key!r} but the response has {response_length} "
            "tokens; give one value per response token."
        )
    if width is not None and len(values) < width:
        values.extend([0.0] * (width - len(values)))
    return values
