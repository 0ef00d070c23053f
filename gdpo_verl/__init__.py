"""GDPO for verl: per-reward group normalization, weighted sum, batch whitening.

``gdpo_advantage`` is the math (``gdpo_verl.core``) and imports nothing from verl. verl reaches it through
``gdpo_verl.verl_adapter``, whose ``plugin`` module is the entry point verl loads (group ``verl.plugins``).
The exports load on first use, so that ``import gdpo_verl.rewards...`` in a reward worker does not import torch.
"""

import importlib.abc
import sys
from typing import Any

__version__ = "0.1.0"

# Modules that moved to another room of the package: importing the old name says where each went.
MOVED = {
    "gdpo_verl.verl_adapter.supervise": "gdpo_verl.cpu_run.supervise",
    "gdpo_verl.tools.tiny_model": "gdpo_verl.cpu_run.tiny_model",
    "gdpo_verl.tools.check_run": "gdpo_verl.cpu_run.check_run",
    "gdpo_verl.tools.evaluation": "gdpo_verl.experiments.evaluation",
    "gdpo_verl.tools.data_files": "gdpo_verl.experiments.data_files",
    "gdpo_verl.tools.bfcl": "gdpo_verl.experiments.bfcl",
}


class _Moved(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: asked only for a module no other finder has, so only for a moved one."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            raise ModuleNotFoundError(f"{name} moved to {MOVED[name]}: import or name that instead",
                                      name=name)
        return None


if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
    sys.meta_path.append(_Moved())

__all__ = ["BATCH_NORMS", "Condition", "gdpo_advantage", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("BATCH_NORMS", "Condition", "gdpo_advantage"):
        from gdpo_verl import core

        return getattr(core, name)
    raise AttributeError(f"module 'gdpo_verl' has no attribute {name!r}")
