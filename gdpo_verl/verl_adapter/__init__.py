"""What runs inside verl's training run: the plugin verl loads, and everything it hooks into verl (and Ray,
TransferQueue, hydra, omegaconf); a verl upgrade is a change here.

``plugin``: the entry point verl loads. ``touch_points``: what gdpo-verl uses of verl, checked in place of a
version pin. ``settings``: the config keys and their checks. ``estimator``: the estimator verl calls, and the
``Step`` a trainer hook runs it in. ``trainer_hooks``: the wrapped verl functions (V1 and legacy trainers, start-up
checks). ``transfer_queue``: reading the V1 stage's inputs. ``import_hooks``: wrapping on first import.
``reward_manager``: the "gdpo_verl" reward manager. ``components``: where a response's reward components are
found, and the fill-in of those that do not apply. ``cluster``: the checks run on every Ray node before training.

The CPU run's pieces are in ``gdpo_verl.cpu_run``, the command line's in ``gdpo_verl.tools`` and the experiment
scripts' library in ``gdpo_verl.experiments``. The exports load on first use: verl imports
``gdpo_verl.cpu_run.cpu_platform`` (which uses ``import_hooks``) while verl itself is being imported, before the
estimator's imports of verl could work.
"""

from typing import Any

# The name verl's config selects the estimator by (algorithm.adv_estimator), and what it resolves to when it is ours.
ESTIMATOR_NAME = "gdpo"
OURS = "gdpo_verl.verl_adapter.estimator.compute_gdpo_advantage"
# CorrGRPO (gdpo_verl.core.corrgrpo): this package's name for it, then the one its authors' verl fork registers.
CORRGRPO_NAMES = ("corrgrpo", "grpo_covariance_coefficient")
# Every algorithm.adv_estimator this package registers; each reads algorithm.gdpo_reward_keys and runs in a Step.
OUR_ESTIMATORS = (ESTIMATOR_NAME, *CORRGRPO_NAMES)

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
