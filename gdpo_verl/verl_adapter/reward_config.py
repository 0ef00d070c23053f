"""The run's reward as verl's config names it (``reward.custom_reward_function``), read in the driver before Ray
starts: what the reward declares it needs of a run (``compute_score.needs``, gdpo_verl/rewards/needs.py), its
reward_kwargs with verl's Sandbox Fusion settings, and, for a reward that runs programs in a sandbox, that sandbox
started on this node. ``settings.check_config`` calls it; the "gdpo_verl" reward manager and the trainer hooks read
the same reward_kwargs and node check from here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from gdpo_verl.rewards.needs import RewardNeeds


def config_value(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]`` of an OmegaConf node, a dict or an object (verl's config dataclasses), else ``default``."""
    return config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)


PKG_PREFIX = "pkg://"  # a reward loaded as a module (verl.utils.import_utils.load_module), not from a file

# The reward modules this process loaded from files to read their declaration, by path and version: one import each,
# as verl's reward worker imports the file once.
_LOADED_FILES: dict[tuple[str, int, int], Any] = {}


def reward_needs(config: Any) -> RewardNeeds:
    """What the reward ``reward.custom_reward_function`` names declares it needs (``compute_score.needs``,
    ``gdpo_verl/rewards/needs.py``): its module (``pkg://<module>``) or file is imported here, in the driver before
    Ray starts, as verl imports it in its reward workers (``verl.utils.import_utils.load_module``). No reward
    function (verl's own scorers by data_source), or one that declares nothing, needs nothing of these checks. A
    reward that cannot be imported here, or that has no function of that name, is refused naming why."""
    function = reward_function(config)
    path = config_value(function, "path") if function is not None else None
    if not path:
        return RewardNeeds()
    return declared_needs(load_reward_function(str(path), config_value(function, "name") or "compute_score"), path)


def load_reward_function(path: str, name: str = "compute_score") -> Any:
    """The reward function ``name`` of ``path`` (``pkg://<module>`` or a file), imported as verl's reward workers
    import it; ValueError naming what is wrong."""
    where = f"reward.custom_reward_function.path={path}"
    module = _import_module(_module_name(path), where) if path.startswith(PKG_PREFIX) else _import_file(path, where)
    if not callable(getattr(module, name, None)):
        raise ValueError(f"reward.custom_reward_function.name={name} is not a function of {path}; name the reward "
                         "function it defines (compute_score for gdpo-verl's rewards).")
    return getattr(module, name)


def declared_needs(function: Any, path: str) -> RewardNeeds:
    """``function.needs``, checked to be a ``RewardNeeds``; an empty one when it declares nothing."""
    needs = getattr(function, "needs", None)
    if needs is not None and not isinstance(needs, RewardNeeds):
        raise ValueError(f"{path}: {getattr(function, '__name__', 'the reward function')}.needs must be a "
                         f"gdpo_verl.rewards.needs.RewardNeeds; got {type(needs).__name__}.")
    return needs or RewardNeeds()


def _import_module(module_name: str, where: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):  # it, or a package above it
            raise ValueError(f"{where}: there is no module {module_name} here. Name an installed module "
                             "(pkg://gdpo_verl.rewards.math_length, ...) or a file.") from exc
        raise ValueError(f"{where}: importing it failed ({exc}). gdpo-verl reads what the reward declares it needs "
                         "(compute_score.needs) in the driver, before Ray starts: install what it imports on this "
                         "node too.") from exc
    except Exception as exc:
        raise ValueError(f"{where}: importing it failed ({type(exc).__name__}: {exc}). gdpo-verl reads what the "
                         "reward declares it needs (compute_score.needs) in the driver, before Ray starts.") from exc


def _import_file(path: str, where: str) -> Any:
    """A reward file, imported as verl's reward workers import it (``verl.utils.import_utils.load_module``)."""
    from verl.utils.import_utils import load_module

    file = path.removeprefix("file://")
    if not os.path.isfile(file):
        what = "is a directory" if os.path.isdir(file) else "does not exist"
        raise ValueError(f"{where}: {os.path.abspath(file)} {what} on this node. Give the reward file's path (verl's "
                         "reward workers load it from the same path on their nodes).")
    status = os.stat(file)
    key = (os.path.realpath(file), status.st_mtime_ns, status.st_size)  # a file rewritten since is imported again
    if key not in _LOADED_FILES:
        try:
            _LOADED_FILES[key] = load_module(path)
        except Exception as exc:
            cause = exc.__cause__ or exc  # verl's loader wraps every error as "Error loading module ..."
            raise ValueError(f"{where}: importing it failed ({type(cause).__name__}: {cause}). gdpo-verl imports the "
                             "reward in the driver, before Ray starts, to read what it declares (compute_score.needs), "
                             "as verl's reward workers import it: install what it imports on this node too.") from exc
    return _LOADED_FILES[key]


def sandboxed_reward_kwargs(config: Any) -> dict | None:
    """The reward_kwargs of a reward that runs programs in gdpo-verl's sandbox (its ``node_check``), else None.
    They carry verl's ``reward.sandbox_fusion`` settings as ``sandbox_fusion`` (verl itself passes those only to
    its own scorers): what the sandbox checks and the "gdpo_verl" reward manager give the reward. A url set while
    the reward runs programs elsewhere is refused (``CodingReward.sandbox``), not ignored."""
    return _with_sandbox_fusion(config) if reward_needs(config).node_check is not None else None


def reward_node_check(config: Any) -> tuple[Any, dict, str] | None:
    """For a reward that runs programs in a sandbox (its declared ``node_check``): the check, the reward_kwargs it
    is run with (``sandboxed_reward_kwargs``) and the reward's name for messages; else None."""
    node_check = reward_needs(config).node_check
    if node_check is None:
        return None
    return node_check, _with_sandbox_fusion(config), _module_name(config_value(reward_function(config), "path"))


def _module_name(path: str) -> str:
    """The module a ``pkg://`` path names."""
    return path[len(PKG_PREFIX):].replace("/", ".")


def _with_sandbox_fusion(config: Any) -> dict:
    """The reward's reward_kwargs, with verl's ``reward.sandbox_fusion`` settings as ``sandbox_fusion``."""
    reward = config_value(config, "reward")
    reward_kwargs = dict(config_value(reward_function(config), "reward_kwargs") or {})
    if "sandbox_fusion" in reward_kwargs:
        raise ValueError("reward.custom_reward_function.reward_kwargs.sandbox_fusion: Sandbox Fusion's address and "
                         "limits are verl's own settings; set reward.sandbox_fusion.url (.max_concurrent, "
                         ".memory_limit_mb) instead.")
    fusion = config_value(reward, "sandbox_fusion")
    if fusion is None or not config_value(fusion, "url"):
        fusion = config_value(config, "sandbox_fusion")  # verl's earlier place for it, which verl still moves over
    if fusion is not None and config_value(fusion, "url"):
        reward_kwargs["sandbox_fusion"] = {name: config_value(fusion, name)
                                           for name in ("url", "max_concurrent", "memory_limit_mb")}
    return reward_kwargs


def reward_function(config: Any) -> Any:
    """``reward.custom_reward_function``, or None."""
    reward = config_value(config, "reward")
    return config_value(reward, "custom_reward_function") if reward is not None else None


def reward_options(config: Any) -> Mapping[str, Any] | None:
    """The reward's options as it reads them from the reward_kwargs it is called with (its declared ``options``,
    ``RewardNeeds``; verl's ``reward.sandbox_fusion`` settings among them for a reward that runs programs, as the
    "gdpo_verl" reward manager passes them), checked here before Ray starts: ValueError naming an unknown or bad one.
    None for a reward that declares none."""
    needs = reward_needs(config)
    if needs.options is None:
        return None
    if needs.node_check is not None:
        return needs.options(_with_sandbox_fusion(config))
    return needs.options(dict(config_value(reward_function(config), "reward_kwargs") or {}))


def check_reward_on_this_node(config: Any) -> None:
    """A reward that runs programs in a sandbox: on this (the driver's) node, start one before Ray starts, and stop
    with the node's problem and its fix if it cannot (every other node is checked once Ray is up, before the
    TaskRunner starts: trainer_hooks; each reward worker checks its own node again when it starts)."""
    reward_check = reward_node_check(config)
    if reward_check is not None:
        node_check, reward_kwargs, _ = reward_check
        node_check(**reward_kwargs)
