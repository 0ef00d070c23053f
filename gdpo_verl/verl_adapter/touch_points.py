"""What gdpo-verl calls or wraps in verl, each checked by name and shape where it is used, instead of a pin on
verl's version: a verl built from source (0.10.0.dev on verl's main branch) works as long as these are as in
0.9.1, and any other verl is refused with one line naming what changed.

Each touch point is checked when gdpo-verl first uses it, in whichever verl process that is: the estimator
registry at ``import verl`` (the plugin), every wrapped function when verl first imports its module
(``trainer_hooks``), the reward manager's base when verl's reward loop first imports its registry.
``gdpo-verl doctor`` checks them all at once (``check_all``).

A function's shape is the names of its leading positional parameters, which gdpo-verl passes on or binds by
name (and, for some, parameters it binds by name anywhere): a wrapper written for ``(self, batch, metrics)``
must not be handed a method that now takes ``(self, batch, step, metrics)``.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any

V1_TRAINER = "verl.trainer.ppo.v1.trainer_base"
LEGACY_TRAINER = "verl.trainer.ppo.ray_trainer"
REWARD_MANAGERS = "verl.experimental.reward_loop.reward_manager"
REWARD_LOOP = "verl.experimental.reward_loop.reward_loop"
MAIN_PPO = "verl.trainer.main_ppo"
# the base of verl's experimental trainers (one_step_off_policy, fully_async_policy)
SEPARATION_TRAINER = "verl.experimental.separation.ray_trainer"
FULLY_ASYNC_TRAINER = "verl.experimental.fully_async_policy.fully_async_trainer"


@dataclass(frozen=True)
class TouchPoint:
    module: str
    name: str  # an attribute of the module, or Class.attribute
    use: str  # what gdpo-verl does with it, for the message
    parameters: tuple[str, ...] | None = ()  # leading positional parameters; None: not a function (see kind)
    keywords: tuple[str, ...] = ()  # parameters bound by name, anywhere in the signature
    kind: type | None = None  # for a value that is not a function: its type

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"


TOUCH_POINTS = (
    TouchPoint("verl.trainer.ppo.core_algos", "ADV_ESTIMATOR_REGISTRY", "puts its estimator there under 'gdpo'",
               parameters=None, kind=dict),
    TouchPoint("verl.trainer.ppo.core_algos", "get_adv_estimator_fn", "asks every Ray node what 'gdpo' resolves to",
               ("name_or_enum",)),
    TouchPoint("verl.utils.config", "validate_config", "checks the GDPO settings there, before Ray starts",
               ("config",)),
    TouchPoint(MAIN_PPO, "run_ppo", "checks every Ray node before verl's TaskRunner starts",
               ("config", "task_runner_class")),
    TouchPoint(V1_TRAINER, "PPOTrainer._compute_advantage",
               "hands the reward components to the estimator in the V1 trainer", ("self", "batch", "metrics")),
    TouchPoint(LEGACY_TRAINER, "RayPPOTrainer.fit", "numbers the legacy trainer's records by its global step",
               ("self",)),
    TouchPoint(LEGACY_TRAINER, "compute_advantage", "runs the legacy trainer's estimator in a step of its own",
               ("data", "adv_estimator"), keywords=("config",)),
    TouchPoint(LEGACY_TRAINER, "compute_data_metrics", "logs the legacy trainer's gdpo/ metrics", ("batch",)),
    TouchPoint(LEGACY_TRAINER, "compute_timing_metrics",
               "logs a component's statistics over the responses it applies to where verl's would be NaN",
               ("batch", "timing_raw")),
    TouchPoint(SEPARATION_TRAINER, "SeparateRayPPOTrainer._fit_compute_advantage",
               "numbers the experimental trainers' records by their global step", ("self", "batch")),
    TouchPoint(SEPARATION_TRAINER, "compute_advantage", "runs the experimental trainers' estimator in a step of its own",
               ("data", "adv_estimator"), keywords=("config",)),
    TouchPoint(SEPARATION_TRAINER, "compute_data_metrics", "logs the experimental trainers' gdpo/ metrics", ("batch",)),
    TouchPoint(SEPARATION_TRAINER, "compute_timing_metrics",
               "logs a component's statistics over the responses it applies to (experimental trainers)",
               ("batch", "timing_raw")),
    TouchPoint(FULLY_ASYNC_TRAINER, "FullyAsyncTrainer.load_checkpoint",
               "numbers the first step of a resumed fully asynchronous run as the one after its checkpoint", ("self",)),
    TouchPoint(REWARD_MANAGERS, "register", "registers the gdpo_verl reward manager", ("name",)),
    TouchPoint(f"{REWARD_MANAGERS}.naive", "NaiveRewardManager.__init__", "builds the gdpo_verl reward manager on it",
               ("self", "config", "tokenizer", "compute_score", "reward_router_address", "reward_model_tokenizer")),
    TouchPoint(f"{REWARD_MANAGERS}.naive", "NaiveRewardManager.run_single", "scores responses as it does",
               ("self", "data")),
    TouchPoint(REWARD_LOOP, "RewardLoopWorker.compute_score",
               "holds every response's compute_score dict to the reward keys (components.require_components)", ("self", "data")),
    TouchPoint("verl.trainer.ppo.reward", "_call_with_kwargs", "calls the reward function as verl does",
               ("raw_fn", "extra_kwargs")),
    TouchPoint("verl.trainer.ppo.reward", "_call_with_kwargs_async", "calls the reward function as verl does",
               ("raw_fn", "extra_kwargs")),
)


class VerlChanged(RuntimeError):
    """A touch point of verl is missing or has another shape than gdpo-verl is written for."""


def verl_version() -> str:
    try:
        return version("verl")
    except PackageNotFoundError:
        return "(no installed distribution)"


def problem(point: TouchPoint, module: ModuleType) -> str | None:
    """What is wrong with ``point`` in ``module`` (a sentence that follows its name), or None."""
    found: Any = module
    for part in point.name.split("."):
        if not hasattr(found, part):
            return "is missing"
        found = actor_class(getattr(found, part))
    if point.parameters is None:
        return None if isinstance(found, point.kind) else f"is a {type(found).__name__}, not a {point.kind.__name__}"
    if not callable(found):
        return f"is not a function ({type(found).__name__})"
    try:
        signature = inspect.signature(found)  # through a gdpo-verl wrapper to verl's own (functools.wraps)
    except (TypeError, ValueError):
        return "has no signature that can be read"
    parameters = list(signature.parameters.values())
    leading = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    expected = point.parameters
    if tuple(leading[: len(expected)]) != expected or not set(point.keywords) <= named:
        wanted = ", ".join([*expected, "...", *(f"{name}=" for name in point.keywords)])
        return f"takes ({', '.join(str(p) for p in parameters)}) where gdpo-verl expects ({wanted})"
    return None


def actor_class(found: Any) -> Any:
    """For a Ray actor class (``@ray.remote class ...``), the class Ray runs in the actor's process: its
    ``modified_class``, a subclass of the one written, which holds a copy of each method (Ray wraps them there for
    tracing), so a method replaced on the class written is never called. Anything else as it is."""
    metadata = getattr(found, "__ray_metadata__", None)
    return found if metadata is None else metadata.modified_class


def require(module: ModuleType, module_name: str | None = None) -> None:
    """Raise VerlChanged, one line naming the first touch point of ``module`` that is missing or changed.
    ``module_name``: the module's name in TOUCH_POINTS when it runs as ``__main__``."""
    module_name = module_name or module.__name__
    for point in TOUCH_POINTS:
        if point.module != module_name:
            continue
        found = problem(point, module)
        if found is not None:
            raise VerlChanged(refusal(point, found))


def refusal(point: TouchPoint, found: str) -> str:
    return (f"gdpo-verl cannot run on verl {verl_version()}: {point.path} {found} (gdpo-verl {point.use}). "
            "Use a verl where it is as in verl 0.9.1, or a gdpo-verl release made for this verl.")


def check_all() -> list[tuple[TouchPoint, str | None]]:
    """Every touch point with what is wrong with it (one line, as the plugin would refuse it; None: as expected),
    importing each module: a module that cannot be imported is the problem of each of its touch points."""
    results: list[tuple[TouchPoint, str | None]] = []
    for point in TOUCH_POINTS:
        try:
            module = importlib.import_module(point.module)
        except VerlChanged as exc:  # the import ran gdpo-verl's hook, which refused another touch point there
            results.append((point, str(exc)))
            continue
        except Exception as exc:  # reported as that touch point's problem, never hidden
            results.append((point, f"{point.path} cannot be checked: its module does not import "
                                   f"({type(exc).__name__}: {exc})"))
            continue
        found = problem(point, module)
        results.append((point, None if found is None else refusal(point, found)))
    return results
