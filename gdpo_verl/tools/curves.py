"""Training curves from verl's tensorboard logs (``trainer.logger`` includes ``tensorboard``).

verl writes one event directory per run: ``$TENSORBOARD_DIR``, by default
``tensorboard_log/<project_name>/<experiment_name>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gdpo_verl.core.diagnostics import MEAN, reward_metric, reward_names

# What the paper's Fig. 5 shows, in verl's names; per-reward means are added from the logs.
DEFAULT_TAGS = ("response_length/mean", "response_length/max")


def event_dir(path: Path) -> Path:
    """The directory holding the run's event files: ``path`` itself or its only such subdirectory."""
    if path.is_file() and path.name.startswith("events.out.tfevents"):
        return path.parent
    if not path.is_dir():
        raise ValueError(f"{path}: no such directory.")
    if any(path.glob("events.out.tfevents*")):
        return path
    found = sorted({event.parent for event in path.rglob("events.out.tfevents*")})
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValueError(f"{path}: no tensorboard event files (events.out.tfevents*) in it or below it.")
    listed = ", ".join(str(directory) for directory in found[:5])
    raise ValueError(f"{path} holds several runs ({listed}); pass each run's directory.")


def read_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of a run: tag -> [(step, value)], by step."""
    accumulator = EventAccumulator(str(event_dir(path)), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: sorted((event.step, float(event.value)) for event in accumulator.Scalars(tag))
        for tag in accumulator.Tags()["scalars"]
    }


def default_tags(runs: Sequence[dict[str, list[tuple[int, float]]]]) -> list[str]:
    """Per-reward means (``gdpo/<reward>/mean``) of every run, then response length mean and max."""
    present = set().union(*(run.keys() for run in runs))
    rewards = [reward_metric(name, MEAN) for name in reward_names(present)]
    return rewards + [tag for tag in DEFAULT_TAGS if tag in present]
