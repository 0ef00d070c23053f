"""Turn the code split of PRIME's Eurus-2-RL-Data (the paper's coding experiment) into verl parquet files.

Eurus-2-RL-Data (PRIME-RL/Eurus-2-RL-Data) holds math and code problems already in verl's layout: ``data_source``
(for code: apps, codecontests, codeforces, taco), ``prompt`` (chat messages), ``ability`` ("math" or "coding"),
``reward_model: {style, ground_truth}`` (for code, the JSON test format: ``{"inputs", "outputs"[, "fn_name"]}``)
and ``extra_info``. This keeps the coding rows, checks each ground truth the way the coding reward reads it
(gdpo_verl/rewards/coding.py), and writes ``train.parquet`` and ``validation.parquet`` with the prompt and the
ground truth unchanged (the ground truth as its JSON string).

    # from local files: the dataset's folder (its train and validation parquet files), or one file of it
    python scripts/prepare_coding_data.py --out ~/data/coding --eurus /path/to/Eurus-2-RL-Data
    # by its dataset id (needs internet and pip install datasets)
    python scripts/prepare_coding_data.py --out ~/data/coding --dataset PRIME-RL/Eurus-2-RL-Data

A malformed coding row (no prompt, a ground truth the reward cannot read) stops the script naming its split and
row number; ``--skip-bad-rows`` leaves such rows out and counts them by reason. Prints the rows written per split
and per data source. Exit code 2 on bad arguments, unreadable input or a malformed row.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from gdpo_verl.rewards.coding import parse_tests
from gdpo_verl.experiments.data_files import BadRow, convert_splits, read_rows, write_splits

SPLITS = ("train", "validation")
CODING = "coding"


def read_local(path: Path) -> dict[str, list[Any]]:
    """A folder: the parquet (or jsonl) files whose names start with a split's name, found anywhere below it (the
    dataset's own layout is data/train-*.parquet, data/validation-*.parquet); a file: one split, named by the file."""
    if path.is_dir():
        splits: dict[str, list[Any]] = {}
        for split in SPLITS:
            files = sorted(f for f in path.rglob(f"{split}*") if f.suffix in (".parquet", ".jsonl", ".json"))
            if files:
                splits[split] = [row for file in files for row in read_rows(file)]
        if not splits:
            raise ValueError(f"{path}: no train*.parquet or validation*.parquet below it.")
        return splits
    split = "validation" if "valid" in path.stem else "train"
    return {split: read_rows(path)}


def read_dataset(name: str) -> dict[str, list[Any]]:
    try:
        import datasets
    except ImportError:
        raise ValueError("--dataset needs the datasets package (pip install datasets), and internet") from None
    loaded = datasets.load_dataset(name)
    return {split: list(loaded[split]) for split in SPLITS if split in loaded}


def convert_row(row: Any, split: str, index: int, counts: Counter) -> dict[str, Any] | None:
    """The row in verl's layout; None for a row that is not a coding problem."""
    if not isinstance(row, dict):
        raise BadRow("not a JSON object")
    if row.get("ability") != CODING:
        counts[f"{split}: left out, not coding"] += 1
        return None
    prompt = row.get("prompt")
    prompt = list(prompt) if prompt is not None and not isinstance(prompt, (str, dict)) else prompt
    if not isinstance(prompt, list) or not prompt or not all(isinstance(turn, dict) and turn.get("content")
                                                              for turn in prompt):
        raise BadRow("prompt is not a list of chat messages")
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
    try:
        cases = parse_tests(truth)
    except ValueError as exc:
        raise BadRow("ground truth the coding reward cannot read", str(exc)) from None
    text = truth if isinstance(truth, str) else json.dumps(truth)
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    counts[f"{split}: {row.get('data_source') or 'code'}"] += 1
    return {
        "data_source": str(row.get("data_source") or "code"),
        "prompt": [{"role": turn["role"], "content": turn["content"]} for turn in prompt],
        "ability": CODING,
        "reward_model": {"style": "rule", "ground_truth": text},
        "extra_info": {**extra, "split": split, "index": index, "test_cases": len(cases.inputs),
                       "call_based": cases.fn_name is not None},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for train.parquet and validation.parquet")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--eurus", type=Path, help="Eurus-2-RL-Data's folder, or one parquet/jsonl file of it")
    source.add_argument("--dataset", help="a dataset id to load with the datasets package (online)")
    parser.add_argument("--skip-bad-rows", action="store_true", help="leave malformed rows out instead of stopping")
    args = parser.parse_args(argv)
    try:
        splits = read_local(args.eurus.expanduser()) if args.eurus else read_dataset(args.dataset)
        written, counts = convert_splits(splits, convert_row, args.skip_bad_rows)
        write_splits(args.out, splits, written, counts, what="coding")
    except ValueError as exc:
        print(f"prepare_coding_data: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
