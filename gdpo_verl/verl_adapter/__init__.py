"""The only code that speaks verl: the config keys and their checks (``settings``), the estimator verl
calls (``estimator``), and the hooks into verl's trainers (``integration``)."""

from gdpo_verl.verl_adapter.estimator import compute_gdpo_advantage, gather_rewards
from gdpo_verl.verl_adapter.settings import GdpoSettings, check_config, settings_from_config

__all__ = ["GdpoSettings", "check_config", "compute_gdpo_advantage", "gather_rewards", "settings_from_config"]
