"""Reading JSON Lines files (records, rollouts, generations, data), with errors that name the line, and the
data scripts' input files (JSON Lines, JSON or parquet)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger("gdpo_verl")


def read_jsonl(path: str | Path, *, torn_tail: bool = False) -> list[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line; ValueError naming the file and line otherwise.

    ``torn_tail=True`` is for files a process appends to and may be killed while writing: a last line that is
    not valid JSON and has no newline after it is left out, with a warning, instead of raising.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file.")
    text = path.read_text()
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            if torn_tail and number == len(lines) and not text.endswith("\n"):
                logger.warning("%s:%d: left out a torn last line (%d characters, no newline): the process writing "
                               "it stopped in the middle.", path, number, len(line))
                continue
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg}).") from exc
    return rows


def read_rows(path: str | Path) -> list[Any]:
    """The rows of a ``.jsonl``, ``.json`` (a list, or ``{"data": [...]}`` / ``{"rows": [...]}``) or ``.parquet``
    file (pandas, imported here only); ValueError naming the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file.")
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if path.suffix == ".jsonl":
        return [row for _, row in read_jsonl(path)]
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg}).") from exc
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a list of rows (or {{\"data\": [...]}}).")
        return rows
    raise ValueError(f"{path}: expected a .json, .jsonl or .parquet file.")
