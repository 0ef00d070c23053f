"""GDPO for verl: per-reward group normalization, weighted sum, batch whitening.

``gdpo_advantage`` is the math (``gdpo_verl.core``) and imports nothing from verl. verl reaches it through
``gdpo_verl.verl_adapter``, whose ``plugin`` module is the entry point verl loads (group ``verl.plugins``).
The exports load on first use, so that ``import gdpo_verl.rewards...`` in a reward worker does not import torch.
"""

from typing import Any

__version__ = "0.1.0"

__all__ = ["BATCH_NORMS", "Condition", "gdpo_advantage", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("BATCH_NORMS", "Condition", "gdpo_advantage"):
        from gdpo_verl import core

        return getattr(core, name)
    raise AttributeError(f"module 'gdpo_verl' has no attribute {name!r}")
