"""The entry point verl loads at ``import verl`` (group ``verl.plugins``): registers GDPO as "gdpo", CorrGRPO as
"corrgrpo" and under its authors' name "grpo_covariance_coefficient" (``CORRGRPO_NAMES``), and installs the
trainer hooks of ``gdpo_verl.verl_adapter.trainer_hooks``.

verl 0.9.1 ships a built-in "gdpo" and refuses a second ``register_adv_est("gdpo")``, so the registry
entry is replaced directly. No version of verl is refused as such: what the plugin uses of verl is checked
(``touch_points``), here the estimator registry, the rest where the trainer hooks wrap it. verl logs a failing
plugin at DEBUG and carries on with its built-in; to keep that from happening silently, a failure here is logged
at ERROR and leaves a "gdpo" entry that raises the reason at the first GDPO step.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from gdpo_verl.verl_adapter.names import CORRGRPO_NAMES, ESTIMATOR_NAME
from gdpo_verl.verl_adapter.touch_points import require


logger = logging.getLogger("gdpo_verl")


def show_warnings() -> None:
    """Give the "gdpo_verl" logger a stderr handler of its own in every verl process (as verl does for its
    "verl" logger), so its warnings (records set aside on resume, answers not checked, ...) reach the run's
    output: in verl's TaskRunner the root logger prints nothing. Level: GDPO_VERL_LOGGING_LEVEL (WARNING).

    An unknown level raises (after the handler is in place, so the error is shown): a typo there must not
    make the plugin fail to load, which verl would pass over and train with its own "gdpo"."""
    if any(getattr(handler, "name", None) == "gdpo_verl" for handler in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.name = "gdpo_verl"
    handler.setFormatter(logging.Formatter("%(levelname)s:%(asctime)s:%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    name = os.environ.get("GDPO_VERL_LOGGING_LEVEL", "WARNING")
    level = logging.getLevelName(name.strip().upper())
    if not isinstance(level, int):
        logger.setLevel(logging.WARNING)
        raise ValueError(
            f"GDPO_VERL_LOGGING_LEVEL={name!r} is not a logging level; set DEBUG, INFO, WARNING or ERROR, or unset it."
        )
    logger.setLevel(level)


def register() -> None:
    """Make ``core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"]`` this package's estimator, and its ``CORRGRPO_NAMES``
    entries CorrGRPO's. Idempotent."""
    from verl.trainer.ppo import core_algos

    try:
        show_warnings()
        require(core_algos)
        from gdpo_verl.verl_adapter.estimator import compute_corrgrpo_advantage, compute_gdpo_advantage
        from gdpo_verl.verl_adapter.trainer_hooks import install

        install()
    except Exception as exc:
        registry = getattr(core_algos, "ADV_ESTIMATOR_REGISTRY", None)
        if isinstance(registry, dict):  # else there is no "gdpo" entry to refuse with: the ERROR log says why
            for name in (ESTIMATOR_NAME, *CORRGRPO_NAMES):
                registry[name] = _refusing_estimator(exc, name)
        raise

    # Looked up through the module every time: verl's own tests rebind the dict.
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    for name in CORRGRPO_NAMES:  # not verl's names; the authors' fork registers its own under the second
        if registry.get(name) not in (None, compute_corrgrpo_advantage):
            logger.info("gdpo-verl: replaced the %r advantage estimator %r with gdpo_verl's", name, registry[name])
        registry[name] = compute_corrgrpo_advantage
    previous = registry.get(ESTIMATOR_NAME)
    if previous is compute_gdpo_advantage:
        return
    registry[ESTIMATOR_NAME] = compute_gdpo_advantage
    if previous is not None:
        logger.info(
            "gdpo-verl: replaced the %r advantage estimator %s.%s with gdpo_verl's",
            ESTIMATOR_NAME,
            previous.__module__,
            previous.__qualname__,
        )


def _refusing_estimator(reason: BaseException, name: str = ESTIMATOR_NAME) -> Callable[..., Any]:
    def compute_gdpo_unavailable(**kwargs: Any) -> Any:
        raise RuntimeError(
            f"algorithm.adv_estimator={name}: gdpo-verl failed to register its estimator ({reason!r}), "
            "so no advantage is computed. Fix the cause above; `python -c 'import gdpo_verl.verl_adapter.plugin'` "
            "shows it in full."
        ) from reason

    return compute_gdpo_unavailable


try:
    register()
except Exception as _exc:
    logger.error("gdpo-verl: could not register the 'gdpo' advantage estimator: %r", _exc)
    raise
