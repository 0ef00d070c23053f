"""The math of GDPO, in torch and numpy only (no verl, Ray, hydra or omegaconf).

``options``: each option of the computation declared once (default, check, meaning); ``reward_keys``: the checks of
the reward keys and weights a config gives. ``inputs``: the step's reward scores, weights and shapes, read and
checked. ``advantage``: the three
steps, top to bottom in ``gdpo_outcome_parts``. ``corrgrpo``: CorrGRPO, the group-centred
weighted sum over the components' correlation, on the same inputs and parts. ``conditions``: the paper's
conditioned rewards. ``diagnostics``: the ``gdpo/`` step metrics, read from a computation's parts.
``collapse``: the paper's count of distinct advantage groups. ``variants``: GD2PO, SAW and weights that change with
the step. ``checks``: the checks of single values (numpy only: the reward functions use them without importing
torch). The records of the steps are ``gdpo_verl.records``.
"""

from typing import Any

_EXPORTS = {
    "BATCH_NORMS": "advantage",
    "GdpoOptions": "options",
    "GdpoParts": "advantage",
    "Sessions": "advantage",
    "gdpo_advantage": "advantage",
    "gdpo_outcome_parts": "advantage",
    "gdpo_parts": "advantage",
    "Condition": "conditions",
    "corrgrpo_advantage": "corrgrpo",
    "corrgrpo_outcome_parts": "corrgrpo",
    "corrgrpo_parts": "corrgrpo",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"gdpo_verl.core.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'gdpo_verl.core' has no attribute {name!r}")
