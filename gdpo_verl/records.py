"""Per-step records of GDPO's inputs and outputs, for offline analysis (``gdpo-verl inspect``).

With ``algorithm.gdpo.dump_dir`` set, every advantage step appends one JSON line to
``<dump_dir>/gdpo_steps.jsonl``: each response's group (uid), reward components, valid response length
and final advantage, plus the settings that produced them. ``load_steps`` reads these files, and verl's
own rollout dumps (``trainer.rollout_data_dir``: ``<step>.jsonl``, one response a line) when they carry
the reward components; ``step_report`` turns a step into the ``gdpo/`` metrics.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.advantage import DEFAULT_BATCH_NORM, DEFAULT_EPS, GdpoParts, gdpo_outcome_parts
from gdpo_verl.core.checks import is_reward_value
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.jsonl import read_jsonl

RECORD_FILE = "gdpo_steps.jsonl"
# Records of steps that a resumed run ran again, moved out of RECORD_FILE (see set_aside_steps_from).
SUPERSEDED_FILE = "gdpo_steps.superseded.jsonl"
FORMAT = "gdpo-verl/steps-v1"
# append_record writes "format" then "step" first in every line.
_STEP = re.compile(r'\{"format": "[^"]*", "step": (\d+)')

logger = logging.getLogger("gdpo_verl")
# The record files this process has appended to (each is checked once, before its first append).
_opened: set[Path] = set()


@dataclass
class StepRecord:
    step: int
    uid: list[str]
    rewards: dict[str, list[float]]
    response_length: list[int] | None
    weights: dict[str, float] | None = None
    norm_by_std: bool = True
    batch_norm: str = DEFAULT_BATCH_NORM
    eps: float = DEFAULT_EPS


def example_path() -> Path:
    """The synthetic record shipped with the package (``scripts/make_example_records.py`` made it)."""
    return Path(str(files("gdpo_verl") / "data" / "example_steps.jsonl"))


def append_record(
    dump_dir: str | Path,
    parts: GdpoParts,
    uids: Sequence[Any],
    step: int,
    *,
    norm_by_std: bool,
    batch_norm: str,
    eps: float,
) -> Path:
    """Append one step to ``<dump_dir>/gdpo_steps.jsonl``; returns the file."""
    directory = Path(dump_dir)
    record = {
        "format": FORMAT,
        "step": int(step),
        "uid": [str(uid) for uid in uids],
        "rewards": {name: parts.scores[:, k].tolist() for k, name in enumerate(parts.names)},
        "weights": dict(zip(parts.names, parts.weights.tolist(), strict=True)),
        "response_length": [int(n) for n in parts.valid_tokens.tolist()],
        "advantage": [round(value, 6) for value in parts.final.tolist()],
        "norm_by_std": norm_by_std,
        "batch_norm": batch_norm,
        "eps": eps,
    }
    path = directory / RECORD_FILE
    try:
        if path not in _opened:
            directory.mkdir(parents=True, exist_ok=True)
            set_aside_steps_from(path, int(step))
            _opened.add(path)
        with path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
    except OSError as exc:
        raise OSError(
            f"cannot write the GDPO record of step {step} to {path}: {exc}. Set algorithm.gdpo.dump_dir to a "
            "writable directory on the node that runs verl's TaskRunner, or null."
        ) from exc
    return path


def set_aside_steps_from(path: Path, step: int) -> None:
    """Before a process first appends ``step`` to ``path``: move the records of ``step`` and later steps (an
    earlier run wrote them and stopped before its checkpoint, and this run resumed from the one before, or this
    is a new run in the same directory) to ``SUPERSEDED_FILE`` beside it, and drop a torn last line (a run killed
    while writing it). Each step is then recorded once in ``path``; both are logged as warnings."""
    if not path.is_file():
        return
    lines = path.read_text().splitlines(keepends=True)
    torn = bool(lines) and not lines[-1].endswith("\n")
    if torn:
        logger.warning("%s: dropped a torn last line (%d characters): the run writing it stopped in the middle.",
                       path, len(lines[-1]))
        lines.pop()
    kept, later = [], []
    for line in lines:
        found = _STEP.match(line)
        (later if found and int(found.group(1)) >= step else kept).append(line)
    if later:
        with (path.parent / SUPERSEDED_FILE).open("a") as handle:
            handle.writelines(later)
        steps = sorted({int(_STEP.match(line).group(1)) for line in later})
        logger.warning(
            "%s: this run records step %d on, so the %d record(s) of step(s) %s already there (written by a run "
            "that stopped before their checkpoint, or by an earlier run) were moved to %s.",
            path, step, len(later), ", ".join(map(str, steps)), SUPERSEDED_FILE,
        )
    if torn or later:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text("".join(kept))
        os.replace(temporary, path)


def load_steps(path: str | Path, rewards: Sequence[str] | None = None) -> list[StepRecord]:
    """Steps from a gdpo-verl record (a ``gdpo_steps.jsonl`` file or a directory holding one) or from verl's
    rollout dumps (a ``<step>.jsonl`` file or a directory of them, grouped by identical prompt text).

    Args:
        rewards: the component names; required for verl's dumps (they mix components with other fields),
            optional for gdpo-verl records (a subset to keep).
    """
    path = Path(path)
    if path.is_dir():
        if (path / RECORD_FILE).is_file():
            path = path / RECORD_FILE
        else:
            dumps = sorted(path.glob("*.jsonl"), key=_dump_order)
            if not dumps:
                raise ValueError(f"{path} holds neither {RECORD_FILE} nor verl rollout dumps (<step>.jsonl).")
            return [step for dump in dumps for step in _load_file(dump, rewards)]
    if not path.is_file():
        raise ValueError(f"{path}: no such file or directory.")
    return _load_file(path, rewards)


def _dump_order(path: Path) -> tuple[int, str]:
    """verl names its dumps <step>.jsonl: numeric order, then anything else by name."""
    return (int(path.stem), "") if path.stem.isdigit() else (math.inf, path.name)


def _load_file(path: Path, rewards: Sequence[str] | None) -> list[StepRecord]:
    numbered = read_jsonl(path, torn_tail=True)
    if not numbered:
        raise ValueError(f"{path} is empty.")
    rows = [row for _, row in numbered]
    if all(isinstance(row, dict) and row.get("format") == FORMAT for row in rows):
        return [_from_record(path, number, row, rewards) for number, row in numbered]
    if all(isinstance(row, dict) and "input" in row and "step" in row for row in rows):
        return _from_verl_dump(path, rows, rewards)
    raise ValueError(
        f"{path}: not a gdpo-verl record (lines with \"format\": \"{FORMAT}\") nor a verl rollout dump "
        "(lines with \"input\" and \"step\")."
    )


def _from_record(path: Path, number: int, row: dict, rewards: Sequence[str] | None) -> StepRecord:
    where = f"{path}:{number}"
    missing = [key for key in ("step", "uid", "rewards") if key not in row]
    if missing or not isinstance(row.get("rewards"), dict):
        raise ValueError(f"{where}: a {FORMAT} record needs step, uid and a rewards mapping; missing {missing}.")
    names = list(row["rewards"])
    if rewards is not None:
        unknown = [name for name in rewards if name not in names]
        if unknown:
            raise ValueError(f"{where}: --rewards {unknown} not in the record, which has {names}.")
        names = list(rewards)
    if not isinstance(row["uid"], list):
        raise ValueError(f"{where}: uid must be a list with one group id per response.")
    size = len(row["uid"])
    for name in names:
        values = row["rewards"][name]
        if not isinstance(values, list) or len(values) != size:
            raise ValueError(f"{where}: reward {name!r} must be a list of {size} numbers, one per response.")
        bad = [value for value in values if isinstance(value, bool) or not is_reward_value(value)]
        if bad:
            raise ValueError(f"{where}: reward {name!r} must hold finite numbers; got {bad[0]!r:.80}.")
    weights = row.get("weights")
    if weights is not None:
        if not isinstance(weights, dict) or sorted(weights) != sorted(row["rewards"]):
            raise ValueError(f"{where}: weights must name the record's rewards {sorted(row['rewards'])}; got {weights!r:.120}.")
        if not all(is_reward_value(value) for value in weights.values()):
            raise ValueError(f"{where}: weights must be finite numbers; got {weights!r:.120}.")
    return StepRecord(
        step=int(row["step"]),
        uid=row["uid"],
        rewards={name: row["rewards"][name] for name in names},
        response_length=row.get("response_length"),
        weights={name: weights[name] for name in names} if weights else None,
        norm_by_std=bool(row.get("norm_by_std", True)),
        batch_norm=row.get("batch_norm", DEFAULT_BATCH_NORM),
        eps=float(row.get("eps", DEFAULT_EPS)),
    )


def _from_verl_dump(path: Path, rows: list[dict], rewards: Sequence[str] | None) -> list[StepRecord]:
    if not rewards:
        numeric = sorted(key for key, value in rows[0].items() if is_reward_value(value) and key not in ("score", "step"))
        raise ValueError(
            f"{path} is a verl rollout dump: name the reward components with --rewards "
            f"(numeric fields in it: {numeric})."
        )
    missing = sorted({name for row in rows for name in rewards if name not in row})
    if missing:
        raise ValueError(f"{path}: rewards {missing} are not in the dump; its fields are {sorted(rows[0])}.")
    by_step: dict[int, list[dict]] = {}
    for row in rows:
        by_step.setdefault(int(row["step"]), []).append(row)
    steps = []
    for step, members in sorted(by_step.items()):
        for name in rewards:
            bad = [row[name] for row in members if not is_reward_value(row[name])]
            if bad:
                raise ValueError(f"{path}: reward {name!r} has non-numeric values such as {bad[0]!r}.")
        # verl's dump has no uid: the rollouts of one prompt share its text.
        steps.append(
            StepRecord(
                step=step,
                uid=[str(row["input"]) for row in members],
                rewards={name: [float(row[name]) for row in members] for name in rewards},
                response_length=None,
                batch_norm="sequence",
            )
        )
    return steps


def step_parts(record: StepRecord) -> GdpoParts:
    """Recompute GDPO for one step from its record (per-response values only)."""
    size = len(record.uid)
    lengths = record.response_length if record.response_length is not None else [1] * size
    return gdpo_outcome_parts(
        {name: torch.tensor(values, dtype=torch.float64) for name, values in record.rewards.items()},
        torch.tensor(lengths, dtype=torch.float64),
        np.array(record.uid, dtype=object),
        record.weights,
        norm_by_std=record.norm_by_std,
        batch_norm=record.batch_norm,
        eps=record.eps,
    )


def step_report(record: StepRecord) -> dict[str, Any]:
    """``{"step", "responses", "groups", "metrics"}`` with the ``gdpo/`` metrics of the step."""
    parts = step_parts(record)
    return {
        "step": record.step,
        "responses": len(record.uid),
        "groups": parts.num_groups,
        "metrics": advantage_metrics(parts),
    }


def reports(path: str | Path, rewards: Sequence[str] | None = None) -> list[dict[str, Any]]:
    return [step_report(record) for record in load_steps(path, rewards)]
