"""GDPO for verl: per-reward group normalization, weighted sum, batch whitening.

``gdpo_advantage`` is the math and imports nothing from verl. ``gdpo_verl.plugin`` is the entry point
verl loads (group ``verl.plugins``) to register it as the "gdpo" advantage estimator.
"""

from gdpo_verl.advantage import BATCH_NORMS, gdpo_advantage

__version__ = "0.1.0"

__all__ = ["BATCH_NORMS", "gdpo_advantage", "__version__"]
