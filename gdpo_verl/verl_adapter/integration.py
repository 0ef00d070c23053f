"""Where gdpo-verl hooks into verl's trainers. Installed by the plugin, after its verl version check.

verl 0.9.1 has no extension point for these, so four verl functions are wrapped (never replaced: each
wrapper calls verl's own code), each when its module is first imported, so that ``import verl`` in a
rollout or engine worker does not pay for importing trainer modules it never uses:

- ``verl.utils.config.validate_config`` (called by ``main_ppo`` before Ray starts): also runs
  ``check_config``, so GDPO configuration errors surface before any GPU is allocated.
- ``verl.trainer.ppo.v1.trainer_base.PPOTrainer._compute_advantage`` (the V1 trainer, verl's default):
  verl fetches only uid, masks, ``rm_scores`` and log-probs from TransferQueue there. For "gdpo" the
  wrapper also fetches each sample's reward components (``extra_fields["reward_extra_info"]``, or
  top-level fields written by a colocated reward model, or ``token_level_scores_<key>``), hands them to
  the estimator for the duration of verl's own method, and logs the estimator's ``gdpo/`` metrics.
- ``verl.trainer.ppo.ray_trainer.compute_data_metrics`` (the legacy trainer's metrics): adds the
  ``gdpo/`` metrics of the step's advantage computation.
- ``verl.trainer.ppo.ray_trainer.compute_advantage`` (the legacy trainer): under another estimator with
  ``algorithm.gdpo_reward_keys`` set, leaves the ``gdpo/`` metrics of what GDPO would compute on the batch
  (the V1 wrapper does the same for its trainer).
- ``verl.experimental.reward_loop.reward_manager``: registers the "gdpo_verl" reward manager.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import logging
import sys
from dataclasses import replace
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
import torch

from gdpo_verl.verl_adapter.estimator import (
    TOKEN_LEVEL_PREFIX,
    StepInputs,
    current_step_inputs,
    observe_step,
    pop_step_metrics,
    step_inputs,
)
from gdpo_verl.verl_adapter.settings import check_config, observes, settings_from_config

logger = logging.getLogger("gdpo_verl")

_WRAPPED = "__gdpo_verl_wraps__"


def install() -> None:
    """Wrap verl's functions now or when their modules are imported. Idempotent."""
    after_import("verl.utils.config", _wrap_validate_config)
    after_import("verl.trainer.ppo.v1.trainer_base", _wrap_v1_compute_advantage)
    after_import("verl.trainer.ppo.ray_trainer", _wrap_legacy_data_metrics)
    after_import("verl.experimental.reward_loop.reward_manager", _register_reward_manager)


# --------------------------------------------------------------------------- the wrappers


def _wrap_validate_config(module: ModuleType) -> None:
    _wrap_attribute(module, "validate_config", _validate_config_wrapper)


def _validate_config_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def validate_config(config: Any, *args: Any, **kwargs: Any) -> Any:
        check_config(config)
        return original(config, *args, **kwargs)

    return validate_config


def _wrap_v1_compute_advantage(module: ModuleType) -> None:
    _wrap_attribute(module.PPOTrainer, "_compute_advantage", _v1_compute_advantage_wrapper)


def _v1_compute_advantage_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
        algorithm = self.config.algorithm
        observing = observes(algorithm)
        if algorithm.adv_estimator != "gdpo" and not observing:
            return original(self, batch, metrics)
        settings = settings_from_config(algorithm, training=not observing)
        inputs = fetch_step_inputs(batch.keys, batch.partition_id, settings.reward_keys)
        inputs = replace(inputs, global_step=getattr(self, "global_steps", None))
        with step_inputs(inputs):
            result = original(self, batch, metrics)
            if observing:
                observe_step(algorithm, *fetch_groups(batch.keys, batch.partition_id))
        metrics.update(pop_step_metrics())
        return result

    return _compute_advantage


def _wrap_legacy_data_metrics(module: ModuleType) -> None:
    _wrap_attribute(module, "compute_data_metrics", _data_metrics_wrapper)
    _wrap_attribute(module, "compute_advantage", _legacy_compute_advantage_wrapper)


def _legacy_compute_advantage_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantage(data: Any, *args: Any, config: Any = None, **kwargs: Any) -> Any:
        result = original(data, *args, config=config, **kwargs)
        # Under V1 (step inputs set) the V1 wrapper observes the whole batch; this sees one session output each.
        if config is not None and observes(config) and current_step_inputs() is None:
            observe_step(config, data.batch["response_mask"], data.non_tensor_batch["uid"], data.non_tensor_batch)
        return result

    return compute_advantage


def _data_metrics_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_data_metrics(*args: Any, **kwargs: Any) -> dict:
        metrics = original(*args, **kwargs)
        metrics.update(pop_step_metrics())
        return metrics

    return compute_data_metrics


def _register_reward_manager(module: ModuleType) -> None:
    importlib.import_module("gdpo_verl.rewards.manager")


# --------------------------------------------------------------------------- V1: reading TransferQueue


def fetch_step_inputs(keys: Sequence[str], partition_id: str, reward_keys: Sequence[str]) -> StepInputs:
    """Each sample's GDPO reward components from TransferQueue, in the order of ``keys``."""
    import transfer_queue as tq

    token_keys = [TOKEN_LEVEL_PREFIX + key for key in reward_keys]
    data = tq.kv_batch_get(
        keys=list(keys), partition_id=partition_id, select_fields=["extra_fields", *reward_keys, *token_keys]
    )
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
        # The estimator's order: per-token scores win over one value per response.
        for name in (TOKEN_LEVEL_PREFIX + key, key):
            if name in components or name in tensors:
                break
            present = [name in info for info in infos]
            if all(present):
                components[name] = _object_array([info[name] for info in infos])
                break
            if any(present):
                missing = [sample for sample, here in zip(keys, present, strict=True) if not here]
                raise ValueError(
                    f"reward component {name!r} is missing from reward_extra_info of {len(missing)} of {len(keys)} "
                    f"samples (first: {missing[0]!r}). compute_score must return the same keys for every response."
                )
        else:
            absent.append(key)
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


# --------------------------------------------------------------------------- wrapping and import hooks


def _wrap_attribute(owner: Any, name: str, make_wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = getattr(owner, name)
    if getattr(original, _WRAPPED, None) is not None:
        return
    wrapper = make_wrapper(original)
    setattr(wrapper, _WRAPPED, original)
    setattr(owner, name, wrapper)
    logger.debug("gdpo-verl: wrapped %s.%s", getattr(owner, "__name__", owner), name)


_pending: dict[str, list[Callable[[ModuleType], None]]] = {}


def after_import(module_name: str, hook: Callable[[ModuleType], None]) -> None:
    """Run ``hook(module)`` now if ``module_name`` is imported, else right after it is first imported."""
    module = sys.modules.get(module_name)
    if module is not None:
        hook(module)
        return
    hooks = _pending.setdefault(module_name, [])
    if hook not in hooks:
        hooks.append(hook)
    if not any(isinstance(finder, _AfterImportFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterImportFinder())


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module with pending hooks it returns the regular spec with a loader
    whose ``exec_module`` runs the hooks once the module body has run."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _pending:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_hook(module: ModuleType) -> None:
            exec_module(module)
            for hook in _pending.pop(fullname, []):
                hook(module)

        spec.loader.exec_module = exec_then_hook
        return spec
