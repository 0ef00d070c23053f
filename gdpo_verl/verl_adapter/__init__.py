"""The only code that speaks verl: the estimator signature verl calls, and the config keys it reads."""

from gdpo_verl.verl_adapter.estimator import compute_gdpo_advantage, gather_rewards
from gdpo_verl.verl_adapter.settings import GdpoSettings, settings_from_config

__all__ = ["GdpoSettings", "compute_gdpo_advantage", "gather_rewards", "settings_from_config"]
