"""Per-step records of GDPO's inputs and outputs, for offline analysis (``gdpo-verl inspect``).

With ``algorithm.gdpo.dump_dir`` set, every advantage step appends one JSON line to
``<dump_dir>/gdpo_steps.jsonl``: each response's group (uid), reward components, valid response length
and final advantage, plus the settings that produced them. ``load_steps`` reads these files, and verl's
own rollout dumps (``trainer.rollout_data_dir``: ``<step>.jsonl``, one response a line) when they carry
the reward components; ``step_report`` turns a step into the ``gdpo/`` metrics.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import numbers
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.advantage import GdpoParts, gdpo_outcome_parts
from gdpo_verl.core.checks import is_reward_value
from gdpo_verl.core.corrgrpo import AUTHORS_NAME, ESTIMATOR as CORRGRPO, corrgrpo_outcome_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.jsonl import NotRegularFile, iter_jsonl, open_regular
from gdpo_verl.core.options import DEFAULTS, GDPO_ONLY, OPTIONS, RECORDED, checked, gdpo_options, unread
from gdpo_verl.core.variants import weights_at

RECORD_FILE = "gdpo_steps.jsonl"
# Records of steps that a resumed run ran again, moved out of RECORD_FILE (see set_aside_steps_from).
SUPERSEDED_FILE = "gdpo_steps.superseded.jsonl"
FORMAT = "gdpo-verl/steps-v1"
# RecordWriter writes "format" then "step" first in every line.
_STEP = re.compile(rb'\{"format": "[^"]*", "step": (\d+)')
# Steps and response lengths: whole numbers a float64 holds exactly (the arithmetic and the plots take floats).
MAX_WHOLE = 2**53
# What computed a step: "gdpo" (gdpo_outcome_parts), or CorrGRPO (gdpo_verl.core.corrgrpo).
ESTIMATORS = ("gdpo", CORRGRPO)

logger = logging.getLogger("gdpo_verl")


def recorded_defaults(**changed: Any) -> dict[str, Any]:
    """The recorded options (``options.RECORDED``) at their defaults, but for ``changed``."""
    return {name: changed.get(name, DEFAULTS[name]) for name in RECORDED}


@dataclass
class StepRecord:
    step: int
    uid: list[str]
    rewards: dict[str, list[float]]
    response_length: list[int] | None
    weights: dict[str, float] | None = None
    # the options the step was computed with (each of options.RECORDED; a record without one: its default)
    recorded: dict[str, Any] = field(default_factory=recorded_defaults)
    source: str = ""  # "<file>:<line>" it was read from, for error messages
    estimator: str = "gdpo"  # or "corrgrpo" (a record without the field is GDPO's)

    @property
    def options(self) -> dict[str, Any]:
        """The options the step was computed with (fields of ``GdpoOptions``), and ``estimator``."""
        return {**self.recorded, "estimator": self.estimator}


def example_path() -> Path:
    """The synthetic record shipped with the package (``scripts/make_example_records.py`` made it)."""
    return Path(str(files("gdpo_verl") / "data" / "example_steps.jsonl"))


class RecordWriter:
    """Appends the steps of a run to ``<dump_dir>/gdpo_steps.jsonl``. Its owner keeps it for the run (verl's
    trainer holds one, see ``verl_adapter.trainer_hooks``): before its first append to a file it sets aside the
    records already there from that step on (``set_aside_steps_from``), so each step is recorded once."""

    def __init__(self) -> None:
        self._opened: set[Path] = set()  # the files this writer has appended to

    def append(self, dump_dir: str | Path, parts: GdpoParts, uids: Sequence[Any], step: int) -> Path:
        """Append one step (its options read from ``parts``); returns the file. A FIFO or anything else but a
        regular file there is refused (OSError naming it), never waited on."""
        directory = Path(dump_dir)
        options = parts.options
        record = {
            "format": FORMAT,
            "step": int(step),
            "uid": [str(uid) for uid in uids],
            "rewards": {name: _column(parts, k) for k, name in enumerate(parts.names)},
            # the configured weights at this step (a schedule's value); SAW's are recomputed from the rewards
            "weights": dict(zip(parts.names, (parts.weights if parts.base_weights is None
                                               else parts.base_weights).tolist(), strict=True)),
            "response_length": [int(n) for n in parts.valid_tokens.tolist()],
            "advantage": [round(value, 6) for value in parts.final.tolist()],
            **{name: getattr(options, name) for name in RECORDED},
            "estimator": parts.estimator,
        }
        path = directory / RECORD_FILE
        try:
            if path not in self._opened:
                directory.mkdir(parents=True, exist_ok=True)
                set_aside_steps_from(path, int(step))
                self._opened.add(path)
            with open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        except NotRegularFile as exc:
            raise NotRegularFile(
                f"cannot write the GDPO record of step {step}: {exc} Remove it, or set algorithm.gdpo.dump_dir to "
                "another directory, or null."
            ) from None
        except OSError as exc:
            raise OSError(
                f"cannot write the GDPO record of step {step} to {path}: {exc}. Set algorithm.gdpo.dump_dir to a "
                "writable directory on the node that runs verl's TaskRunner, or null."
            ) from exc
        return path


def _column(parts: GdpoParts, k: int) -> list[float | None]:
    """The scores of reward ``k`` that step 1 normalized (after the conditions, which a record does not carry),
    None where the reward does not apply."""
    values = parts.scores[:, k].tolist()
    if parts.applies is None:
        return values
    return [value if applied else None for value, applied in zip(values, parts.applies[:, k].tolist(), strict=True)]


def set_aside_steps_from(path: Path, step: int) -> None:
    """Before a process first appends ``step`` to ``path``: move the records of ``step`` and later steps (an
    earlier run wrote them and stopped before its checkpoint, and this run resumed from the one before, or this
    is a new run in the same directory) to ``SUPERSEDED_FILE`` beside it, and drop a torn last line (a run killed
    while writing it). Each step is then recorded once in ``path``; both are logged as warnings. Reads and
    rewrites one line at a time; NotRegularFile when ``path`` (or a file it writes) is not a regular file."""
    try:
        reader = open_regular(path)
    except FileNotFoundError:
        return
    later_steps: list[int] = []
    torn = 0
    with reader:
        for line in reader:
            if not line.endswith(b"\n"):
                torn = len(line)  # only the last line can lack its newline
                break
            found = _STEP.match(line)
            if found and int(found.group(1)) >= step:
                later_steps.append(int(found.group(1)))
    if torn:
        logger.warning("%s: dropped a torn last line (%d bytes): the run writing it stopped in the middle.", path, torn)
    if not (torn or later_steps):
        return
    temporary = path.with_name(path.name + ".tmp")
    superseded = path.parent / SUPERSEDED_FILE
    create = os.O_WRONLY | os.O_CREAT
    with open_regular(path) as reader, open_regular(temporary, create | os.O_TRUNC, "wb") as kept:
        moved = open_regular(superseded, create | os.O_APPEND, "ab") if later_steps else None
        try:
            for line in reader:
                if not line.endswith(b"\n"):
                    break
                found = _STEP.match(line)
                (moved if moved and found and int(found.group(1)) >= step else kept).write(line)
        finally:
            if moved:
                moved.close()
    os.replace(temporary, path)
    if later_steps:
        logger.warning(
            "%s: this run records step %d on, so the %d record(s) of step(s) %s already there (written by a run "
            "that stopped before their checkpoint, or by an earlier run) were moved to %s.",
            path, step, len(later_steps), ", ".join(map(str, sorted(set(later_steps)))), SUPERSEDED_FILE,
        )


def load_steps(path: str | Path, rewards: Sequence[str] | None = None) -> list[StepRecord]:
    """Steps from a gdpo-verl record (a ``gdpo_steps.jsonl`` file or a directory holding one) or from verl's
    rollout dumps (a ``<step>.jsonl`` file or a directory of them, grouped by identical prompt text).

    Args:
        rewards: the component names; required for verl's dumps (they mix components with other fields),
            optional for gdpo-verl records (a subset to keep).
    """
    return list(iter_steps(path, rewards))


def iter_steps(path: str | Path, rewards: Sequence[str] | None = None) -> Iterator[StepRecord]:
    """``load_steps`` one step at a time: a record file is read line by line, a verl dump file one at a time
    (one step each), so memory holds one step, whatever the size of the file. ValueError naming the file, the
    line and the field on a bad input."""
    path = Path(path)
    if path.is_dir():
        record = path / RECORD_FILE
        if os.path.lexists(record):
            path = record  # not a regular file: refused by the reader, never skipped for the dumps beside it
        else:
            dumps = sorted(path.glob("*.jsonl"), key=_dump_order)
            if not dumps:
                raise ValueError(f"{path} holds neither {RECORD_FILE} nor verl rollout dumps (<step>.jsonl).")
            for dump in dumps:
                yield from _load_file(dump, rewards)
            return
    elif not os.path.lexists(path):
        raise ValueError(f"{path}: no such file or directory.")
    yield from _load_file(path, rewards)


def _dump_order(path: Path) -> tuple[float, str]:
    """verl names its dumps <step>.jsonl: numeric order, then anything else by name."""
    return (int(path.stem), "") if path.stem.isdigit() and len(path.stem) < 19 else (math.inf, path.name)


def _is_record(row: Any) -> bool:
    return isinstance(row, dict) and row.get("format") == FORMAT


def _is_dump_row(row: Any) -> bool:
    return isinstance(row, dict) and "input" in row and "step" in row


def _load_file(path: Path, rewards: Sequence[str] | None) -> Iterator[StepRecord]:
    lines = iter_jsonl(path, torn_tail=True)
    first = next(lines, None)
    if first is None:
        raise ValueError(f"{path} is empty.")
    number, row = first
    if _is_record(row):
        for number, row in itertools.chain([first], lines):
            if not _is_record(row):
                raise ValueError(f"{path}:{number}: not a gdpo-verl record (\"format\": \"{FORMAT}\") like line "
                                 f"{first[0]}; a record file holds records only.")
            yield _from_record(path, number, row, rewards)
    elif _is_dump_row(row):
        yield from _from_verl_dump(path, itertools.chain([first], lines), rewards)
    else:
        raise ValueError(
            f"{path}:{number}: not a gdpo-verl record (a JSON object with \"format\": \"{FORMAT}\") nor a verl "
            "rollout dump line (a JSON object with \"input\" and \"step\")."
        )


def _describe(value: Any) -> str:
    """A value for an error message, short even for a 4,000-digit integer or a long list."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    return f"{value!r:.80}"


def _is_finite(value: Any) -> bool:
    """A finite real number a float64 holds, not a bool (a record's rewards are floats)."""
    return not isinstance(value, (bool, np.bool_)) and is_reward_value(value)


def _is_dump_reward(value: Any) -> bool:
    """A reward in verl's dump: a finite number, or a bool (``compute_score`` may return one; True counts as 1)."""
    return isinstance(value, bool) or _is_finite(value)


def _whole(where: str, field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_WHOLE:
        raise ValueError(f"{where}: {field} must be a whole number from 0 to 2^53; got {_describe(value)}.")
    return int(value)


def _from_record(path: Path, number: int, row: dict, rewards: Sequence[str] | None) -> StepRecord:
    where = f"{path}:{number}"
    missing = [key for key in ("step", "uid", "rewards") if key not in row]
    if missing:
        raise ValueError(f"{where}: a {FORMAT} record needs step, uid and a rewards mapping; missing {missing}.")
    step = _whole(where, "step", row["step"])
    if not isinstance(row["rewards"], dict) or not row["rewards"]:
        raise ValueError(f"{where}: rewards must be a mapping of reward name -> list of numbers; got "
                         f"{_describe(row['rewards'])}.")
    names = list(row["rewards"])
    if rewards is not None:
        unknown = [name for name in rewards if name not in names]
        if unknown:
            raise ValueError(f"{where}: --rewards {unknown} not in the record, which has {names}.")
        names = list(rewards)
    uid = row["uid"]
    if not isinstance(uid, list) or not uid:
        raise ValueError(f"{where}: uid must be a non-empty list with one group id per response; got {_describe(uid)}.")
    odd = [value for value in uid if type(value) not in (str, int)]
    if odd:
        raise ValueError(f"{where}: uid must hold one group id per response, a string (or a whole number); got "
                         f"{_describe(odd[0])}.")
    if len({type(value) for value in uid}) > 1:
        raise ValueError(f"{where}: uid mixes strings and whole numbers (1 and \"1\" would name different groups); "
                         "write every group id as a string.")
    size = len(uid)
    for name in names:
        values = row["rewards"][name]
        if not isinstance(values, list) or len(values) != size:
            raise ValueError(f"{where}: reward {name!r} must be a list of {size} numbers, one per response.")
        bad = [value for value in values if value is not None and not _is_finite(value)]
        if bad:
            raise ValueError(f"{where}: reward {name!r} must hold finite numbers (null where it does not apply); got "
                             f"{_describe(bad[0])}.")
    lengths = row.get("response_length")
    if lengths is not None:
        if not isinstance(lengths, list) or len(lengths) != size:
            raise ValueError(f"{where}: response_length must be a list of {size} token counts, one per response; "
                             f"got {_describe(lengths)}.")
        lengths = [_whole(where, "response_length", value) for value in lengths]
    weights = row.get("weights")
    if weights is not None:
        if not isinstance(weights, dict) or sorted(weights) != sorted(row["rewards"]):
            raise ValueError(f"{where}: weights must name the record's rewards {sorted(row['rewards'])}; got {weights!r:.120}.")
        bad = [value for value in weights.values() if not _is_finite(value)]
        if bad:
            raise ValueError(f"{where}: weights must be finite numbers; got {_describe(bad[0])}.")
    recorded = {name: checked(name, row.get(name, DEFAULTS[name]), f"{where}: {name}") for name in RECORDED}
    estimator = row.get("estimator", ESTIMATORS[0])
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise ValueError(f"{where}: estimator must be one of {ESTIMATORS}; got {_describe(estimator)}.")
    return StepRecord(
        step=step,
        uid=uid,
        rewards={name: row["rewards"][name] for name in names},
        response_length=lengths,
        weights={name: weights[name] for name in names} if weights else None,
        recorded=recorded,
        source=where,
        estimator=estimator,
    )


def _from_verl_dump(path: Path, rows: Iterator[tuple[int, Any]], rewards: Sequence[str] | None) -> list[StepRecord]:
    """The steps of one verl dump file: its rows grouped by step (only the prompt and the rewards of each are kept)."""
    by_step: dict[int, tuple[str, list[str], dict[str, list[float]]]] = {}
    prompts: dict[str, str] = {}  # one copy of each prompt text, however many rollouts share it
    for number, row in rows:
        where = f"{path}:{number}"
        if not _is_dump_row(row):
            raise ValueError(f"{where}: not a verl rollout dump line (a JSON object with \"input\" and \"step\") like "
                             "the first line; a dump holds dump lines only.")
        if not rewards:
            numeric = sorted(key for key, value in row.items()
                             if _is_dump_reward(value) and key not in ("score", "step"))
            raise ValueError(
                f"{path} is a verl rollout dump: name the reward components with --rewards "
                f"(numeric fields in it: {numeric})."
            )
        missing = [name for name in rewards if name not in row]
        if missing:
            raise ValueError(f"{where}: rewards {missing} are not in the dump; its fields are {sorted(row)}.")
        step = _whole(where, "step", row["step"])
        for name in rewards:
            if row[name] is not None and not _is_dump_reward(row[name]):
                raise ValueError(f"{where}: reward {name!r} must be a finite number (null where it does not apply); "
                                 f"got {_describe(row[name])}.")
        text = str(row["input"])
        _, uids, values = by_step.setdefault(step, (where, [], {name: [] for name in rewards}))
        uids.append(prompts.setdefault(text, text))
        for name in rewards:
            values[name].append(None if row[name] is None else float(row[name]))
    # verl's dump has no uid: the rollouts of one prompt share its text.
    return [
        StepRecord(step=step, uid=uids, rewards=values, response_length=None,
                   recorded=recorded_defaults(batch_norm="sequence"), source=where)
        for step, (where, uids, values) in sorted(by_step.items())
    ]


def step_parts(record: StepRecord, overrides: dict[str, Any] | None = None) -> GdpoParts:
    """Recompute GDPO for one step from its record (per-response values only), or CorrGRPO where the record's
    ``estimator`` (or ``overrides["estimator"]``) is "corrgrpo"; ``overrides``: options to compute it with instead
    of the record's (fields of ``GdpoOptions``, ``estimator``, and ``weights``, which may hold schedules,
    read at the record's step)."""
    overrides = dict(overrides or {})
    options = {**record.options, **overrides}
    ignored = unread(overrides, options)
    if ignored:
        name = ignored[0]
        needs, needed = OPTIONS[name].only_with
        raise ValueError(f"{name}={overrides[name]} is read by {needs}={needed} only, and step {record.step} is "
                         f"computed with {needs}={options[needs]}: it would be ignored. "
                         f"Add --{needs.replace('_', '-')} {needed}.")
    weights = options.pop("weights", None)
    if weights is not None:
        unknown = sorted(set(weights) - set(record.rewards))
        if unknown:
            raise ValueError(f"weights name {unknown}, which the record of step {record.step} does not hold; it "
                             f"holds {sorted(record.rewards)}.")
        weights = {**(record.weights or dict.fromkeys(record.rewards, 1.0)),
                   **weights_at(weights, record.step)}
    size = len(record.uid)
    lengths = record.response_length if record.response_length is not None else [1] * size
    outcome = gdpo_outcome_parts
    if record.estimator == CORRGRPO and "batch_norm" not in overrides:  # CorrGRPO has no batch step; GDPO's default
        options["batch_norm"] = DEFAULTS["batch_norm"]
    if options.pop("estimator", ESTIMATORS[0]) in (CORRGRPO, AUTHORS_NAME):
        changed = [f"{name}={overrides[name]}" for name in GDPO_ONLY if name in overrides]
        if changed:
            raise ValueError(f"{', '.join(changed)}: GDPO's options, and step {record.step} is computed with CorrGRPO "
                             "(its record's estimator, or --estimator corrgrpo), which has no place for them. Leave "
                             "them out, or add --estimator gdpo.")
        outcome = corrgrpo_outcome_parts
        options = {name: options[name] for name in RECORDED if name not in GDPO_ONLY}
    return outcome(
        {name: values if None in values else torch.tensor(values, dtype=torch.float64)
         for name, values in record.rewards.items()},
        torch.tensor(lengths, dtype=torch.float64),
        np.array(record.uid, dtype=object),
        record.weights if weights is None else weights,
        gdpo_options(options),
    )


def step_report(record: StepRecord, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"step", "responses", "groups", "metrics"}`` with the ``gdpo/`` metrics of the step. A record read from a
    file (``source`` set) that GDPO refuses raises ValueError naming the file and line."""
    try:
        parts = step_parts(record, overrides)
        metrics = advantage_metrics(parts)
    except ValueError as exc:
        if not record.source:
            raise
        raise ValueError(f"{record.source}: {exc}") from exc
    except ArithmeticError as exc:  # an overflow the checks above did not foresee: still the file's line
        if not record.source:
            raise
        largest = {name: max(map(abs, values)) for name, values in record.rewards.items()}
        raise ValueError(f"{record.source}: the step's metrics overflow float64 ({exc}); rewards reach "
                         f"{largest}: rescale them.") from exc
    return {"step": record.step, "responses": len(record.uid), "groups": parts.num_groups, "metrics": metrics}


def reports(path: str | Path, rewards: Sequence[str] | None = None,
            overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``step_report`` of every step of ``iter_steps``, one step in memory at a time."""
    return [step_report(record, overrides) for record in iter_steps(path, rewards)]
