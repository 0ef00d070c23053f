"""The data scripts' input files: JSON Lines, JSON (a list, or ``{"data": [...]}``) or parquet (pandas, imported
only for parquet), with errors that name the file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from gdpo_verl.records.jsonl import iter_jsonl, open_regular, regular_file


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


class BadRow(ValueError):
    """A row a data script cannot use: ``reason`` (what is counted) and a detail for the message."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason + (f": {detail}" if detail else ""))
        self.reason = reason


def convert_splits(splits: dict[str, list[Any]], convert_row: Any, skip_bad_rows: bool
                   ) -> tuple[dict[str, list[dict]], Counter]:
    """Every row of every split through ``convert_row(row, split, index, counts)`` (the row in verl's layout, or
    None for a row left out on purpose, which ``convert_row`` counts). A ``BadRow`` stops it naming the split and
    the row's number, or with ``skip_bad_rows`` is left out and counted by its reason."""
    written: dict[str, list[dict]] = {}
    counts: Counter = Counter()
    for split, rows in splits.items():
        written[split] = []
        for number, row in enumerate(rows, start=1):
            try:
                converted = convert_row(row, split, len(written[split]), counts)
            except BadRow as exc:
                if not skip_bad_rows:
                    raise ValueError(
                        f"{split} row {number}: {exc}. Fix the row, or pass --skip-bad-rows to leave such rows out."
                    ) from None
                counts[f"{split}: skipped, {exc.reason}"] += 1
                continue
            if converted is not None:
                written[split].append(converted)
    return written, counts


def write_splits(out: Path, splits: dict[str, list[Any]], written: dict[str, list[dict]], counts: Counter,
                 what: str = "usable") -> None:
    """``out/<split>.parquet`` for each split (pandas), a line per split and one per count; ValueError for a
    split left with no rows."""
    import pandas as pd

    for split, rows in written.items():
        if not rows:
            raise ValueError(f"{split}: no {what} rows among {len(splits[split])}.")
    out.mkdir(parents=True, exist_ok=True)
    for split, rows in written.items():
        target = out / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(target)
        print(f"{split}: {len(rows)} rows written to {target}")
    for reason, count in sorted(counts.items()):
        print(f"  {count} {reason}")
