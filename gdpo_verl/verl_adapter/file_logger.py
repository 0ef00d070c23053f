"""verl's file logger (``trainer.logger`` includes ``file``): one JSON line per logged step,
``{"step": n, "data": {...}}``, read by the CPU run's supervisor and verdict and by ``gdpo-verl plot``. No verl is
imported here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What verl's fully asynchronous trainer adds to a line: the training step its metrics are of.
GLOBAL_STEP = "training/global_step"


def logged_step(line: Mapping[str, Any]) -> int:
    """The step a line is of: its ``training/global_step`` where it has one (verl's fully asynchronous trainer logs a
    step's training metrics under the weight version after it), else the step it was logged under."""
    return int(line["data"].get(GLOBAL_STEP, line["step"]))
