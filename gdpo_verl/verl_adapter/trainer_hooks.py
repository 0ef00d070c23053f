"""Where gdpo-verl hooks into verl's trainers. Installed by the plugin.

verl 0.9.1 has no extension point for these, so verl functions are wrapped (never replaced: each wrapper
calls verl's own code) when their modules are first imported (``import_hooks``), each after the check of its
touch point (``touch_points.require``: a verl where it is missing or changed is refused with one line naming it):

- ``verl.utils.config.validate_config`` (called by ``main_ppo`` before Ray starts): also runs
  ``check_config``, so GDPO configuration errors surface before any GPU is allocated.
- ``main_ppo.run_ppo`` (wrapped from ``validate_config``, as ``python -m verl.trainer.main_ppo`` runs the module as
  ``__main__``, and when imported, as verl's experimental entry points do): when GDPO is in use, it checks the
  config (if ``validate_config`` did not just do so) and that ``trainer.default_local_dir`` is no other run's
  (``checkpoint_owner``), prints the memory plan and stops a setup that cannot fit (``memory_plan``), all before Ray
  starts; with ``GDPO_VERL_CHECK_ONLY=1`` (recipes: ``CHECK=1``) it stops there. Otherwise it records the run as the
  checkpoint directory's owner and, the first thing after connecting to Ray, before it starts verl's TaskRunner,
  checks that "gdpo" is this plugin's estimator on every node (``cluster``).
- V1 trainer (verl's default), ``PPOTrainer._compute_advantage``: verl fetches only uid, masks, ``rm_scores``
  and log-probs from TransferQueue there. For "gdpo" and CorrGRPO (``OUR_ESTIMATORS``) the wrapper also fetches
  each sample's reward components and runs verl's own stage inside a ``Step`` (settings, global step, components),
  then logs the step's ``gdpo/`` metrics from it.
- Legacy trainer (``trainer.use_v1=False``): ``RayPPOTrainer.fit`` makes the running trainer known (for its
  global step); ``ray_trainer.compute_advantage`` runs inside a ``Step`` (which carries the batch's components to
  CorrGRPO, to which verl passes none) and puts its metrics on the batch's
  ``meta_info``, from where the ``compute_data_metrics`` wrapper logs them.
- verl's experimental trainers (``one_step_off_policy``, ``fully_async_policy``) run on
  ``separation.ray_trainer.SeparateRayPPOTrainer``, whose own ``fit`` replaces the legacy one: its
  ``_fit_compute_advantage`` makes the running trainer known, and the same three legacy functions are wrapped by
  the names that module calls them. ``fully_async_policy``'s ``FullyAsyncTrainer.load_checkpoint`` numbers the
  first step of a resumed run one past the step after its checkpoint (verl 0.9.1); for GDPO runs the wrapper sets
  the global step back to the number of steps the checkpoint holds, so no step number is skipped and the records
  of the steps a killed run did not checkpoint are set aside (``resumed_step_number``).
- ``verl.experimental.reward_loop.reward_manager``: registers the "gdpo_verl" reward manager.
- ``RewardLoopWorker.compute_score`` (every reward manager's results pass there, on both trainers): each response's
  ``compute_score`` dict must hold every GDPO reward component (None where one does not apply); a key left out stops
  the run there, at the first response of the first step, naming the keys the dict holds
  (``components.require_components``).

Under another estimator with ``algorithm.gdpo_reward_keys`` set, both trainers run the same steps to log the
``gdpo/`` metrics of what GDPO would compute (``estimator.observe``), leaving that estimator's advantages alone.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from gdpo_verl.records.steps import RecordWriter
from gdpo_verl.verl_adapter.checkpoint_owner import check_checkpoint_owner, claim_checkpoint_dir
from gdpo_verl.verl_adapter.cluster import require_plugin_on_every_node, require_reward_on_every_node
from gdpo_verl.verl_adapter.components import TOKEN_LEVEL_PREFIX, require_components
from gdpo_verl.verl_adapter.estimator import Step, current_step, observe, running
from gdpo_verl.verl_adapter.import_hooks import after_import, wrap_attribute
from gdpo_verl.verl_adapter.memory_plan import print_memory_plan
from gdpo_verl.verl_adapter.names import ESTIMATOR_NAME, OUR_ESTIMATORS
from gdpo_verl.verl_adapter.reward_config import reward_node_check
from gdpo_verl.verl_adapter.settings import check_config, observes, settings_from_config
from gdpo_verl.verl_adapter.touch_points import (FULLY_ASYNC_TRAINER, LEGACY_TRAINER, MAIN_PPO, REWARD_LOOP,
                                                 REWARD_MANAGERS, SEPARATION_TRAINER, V1_TRAINER, actor_class,
                                                 require)
from gdpo_verl.verl_adapter.transfer_queue import fetch_groups, fetch_step_inputs

logger = logging.getLogger("gdpo_verl")

# The legacy trainer hands the step's gdpo/ metrics from compute_advantage to compute_data_metrics on the batch.
METRICS_KEY = "gdpo_verl_metrics"
# ... and the step's reward keys to the compute_timing_metrics wrapper (applied_component_stats).
REWARD_KEYS_KEY = "gdpo_verl_reward_keys"

# The attribute of verl's trainer object that holds its run's RecordWriter (record_writer).
RECORD_WRITER_ATTRIBUTE = "_gdpo_verl_record_writer"

# Set to 1 (recipes: CHECK=1), a launch runs verl's checks and gdpo-verl's, prints the memory plan and stops before
# Ray starts.
CHECK_ONLY_ENV = "GDPO_VERL_CHECK_ONLY"


def check_only() -> bool:
    value = os.environ.get(CHECK_ONLY_ENV, "0")
    if value not in ("0", "1", ""):
        raise ValueError(f"{CHECK_ONLY_ENV}={value!r}: set 1 (check the launch and stop before Ray) or 0.")
    return value == "1"


# The config that validate_config checked last in this thread (main_ppo then hands it to run_ppo).
_CHECKED_CONFIG: ContextVar[Any] = ContextVar("gdpo_verl_checked_config", default=None)

# The legacy trainer whose fit() is running in this thread (its global_steps numbers the step's records).
_LEGACY_TRAINER: ContextVar[Any] = ContextVar("gdpo_verl_legacy_trainer", default=None)


def install() -> None:
    """Wrap verl's functions now or when their modules are imported. Idempotent."""
    after_import("verl.utils.config", _wrap_validate_config)
    after_import(V1_TRAINER, _wrap_v1_trainer)
    after_import(LEGACY_TRAINER, _wrap_legacy_trainer)
    after_import(SEPARATION_TRAINER, _wrap_separation_trainer)
    after_import(FULLY_ASYNC_TRAINER, _wrap_fully_async_trainer)
    after_import(MAIN_PPO, _wrap_imported_run_ppo)
    after_import(REWARD_MANAGERS, _register_reward_manager)
    after_import(REWARD_LOOP, _wrap_reward_loop_worker)


def _wrap_validate_config(module: ModuleType) -> None:
    require(module)

    def wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def validate_config(config: Any, *args: Any, **kwargs: Any) -> Any:
            check_config(config)
            _CHECKED_CONFIG.set(config)
            _wrap_run_ppo()
            return original(config, *args, **kwargs)

        return validate_config

    wrap_attribute(module, "validate_config", wrapper)


def _wrap_run_ppo() -> None:
    """Wrap ``run_ppo`` of verl's ``main_ppo`` when it runs as ``__main__`` (``python -m verl.trainer.main_ppo``, where
    no import of ``verl.trainer.main_ppo`` happens before it calls ``validate_config``)."""
    module = sys.modules.get("__main__")
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.name == MAIN_PPO:
        require(module, module_name=spec.name)
        wrap_attribute(module, "run_ppo", _run_ppo_wrapper)


def _wrap_imported_run_ppo(module: ModuleType) -> None:
    """``run_ppo`` as the other entry points import it (verl's experimental ``one_step_off_policy.main_ppo`` and
    ``fully_async_policy.fully_async_main`` call it without ``validate_config`` in the driver)."""
    require(module)
    wrap_attribute(module, "run_ppo", _run_ppo_wrapper)


def _run_ppo_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run_ppo(config: Any, task_runner_class: Any, *args: Any, **kwargs: Any) -> Any:
        algorithm = config.algorithm
        ours = algorithm.adv_estimator in OUR_ESTIMATORS or observes(algorithm)
        if ours:
            if _CHECKED_CONFIG.get() is not config:  # main_ppo's validate_config checked it just before
                check_config(config)  # before Ray starts, whichever entry point called
            check_checkpoint_owner(config)
            print_memory_plan(config)  # stops a setup that cannot fit, before any GPU is allocated
        if check_only():
            verl = ("verl's validate_config" if _CHECKED_CONFIG.get() is config else
                    "the checks this entry point of verl makes before Ray (it runs validate_config in its TaskRunner)")
            print(f"gdpo-verl: {CHECK_ONLY_ENV}=1: the config passed {verl} and gdpo-verl's checks; stopped before Ray "
                  "starts (no GPU allocated, no checkpoint directory written)", flush=True)
            return None
        if ours:
            claim_checkpoint_dir(config)
            task_runner_class = _NodesCheckedFirst(task_runner_class, reward_node_check(config))
        return original(config, task_runner_class, *args, **kwargs)

    return run_ppo


class _NodesCheckedFirst:
    """verl's TaskRunner actor class, started only after every Ray node passed ``require_plugin_on_every_node``
    and, when the run's reward runs programs in a sandbox (``reward_check``: ``reward_config.reward_node_check``),
    started one there (``require_reward_on_every_node``): ``run_ppo`` calls ``.remote()`` or
    ``.options(...).remote()`` once Ray is up, before any model is loaded."""

    def __init__(self, actor_class: Any, reward_check: tuple[Callable[..., Any], dict, str] | None) -> None:
        self._actor_class = actor_class
        self._reward_check = reward_check

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        _check_nodes(self._reward_check)
        return self._actor_class.remote(*args, **kwargs)

    def options(self, *args: Any, **kwargs: Any) -> Any:
        _check_nodes(self._reward_check)
        return self._actor_class.options(*args, **kwargs)


def _check_nodes(reward_check: tuple[Callable[..., Any], dict, str] | None) -> None:
    nodes = require_plugin_on_every_node()
    print(f'gdpo-verl: "gdpo" is gdpo-verl\'s estimator on all {len(nodes)} Ray node(s)', flush=True)
    if reward_check is not None:
        node_check, reward_kwargs, reward = reward_check
        require_reward_on_every_node(node_check, reward_kwargs, reward=reward)
        print(f"gdpo-verl: the reward's sandbox ({reward}) runs on all {len(nodes)} Ray node(s)", flush=True)


def _wrap_v1_trainer(module: ModuleType) -> None:
    require(module)

    def wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def _compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
            algorithm = self.config.algorithm
            observing = observes(algorithm)
            if algorithm.adv_estimator not in OUR_ESTIMATORS and not observing:
                return original(self, batch, metrics)
            settings = settings_from_config(algorithm, training=not observing)
            inputs = fetch_step_inputs(batch.keys, batch.partition_id, settings.reward_keys)
            with running(Step(settings, getattr(self, "global_steps", None), inputs, record_writer(self))) as step:
                result = original(self, batch, metrics)
                if observing:
                    observe(step, *fetch_groups(batch.keys, batch.partition_id), None)
            metrics.update(step.metrics)
            return result

        return _compute_advantage

    wrap_attribute(module.PPOTrainer, "_compute_advantage", wrapper)


def _wrap_legacy_trainer(module: ModuleType) -> None:
    require(module)
    wrap_attribute(module.RayPPOTrainer, "fit", _trainer_running_wrapper)
    _wrap_legacy_functions(module)


def _wrap_separation_trainer(module: ModuleType) -> None:
    """verl's experimental trainers (``one_step_off_policy``, ``fully_async_policy``) run on
    ``SeparateRayPPOTrainer``, whose own ``fit``/``fit_step`` replace ``RayPPOTrainer.fit``: the trainer is made
    known around its advantage stage instead, and the legacy functions it calls by its own names are wrapped there."""
    require(module)
    wrap_attribute(module.SeparateRayPPOTrainer, "_fit_compute_advantage", _trainer_running_wrapper)
    _wrap_legacy_functions(module)


def _wrap_fully_async_trainer(module: ModuleType) -> None:
    """``FullyAsyncTrainer`` is a Ray actor class: its method is wrapped on the class Ray runs
    (``touch_points.actor_class``), in every process that imports the module (the actor's own included)."""
    require(module)
    wrap_attribute(actor_class(module.FullyAsyncTrainer), "load_checkpoint", _load_checkpoint_wrapper)


def _load_checkpoint_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def load_checkpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = self.global_steps
        version = await original(self, *args, **kwargs)
        algorithm = self.config.algorithm
        if version and (algorithm.adv_estimator in OUR_ESTIMATORS or observes(algorithm)):
            resumed_step_number(self, before, version)
        return version

    return load_checkpoint


def resumed_step_number(trainer: Any, before: int, version: int) -> None:
    """After verl's fully asynchronous trainer loaded the checkpoint of weight ``version``: its ``fit`` adds 1 to
    ``global_steps`` before the first step, as from ``before`` (its value before the load) in a fresh run, so the
    first step after the checkpoint's ``version x trigger_parameter_sync_step`` steps is numbered one past them when
    ``global_steps`` is ``before`` plus those steps. verl 0.9.1 adds 1 more (``load_checkpoint``: ``version x
    trigger + 1``), which skips a step number: the resumed run's records would leave the killed run's record of the
    skipped number in place, and a weight schedule would read the wrong step."""
    trained = version * trainer.trigger_parameter_sync_step
    if trainer.global_steps == before + trained:
        return
    logger.warning(
        "gdpo-verl: verl's fully asynchronous trainer, resumed from the checkpoint of weight version %d (%d step(s) "
        "trained, %d per version), set its global step to %d, which would number the next step %d and skip step %d; "
        "set to %d, so the next step is %d.",
        version, trained, trainer.trigger_parameter_sync_step, trainer.global_steps, trainer.global_steps + 1,
        before + trained + 1, before + trained, before + trained + 1,
    )
    trainer.global_steps = before + trained


def _trainer_running_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    """A trainer's method inside which legacy advantage steps belong to that trainer (``legacy_trainer_running``)."""
    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        with legacy_trainer_running(self):
            return original(self, *args, **kwargs)

    return method


def _wrap_legacy_functions(module: ModuleType) -> None:
    """The legacy step's functions, by the names ``module`` calls them: ``compute_advantage`` runs inside a
    ``Step``, ``compute_data_metrics`` and ``compute_timing_metrics`` log what it measured. A name bound to a function
    already wrapped (imported from a module wrapped before) is left as it is."""
    wrap_attribute(module, "compute_advantage", _advantage_wrapper)
    wrap_attribute(module, "compute_data_metrics", _data_metrics_wrapper)
    wrap_attribute(module, "compute_timing_metrics", _timing_metrics_wrapper)


def _advantage_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def compute_advantage(*args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(*args, **kwargs).arguments
        running_step = current_step()
        if running_step is not None:  # inside the V1 stage, or a caller's step (the demo's), which runs its own
            if running_step.inputs is None and running_step.non_tensor_batch is None:  # a caller's: as below
                running_step.non_tensor_batch, running_step.tensors = batch_components(arguments.get("data"))
            return original(*args, **kwargs)
        config, estimator = arguments.get("config"), arguments.get("adv_estimator")
        observing = config is not None and observes(config)
        if estimator not in OUR_ESTIMATORS and not observing:
            return original(*args, **kwargs)
        settings = settings_from_config(config, training=not observing)
        trainer = _LEGACY_TRAINER.get()
        records = record_writer(trainer) if trainer is not None else RecordWriter()
        non_tensor, tensors = batch_components(arguments.get("data"))
        with running(Step(settings, getattr(trainer, "global_steps", None), records=records,
                          non_tensor_batch=non_tensor, tensors=tensors)) as step:
            data = original(*args, **kwargs)
        if observing:
            observe(step, data.batch["response_mask"], data.non_tensor_batch["uid"], data.non_tensor_batch)
        data.meta_info[METRICS_KEY] = step.metrics
        if estimator == ESTIMATOR_NAME:  # verl logs each component's statistics under "gdpo" only
            data.meta_info[REWARD_KEYS_KEY] = list(settings.reward_keys)
        return data

    return compute_advantage


def batch_components(data: Any) -> tuple[Any, dict]:
    """verl passes a batch's components to "gdpo" only: the ``non_tensor_batch`` and ``token_level_scores_<key>``
    tensors of the legacy ``DataProto`` ``data``, which the ``Step`` carries to CorrGRPO."""
    tensors = getattr(data, "batch", None)
    keys = tensors.keys() if tensors is not None else []
    return (getattr(data, "non_tensor_batch", None),
            {key: tensors[key] for key in keys if str(key).startswith(TOKEN_LEVEL_PREFIX)})


def _data_metrics_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_data_metrics(batch: Any, *args: Any, **kwargs: Any) -> dict:
        metrics = original(batch, *args, **kwargs)
        metrics.update(batch.meta_info.pop(METRICS_KEY, {}))
        return metrics

    return compute_data_metrics


def _timing_metrics_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_timing_metrics(*args: Any, **kwargs: Any) -> dict:
        metrics = original(*args, **kwargs)
        batch = kwargs.get("batch", args[0] if args else None)
        metrics.update(applied_component_stats(batch))
        return metrics

    return compute_timing_metrics


def applied_component_stats(batch: Any) -> dict[str, float]:
    """verl's legacy ``fit`` logs ``gdpo/<key>/{mean,std,max,min}`` of each component in ``non_tensor_batch`` (as
    float32), just before ``compute_timing_metrics``; a component that does not apply to some response (None there)
    gets NaN. This gives, for such a component, the same statistics over the responses it applies to, which the
    metrics dict takes in place of verl's (from the wrapper of ``compute_timing_metrics``, merged right after)."""
    import numpy as np

    non_tensor = getattr(batch, "non_tensor_batch", None) or {}
    meta_info = getattr(batch, "meta_info", None) or {}
    stats: dict[str, float] = {}
    for key in meta_info.pop(REWARD_KEYS_KEY, ()):
        values = non_tensor.get(key)
        if values is None or getattr(values, "dtype", None) != object or not any(v is None for v in values):
            continue
        applied = np.asarray([v for v in values if v is not None], dtype=np.float32)
        if applied.size:
            stats.update({f"gdpo/{key}/mean": float(np.mean(applied)), f"gdpo/{key}/std": float(np.std(applied)),
                          f"gdpo/{key}/max": float(np.max(applied)), f"gdpo/{key}/min": float(np.min(applied))})
        else:  # applies to no response: there is no mean (verl's NaN says so too; the estimator warned)
            stats.update({f"gdpo/{key}/{name}": float("nan") for name in ("mean", "std", "max", "min")})
    return stats


def record_writer(trainer: Any) -> RecordWriter:
    """The ``RecordWriter`` of ``trainer``'s run: created on its first step and kept on the trainer object. A new
    trainer (a resumed run, in this process or another) has a new one, which sets aside the records of the steps
    it runs again."""
    writer = getattr(trainer, RECORD_WRITER_ATTRIBUTE, None)
    if writer is None:
        writer = RecordWriter()
        setattr(trainer, RECORD_WRITER_ATTRIBUTE, writer)
    return writer


@contextmanager
def legacy_trainer_running(trainer: Any) -> Iterator[None]:
    """Inside the block, legacy advantage steps belong to ``trainer`` (its ``global_steps`` numbers their records)."""
    token = _LEGACY_TRAINER.set(trainer)
    try:
        yield
    finally:
        _LEGACY_TRAINER.reset(token)


def _register_reward_manager(module: ModuleType) -> None:
    require(module)
    for base in (f"{REWARD_MANAGERS}.naive", "verl.trainer.ppo.reward"):  # what the reward manager builds on
        require(importlib.import_module(base))
    importlib.import_module("gdpo_verl.verl_adapter.reward_manager")


def _wrap_reward_loop_worker(module: ModuleType) -> None:
    require(module)

    def wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        async def compute_score(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(self, *args, **kwargs)
            algorithm = self.config.get("algorithm", None)
            keys = algorithm.get("gdpo_reward_keys", None) if algorithm is not None else None
            info = result.get("reward_extra_info", None) if isinstance(result, dict) else None
            if keys and isinstance(info, dict):
                require_components(info, keys, self.__dict__.setdefault("_gdpo_verl_forms", {}))
            return result

        return compute_score

    wrap_attribute(module.RewardLoopWorker, "compute_score", wrapper)

