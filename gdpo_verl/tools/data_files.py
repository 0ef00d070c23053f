"""The data scripts' input files: JSON Lines, JSON (a list, or ``{"data": [...]}``) or parquet (pandas, imported
only for parquet), with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gdpo_verl.core.jsonl import iter_jsonl, open_regular, regular_file


def read_rows(path: str | Path) -> list[Any]:
    """The rows of a ``.jsonl``, ``.json`` (a list, or ``{"data": [...]}`` / ``{"rows": [...]}``) or ``.parquet``
    file (pandas, imported here only); ValueError naming the file and what is wrong."""
    path = regular_file(path)
    if path.suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict("records")
    if path.suffix == ".jsonl":
        return [row for _, row in iter_jsonl(path)]
    if path.suffix == ".json":
        with open_regular(path) as handle:
            text = handle.read()
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError(f"{path}: not valid JSON (nested too deeply).") from None
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(";")[0]
            raise ValueError(f"{path}: not valid JSON ({reason}).") from None
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a list of rows (or {{\"data\": [...]}}).")
        return rows
    raise ValueError(f"{path}: expected a .json, .jsonl or .parquet file.")
