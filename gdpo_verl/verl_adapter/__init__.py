"""Everything that speaks verl (and Ray, TransferQueue, hydra, omegaconf, vLLM); a verl upgrade is a change here,
and no other room imports any of them.

Inside verl's training run: ``plugin``: the entry point verl loads. ``names``: the names ``algorithm.adv_estimator``
selects this package's estimators by. ``touch_points``: what gdpo-verl uses of verl,
checked in place of a version pin. ``settings``: the config keys and their checks. ``estimator``: the estimator
verl calls, and the ``Step`` a trainer hook runs it in. ``trainer_hooks``: the wrapped verl functions (V1 and legacy
trainers, start-up checks). ``transfer_queue``: reading the V1 stage's inputs. ``import_hooks``: wrapping on first
import. ``reward_manager``: the "gdpo_verl" reward manager. ``components``: where a response's reward components
are found, and the fill-in of those that do not apply. ``cluster``: the checks run on every Ray node before
training.

verl code the rooms above use, in a folder per room it serves: ``for_cpu_run`` (the CPU run's platform, weight
sync, and reading of its config), ``for_tools`` (the ``gdpo-verl`` command's) and ``for_experiments`` (the evaluation
scripts' generation).

The exports load on first use: verl imports ``for_cpu_run.cpu_platform`` while verl itself is being imported, before the
estimator's imports of verl could work.
"""

from typing import Any

from gdpo_verl.verl_adapter.names import CORRGRPO_NAMES, ESTIMATOR_NAME, OUR_ESTIMATORS, OURS

__all__ = ["CORRGRPO_NAMES", "ESTIMATOR_NAME", "OURS", "OUR_ESTIMATORS", "GdpoSettings", "check_config",
           "compute_gdpo_advantage", "settings_from_config"]


def __getattr__(name: str) -> Any:
    if name == "compute_gdpo_advantage":
        from gdpo_verl.verl_adapter.estimator import compute_gdpo_advantage

        return compute_gdpo_advantage
    if name in ("GdpoSettings", "check_config", "settings_from_config"):
        from gdpo_verl.verl_adapter import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'gdpo_verl.verl_adapter' has no attribute {name!r}")
