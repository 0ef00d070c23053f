"""GDPO settings read from verl's ``algorithm`` config, validated once with errors that name the fix.

The ``algorithm.gdpo`` options are declared, each once with its default, check and meaning, in
``gdpo_verl/core/options.py`` (the packaged config's block is rendered from it); the keys of ``algorithm`` itself
in ``gdpo_verl/config/gdpo/settings.yaml``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from importlib.resources import files
from typing import Any

from omegaconf import OmegaConf

from gdpo_verl.core.checks import boolean, did_you_mean, finite_number
from gdpo_verl.core.conditions import check_conditions
from gdpo_verl.core.options import (
    COMPUTED, DEFAULTS, GDPO_ONLY, IN_BLOCK, OPTIONS, GdpoOptions, checked, unread,
)
from gdpo_verl.core.reward_keys import weights_for
from gdpo_verl.core.variants import WeightSchedule, weights_at
from gdpo_verl.verl_adapter.components import TOKEN_LEVEL_PREFIX
from gdpo_verl.verl_adapter.reward_config import (
    check_reward_on_this_node, reward_function, reward_needs, reward_options,
)
from gdpo_verl.verl_adapter.reward_config import config_value as _get
from gdpo_verl.verl_adapter.names import CORRGRPO_NAMES, ESTIMATOR_NAME, OUR_ESTIMATORS

# The packaged config, whose algorithm.gdpo block is rendered from core/options.py (a test checks it is).
CONFIG_FILE = files("gdpo_verl.config") / "gdpo" / "settings.yaml"
# The options under ``algorithm.gdpo`` and their defaults.
OPTION_DEFAULTS: dict[str, Any] = {name: DEFAULTS[name] for name in IN_BLOCK}

# Every ``algorithm`` key of GDPO's own (the options declared under one, and the block); any other key starting with
# "gdpo" is a typo.
GDPO_KEYS = (*(option.key.removeprefix("algorithm.") for option in OPTIONS.values()
               if option.key.startswith("algorithm.gdpo_")), "gdpo")

logger = logging.getLogger("gdpo_verl")

@dataclass(frozen=True)
class GdpoSettings:
    """What GDPO reads from ``algorithm``: the reward keys and weights, how to normalize (``options``, which the
    core's result carries too) and where to record the steps. ``estimator``: "gdpo", or "corrgrpo" when
    ``algorithm.adv_estimator`` is one of ``CORRGRPO_NAMES`` (which reads none of the options declared
    ``gdpo_only``: they are left at their defaults, others refused)."""

    reward_keys: tuple[str, ...]
    weights: dict[str, float | WeightSchedule]
    options: GdpoOptions
    dump_dir: str | None = None
    estimator: str = ESTIMATOR_NAME

    def weights_at(self, step: int | None) -> dict[str, float]:
        """The weights in force at the trainer's global ``step`` (None: outside a trainer, refused when a weight
        is scheduled)."""
        return weights_at(self.weights, step)

    @property
    def scheduled(self) -> bool:
        return any(isinstance(weight, WeightSchedule) for weight in self.weights.values())


def settings_from_config(algorithm: Any, training: bool = True) -> GdpoSettings:
    """Read and validate the GDPO keys of ``algorithm`` (a DictConfig, or verl's AlgoConfig dataclass).

    ``training=False``: for logging what GDPO would compute while another estimator trains, where a KL
    penalty in the reward is that estimator's business.
    """
    if algorithm is None:
        raise ValueError(
            "the gdpo estimator needs verl's algorithm config (config=...) to know which rewards to use; got None."
        )
    if isinstance(algorithm, Mapping):
        # keys that start with "gdpo", or that are one typo away from a GDPO key (gpdo_reward_weights)
        unknown = sorted(
            key for key in algorithm if key not in GDPO_KEYS
            and (str(key).startswith("gdpo") or difflib.get_close_matches(str(key), GDPO_KEYS, n=1, cutoff=0.85))
        )
        if unknown:
            named = ", ".join(f"algorithm.{key}{did_you_mean(str(key), GDPO_KEYS)}" for key in unknown)
            raise ValueError(
                f"unknown GDPO key(s) {named}; GDPO reads algorithm.{list(GDPO_KEYS)}. "
                "A misspelled key would otherwise be ignored and its default used."
            )
    name = _get(algorithm, "adv_estimator")
    corrgrpo = training and name in CORRGRPO_NAMES
    if corrgrpo and _get(algorithm, "gdpo_reward_keys") is None:
        raise ValueError(
            f"algorithm.adv_estimator={name} (CorrGRPO) needs algorithm.gdpo_reward_keys, the reward components "
            "whose correlations it takes (the authors' fork refuses a config without it too). Add "
            "+algorithm.gdpo_reward_keys=[...] listing the components that compute_score returns, and "
            "+algorithm.gdpo_reward_weights if the config has weights."
        )
    block = _get(algorithm, "gdpo", None)
    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise ValueError(
            f"algorithm.gdpo must be a mapping of options {sorted(OPTION_DEFAULTS)}; got {type(block).__name__}."
        )
    unknown = sorted(set(block) - set(OPTION_DEFAULTS))
    if unknown:
        named = ", ".join(f"algorithm.gdpo.{key}{did_you_mean(str(key), OPTION_DEFAULTS)}" for key in unknown)
        raise ValueError(f"unknown option(s) {named}; known options: {sorted(OPTION_DEFAULTS)}.")
    # each option from algorithm.gdpo, or from its own key of algorithm, as its declaration checks it
    values = {name: checked(name, _plain(_get(block, name, option.default) if option.in_block else
                                         _get(algorithm, option.key.removeprefix("algorithm."), option.default)),
                            option.key)
              for name, option in OPTIONS.items()}
    keys = values["reward_keys"]
    weights = weights_for(keys, values["reward_weights"], OPTIONS["reward_weights"].key)

    if training and boolean(_get(algorithm, "use_kl_in_reward", False), "algorithm.use_kl_in_reward"):
        raise ValueError(
            f"algorithm.use_kl_in_reward=True is not supported with algorithm.adv_estimator={name}: it reads each "
            "reward component, so a KL penalty folded into the summed reward would be lost. Set "
            "algorithm.use_kl_in_reward=False and put the KL in the loss instead: "
            "actor_rollout_ref.actor.use_kl_loss=True (the paper uses kl_loss_type=mse, kl_loss_coef=0.0005)."
        )
    try:
        conditions = check_conditions(keys, values["conditions"])
    except ValueError as exc:
        raise ValueError(f"algorithm.gdpo.{exc}") from exc
    computed = GdpoOptions(**{**{option: values[option] for option in COMPUTED}, "conditions": conditions})
    if corrgrpo:
        _check_corrgrpo_options(name, values, computed)
        return GdpoSettings(keys, weights, computed, values["dump_dir"], CORRGRPO_NAMES[0])
    _check_variants(keys, computed)
    ignored = unread([option for option in OPTIONS if values[option] != DEFAULTS[option]], values)
    if ignored:
        option = ignored[0]
        needs, needed = OPTIONS[option].only_with
        raise ValueError(
            f"{OPTIONS[option].key}={values[option]} is read by {OPTIONS[needs].key}={needed} only, and {needs} is "
            f"{values[needs]}: it would be ignored. Set {needs}={needed}, or leave {option} at its default."
        )
    return GdpoSettings(keys, weights, computed, values["dump_dir"])


def _check_variants(keys: tuple[str, ...], options: GdpoOptions) -> None:
    """Refuse what GD2PO and SAW cannot do with one reward: nothing (no two rewards to disagree or to weigh)."""
    for name, value in (("conflict", options.conflict), ("adaptive_weights", options.adaptive_weights)):
        if value != "none" and len(keys) < 2:
            raise ValueError(
                f"algorithm.gdpo.{name}={value} works between reward components, and gdpo_reward_keys lists one "
                f"({list(keys)}): it would do nothing. List two or more components, or set algorithm.gdpo.{name}=none."
            )


def _check_corrgrpo_options(name: str, values: Mapping[str, Any], options: GdpoOptions) -> None:
    """Refuse a GDPO-only option set away from its default under CorrGRPO, which would ignore it, and an eps of 0
    (``corrgrpo_outcome_parts`` would refuse it at the first step)."""
    if options.norm_by_std and options.eps <= 0:
        raise ValueError(
            f"algorithm.gdpo.eps=0 with algorithm.adv_estimator={name} (CorrGRPO): eps is added under its square root, "
            "and where the components' correlations sum to 0 it is all that keeps the denominator from 0. Use the "
            f"default, {DEFAULTS['eps']:g} (the authors' epsilon)."
        )
    changed = [f"{option}={values[option]}" for option in GDPO_ONLY if values[option] != DEFAULTS[option]]
    if changed:
        reads = ", ".join(OPTIONS[option].key.removeprefix("algorithm.") for option in OPTIONS
                          if option not in GDPO_ONLY)
        raise ValueError(
            f"algorithm.gdpo.{', '.join(changed)} belong(s) to GDPO's steps, and algorithm.adv_estimator={name} "
            "(CorrGRPO) has none of them: no batch step, the group mean as its baseline, no conflict masking and the "
            "configured weights. They would be ignored: leave them at their defaults, or train with "
            f"algorithm.adv_estimator=gdpo. CorrGRPO reads {reads}."
        )


def reward_timeout(options: Any) -> float | None:
    """``algorithm.gdpo.reward_timeout_s`` from the ``algorithm.gdpo`` mapping (or None): seconds, or None."""
    value = DEFAULTS["reward_timeout_s"] if options is None else _get(options, "reward_timeout_s",
                                                                      DEFAULTS["reward_timeout_s"])
    return checked("reward_timeout_s", value, OPTIONS["reward_timeout_s"].key)


def _plain(value: Any) -> Any:
    """An omegaconf list or mapping as a Python one (interpolations resolved), anything else unchanged."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


# The reward_extra_info key that gdpo_verl's reward manager fills with a value that differs between two
# responses whenever any of their GDPO reward components differ (see gdpo_verl/verl_adapter/reward_manager.py).
SIGNATURE_KEY = "gdpo_signature"
REWARD_MANAGER_NAME = "gdpo_verl"


def observes(algorithm: Any) -> bool:
    """True when another estimator trains and ``algorithm.gdpo_reward_keys`` asks for GDPO's view of each step."""
    return _get(algorithm, "adv_estimator") not in OUR_ESTIMATORS and _get(algorithm, "gdpo_reward_keys") is not None


def check_config(config: Any) -> GdpoSettings | None:
    """Everything about GDPO that can be checked from the whole training config alone, before Ray starts.

    Returns the settings when ``algorithm.adv_estimator`` is "gdpo" or CorrGRPO's (``OUR_ESTIMATORS``), else
    None. Raises ValueError naming the fix otherwise. Under another estimator, ``algorithm.gdpo_reward_keys`` asks
    for the ``gdpo/`` metrics of what GDPO would compute (``observes``); those settings are checked too.
    """
    algorithm = _get(config, "algorithm")
    if algorithm is None:
        return None
    estimator = _get(algorithm, "adv_estimator")
    settings = settings_from_config(algorithm) if estimator in OUR_ESTIMATORS else None
    observed = settings_from_config(algorithm, training=False) if observes(algorithm) else None
    if observed is not None and observed.dump_dir is not None:
        raise ValueError(
            f"algorithm.gdpo.dump_dir records the advantages GDPO trains on, but algorithm.adv_estimator is "
            f"{estimator!r}: nothing would be written. Unset algorithm.gdpo.dump_dir (the gdpo/ metrics are still "
            "logged), or train with algorithm.adv_estimator=gdpo."
        )
    if settings is not None or observed is not None:
        _check_declared_returns(config, settings or observed)
        options = reward_options(config)  # the reward's own options, checked as its calls will check them
        _check_score_weights(config, settings or observed, options)
        _log_negative_weights(settings or observed)
    if settings is not None and settings.dump_dir is not None:
        check_dump_dir(settings.dump_dir)
    if settings is not None or observed is not None:
        check_reward_on_this_node(config)
        _check_transfer_queue(config)

    filter_groups = _get(algorithm, "filter_groups")
    if filter_groups is not None and _get(filter_groups, "enable", False):
        if (settings is not None or observed is not None) and not _v1_trainer(config):
            raise ValueError(
                "algorithm.filter_groups.enable=true (dynamic sampling) runs on verl's V1 trainer only (its replay "
                "buffer drops the groups); verl's legacy trainer (trainer.use_v1=false) and its experimental trainers "
                "(one_step_off_policy, fully_async_policy) ignore it and would train on every group. Set "
                "algorithm.filter_groups.enable=false, or train with the V1 trainer (verl.trainer.main_ppo, "
                "trainer.use_v1=true)."
            )
        metric = _get(filter_groups, "metric")
        reward = _get(config, "reward")
        manager = _get(reward, "reward_manager") if reward is not None else None
        manager_name = _get(manager, "name") if manager is not None else None
        manager_source = _get(manager, "source", "register") if manager is not None else None
        ours = manager_name == REWARD_MANAGER_NAME and manager_source == "register"
        if metric == SIGNATURE_KEY and not ours:
            raise ValueError(
                f"algorithm.filter_groups.metric={SIGNATURE_KEY} is computed by gdpo-verl's reward manager, but "
                f"reward.reward_manager is {manager_source}:{manager_name}. Set "
                f"reward.reward_manager.name={REWARD_MANAGER_NAME} (reward.reward_manager.source=register)."
            )
        if metric != SIGNATURE_KEY and settings is not None and (settings.scheduled
                                                                 or settings.options.adaptive_weights != "none"):
            varying = "a scheduled weight" if settings.scheduled else "algorithm.gdpo.adaptive_weights=saw"
            raise ValueError(
                f"algorithm.filter_groups.metric={metric} with {varying}: dynamic sampling would keep or drop groups "
                "by the summed score, whose weights stay those of reward_kwargs while GDPO's change from step to step. "
                f"Set algorithm.filter_groups.metric={SIGNATURE_KEY} (it keeps a group when any component varies in "
                "it, whatever the weights)."
            )
        if metric == SIGNATURE_KEY and not _get(algorithm, "gdpo_reward_keys"):
            raise ValueError(
                f"algorithm.filter_groups.metric={SIGNATURE_KEY} needs algorithm.gdpo_reward_keys: the signature "
                "is taken over those reward components."
            )
    return settings


def _check_transfer_queue(config: Any) -> None:
    """verl's V1 trainer keeps its samples in TransferQueue; without it, verl's TaskRunner would fail on its import
    after Ray and the workers started. The legacy trainer needs none, nor do verl's experimental trainers
    (``_v1_trainer``)."""
    if _v1_trainer(config) and importlib.util.find_spec("transfer_queue") is None:
        raise ValueError(
            "trainer.use_v1=true (verl's default) trains with verl's V1 trainer, which keeps its samples in "
            "TransferQueue, and transfer_queue cannot be imported here. Install it on every node (pip install "
            "'transferqueue>=0.1.11'), or train with verl's legacy trainer: trainer.use_v1=false."
        )


def _v1_trainer(config: Any) -> bool:
    """Whether ``config`` trains with verl's V1 trainer: ``trainer.use_v1`` (true by default), and not one of verl's
    experimental trainers (one_step_off_policy, fully_async_policy), whose configs keep ``trainer.use_v1=true`` from
    ppo_trainer.yaml but add a top-level ``rollout`` (their standalone rollout's nodes)."""
    trainer = _get(config, "trainer")
    use_v1 = True if trainer is None else _get(trainer, "use_v1", True)
    return bool(use_v1) and _get(config, "rollout") is None


def _log_negative_weights(settings: GdpoSettings) -> None:
    """A negative weight is allowed (a reward where more is worse, such as a token count) but said once, at start-up:
    a sign typo would otherwise train the policy away from what the reward pays for."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
        return  # verl's legacy TaskRunner (a Ray actor) repeats main_ppo's config check: the driver said it already
    lowest = {key: min(point for _, point in weight.points) if isinstance(weight, WeightSchedule) else weight
              for key, weight in settings.weights.items()}
    negative = {key: weight for key, weight in lowest.items() if weight < 0}
    if negative:
        listed = ", ".join(f"{key}: {weight:g}" for key, weight in negative.items())
        logger.warning(
            "algorithm.gdpo_reward_weights has a negative weight (%s): GDPO's advantage rises as such a reward falls, "
            "so the policy is trained to lower it. That is right for a reward where more is worse (a length in tokens, "
            "a count of errors); for a reward that pays for good responses, make its weight positive.",
            listed,
        )


def check_dump_dir(dump_dir: str) -> None:
    """Refuse an ``algorithm.gdpo.dump_dir`` that cannot hold the records: a file, or a path under a file or
    under a directory this process may not write. Nothing is created here."""
    path = Path(dump_dir).expanduser()
    fix = "Set algorithm.gdpo.dump_dir to a writable directory (on the node that runs verl's TaskRunner), or null."
    if path.exists() and not path.is_dir():
        raise ValueError(f"algorithm.gdpo.dump_dir={dump_dir!r} is a file, not a directory. {fix}")
    existing = next(parent for parent in (path, *path.absolute().parents) if parent.exists())
    if not existing.is_dir():
        raise ValueError(f"algorithm.gdpo.dump_dir={dump_dir!r}: {existing} is a file, not a directory. {fix}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"algorithm.gdpo.dump_dir={dump_dir!r}: {existing} is not writable by this process. {fix}")


def _check_declared_returns(config: Any, settings: GdpoSettings) -> None:
    """A reward that declares the keys its dict holds (``RewardNeeds.returns``): every reward key must be one of them.
    Without a declaration the same mistake stops the run at the first response scored
    (``components.require_components``)."""
    declared = reward_needs(config).returns
    returns = [key.removeprefix(TOKEN_LEVEL_PREFIX) for key in declared]  # a per-token component is its key too
    unknown = [key for key in settings.reward_keys if returns and key not in returns]
    if unknown:
        path = _get(reward_function(config), "path")
        named = ", ".join(f"{key!r}{did_you_mean(key, returns)}" for key in unknown)
        raise ValueError(
            f"algorithm.gdpo_reward_keys={list(settings.reward_keys)} names {named}, which the reward "
            f"{path} does not return: it declares {list(declared)} besides 'score' (compute_score.needs.returns). "
            "List the components it returns."
        )


def _check_score_weights(config: Any, settings: GdpoSettings, options: Mapping[str, Any] | None) -> None:
    """GDPO's weights and the weights in the summed ``score`` (what GRPO and dynamic sampling use) must agree
    for a reward whose score takes them (``RewardNeeds.weights_in_score``): a weight given to one and not the other
    would go unnoticed. ``options``: the reward's options as it reads them (their declared defaults), else None
    (a ``<key>_weight`` not given is then 1.0)."""
    if not reward_needs(config).weights_in_score:
        return
    given = options if options is not None else _get(reward_function(config), "reward_kwargs") or {}
    in_score = {
        key: finite_number(_get(given, f"{key}_weight", 1.0),
                           f"reward.custom_reward_function.reward_kwargs.{key}_weight")
        for key in settings.reward_keys
    }
    # A scheduled weight changes with the step, the summed score's does not: nothing to compare (dynamic sampling on
    # the summed score with a schedule is refused in check_config).
    differing = {key: (settings.weights[key], in_score[key]) for key in settings.reward_keys
                 if not isinstance(settings.weights[key], WeightSchedule) and in_score[key] != settings.weights[key]}
    if differing:
        listed = ", ".join(f"{key}: {gdpo:g} in algorithm.gdpo_reward_weights, {score:g} in reward_kwargs.{key}_weight"
                           for key, (gdpo, score) in differing.items())
        raise ValueError(
            f"the reward weights differ between GDPO and the summed score ({listed}). GRPO and dynamic sampling "
            "train on the summed score, so the two must agree: set +reward.custom_reward_function.reward_kwargs."
            "<reward>_weight to the same values as algorithm.gdpo_reward_weights (the recipes set both from one knob)."
        )
