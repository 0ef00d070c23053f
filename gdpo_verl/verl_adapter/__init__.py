"""Everything that speaks verl (and Ray, TransferQueue, hydra, omegaconf, vLLM); a verl upgrade is a change here.

``plugin``: the entry point verl loads, with the verl version guard. ``settings``: the config keys and their
checks. ``estimator``: the estimator verl calls, and the ``Step`` a trainer hook runs it in.
``trainer_hooks``: the wrapped verl functions (V1 and legacy trainers, start-up checks). ``transfer_queue``:
reading the V1 stage's inputs. ``import_hooks``: wrapping on first import. ``reward_manager``: the
"gdpo_verl" reward manager. ``batches``: verl's advantage stage on a rollout batch (the demo).
``environment``: the doctor's checks of verl, Ray and vLLM.
"""

from packaging.specifiers import SpecifierSet

from gdpo_verl.verl_adapter.estimator import compute_gdpo_advantage
from gdpo_verl.verl_adapter.settings import GdpoSettings, check_config, settings_from_config

# The verl versions this adapter is written against; the plugin refuses to register with any other.
SUPPORTED_VERL = SpecifierSet(">=0.9.1,<0.10")

__all__ = ["SUPPORTED_VERL", "GdpoSettings", "check_config", "compute_gdpo_advantage", "settings_from_config"]
