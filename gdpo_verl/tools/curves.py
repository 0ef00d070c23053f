"""Training curves from verl's logs: its tensorboard events (``trainer.logger`` includes ``tensorboard``) or its file
logger's lines (``trainer.logger`` includes ``file``: one JSON line per step, ``{"step": n, "data": {...}}``).

verl writes one event directory per run: ``$TENSORBOARD_DIR``, by default
``tensorboard_log/<project_name>/<experiment_name>``; its file logger writes ``$VERL_FILE_LOGGER_PATH``. A run's
directory that holds ``metrics.jsonl`` (the CPU run's OUT) is read from that file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from gdpo_verl.core.diagnostics import MEAN, reward_metric, reward_names
from gdpo_verl.core.checks import is_reward_value
from gdpo_verl.records.jsonl import file_kind, iter_jsonl
from gdpo_verl.verl_adapter.file_logger import logged_step

# verl's file logger's file in a run's directory (the CPU run's OUT/metrics.jsonl)
FILE_LOGGER = "metrics.jsonl"
EARLIER = "metrics.earlier.jsonl"

# What the paper's Fig. 5 shows, in verl's names; per-reward means are added from the logs.
DEFAULT_TAGS = ("response_length/mean", "response_length/max")


def event_dir(path: Path) -> Path:
    """The directory holding the run's event files: ``path`` itself or its only such subdirectory."""
    if path.name.startswith("events.out.tfevents") and os.path.lexists(path) and not path.is_dir():
        return path.parent
    if not path.is_dir():
        if os.path.lexists(path):
            raise ValueError(f"{path}: not a directory (nor an events.out.tfevents* file); pass the run's directory.")
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


def check_event_files(directory: Path) -> None:
    """ValueError naming the first file tensorboard would read in ``directory`` (a name holding "tfevents") that
    is not a regular file: reading a FIFO waits for a writer without end."""
    for entry in sorted(directory.iterdir()):
        if "tfevents" not in entry.name or entry.name.endswith(".profile-empty"):
            continue
        try:
            kind = entry.stat().st_mode
        except OSError:
            raise ValueError(f"{entry}: a broken link or unreadable event file; remove it.") from None
        if not stat.S_ISREG(kind):
            raise ValueError(f"{entry} is {file_kind(kind)}, not a regular event file; remove it or move it out of "
                             "the run's directory.")


def read_scalars(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of a run: tag -> [(step, value)], by step. ``path``: verl's file logger's file (a ``.jsonl``),
    a directory holding one (``metrics.jsonl``), or tensorboard's event directory (or a directory above it)."""
    if path.suffix == ".jsonl":
        return read_file_logger([path])
    if (path / FILE_LOGGER).exists():  # a resumed CPU run keeps what the runs before logged (verl starts the file anew)
        return read_file_logger([file for file in (path / EARLIER, path / FILE_LOGGER) if file.exists()])
    directory = event_dir(path)
    check_event_files(directory)
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
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


def read_file_logger(paths: list[Path]) -> dict[str, list[tuple[int, float]]]:
    """The numbers of verl's file logger's lines, of these files in turn: tag -> [(step, value)], by step (the step
    ``file_logger.logged_step`` says a line is of)."""
    scalars: dict[str, dict[int, float]] = {}
    lines = ((path, number, line) for path in paths for number, line in iter_jsonl(path, torn_tail=True))
    for path, number, line in lines:
        data = line.get("data") if isinstance(line, dict) else None
        if not isinstance(data, dict) or not isinstance(line.get("step"), int):
            raise ValueError(f"{path}:{number}: not a line of verl's file logger ({{\"step\": n, \"data\": {{...}}}}).")
        step = logged_step(line)
        for tag, value in data.items():
            if is_reward_value(value) and not isinstance(value, bool):
                scalars.setdefault(tag, {})[step] = float(value)
    if not scalars:
        raise ValueError(f"{paths[-1]}: no step logged yet.")
    return {tag: sorted(points.items()) for tag, points in scalars.items()}
