"""Turn ToolRL's tool-calling data (the paper's tool-calling experiment) into verl parquet files.

ToolRL (github.com/qiancheng0/ToolRL) ships ``dataset/rlla_4k_raw/rlla_rl.json``: about 4k rows
``{"instruction", "input", "output"}`` (2k ToolACE, 1k Hammer with masked names, 1k xLAM). The instruction is
the system prompt listing the available tools; the input is the dialogue so far; the output is the expected
turn (``<think>...</think>`` then ``<tool_call>`` JSON lines and/or ``<response>``). Its ``dataset/rlla_4k``
holds the same rows already split and in verl's layout (train.parquet, test.parquet).

Each row becomes verl's layout: ``data_source`` ("toolrl"), ``prompt`` (system: the instruction, user: the
input, as ToolRL does), ``ability``, ``reward_model: {style: rule, ground_truth: <the output, unchanged>}``,
``extra_info: {split, index, tools (the names the instruction lists), expected (the ground truth as
{"tool_calls", "response"} JSON), parameter_types (each listed tool's declared parameter types, as JSON
{tool: {parameter: type}}, which the reward compares values by)}``. The raw file is split as ToolRL splits it
(shuffled with numpy seed 31415, the last 2% for test), so the test rows are ToolRL's.

    # from local files: the raw JSON, or ToolRL's rlla_4k folder (or one of its parquet files)
    python scripts/prepare_tool_data.py --out ~/data/tool_calling --toolrl ToolRL/dataset/rlla_4k_raw/rlla_rl.json
    python scripts/prepare_tool_data.py --out ~/data/tool_calling --toolrl ToolRL/dataset/rlla_4k
    # from GitHub (needs internet)
    python scripts/prepare_tool_data.py --out ~/data/tool_calling

A malformed row (a field missing or not text, an output whose tool calls do not parse, no tools listed) stops
the script naming its row number; ``--skip-bad-rows`` leaves such rows out instead and counts them by reason.
Prints the rows written per split and every count. Exit code 2 on bad arguments, unreadable input or a
malformed row.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from gdpo_verl.experiments.data_files import BadRow, convert_splits, read_rows, write_splits
from gdpo_verl.rewards.tool_calling import parse_ground_truth
from gdpo_verl.rewards.tool_values import schema_type

SOURCE_URL = "https://raw.githubusercontent.com/qiancheng0/ToolRL/main/dataset/rlla_4k_raw/rlla_rl.json"
SPLIT_SEED = 31415  # ToolRL's dataset/rlla_4k_raw/rlla.py
TEST_FRACTION = 0.02
DATA_SOURCE = "toolrl"
TOOL_NAME = re.compile(r"^\d+\. Name: (.+?)\s*$", re.MULTILINE)
# a listed tool's parameters: the JSON object on the "Parameters:" line that follows its name
TOOL_PARAMETERS = re.compile(r"^\d+\. Name: (.+?)\s*$(?:\n(?!\d+\. Name:).*)*?\nParameters: (.*)$", re.MULTILINE)


def read_source(path: Path | None, cache: Path) -> dict[str, list[dict[str, Any]]] | list[dict[str, Any]]:
    """The raw rows (a list, to be split) or the already split rows ({"train": [...], "test": [...]})."""
    if path is None:
        target = cache / "rlla_rl.json"
        if not target.is_file():
            try:
                with urllib.request.urlopen(SOURCE_URL, timeout=60) as answer:  # noqa: S310 (a fixed https URL)
                    target.write_bytes(answer.read())
            except OSError as exc:
                raise ValueError(
                    f"could not download {SOURCE_URL} ({exc}); download it yourself and pass --toolrl PATH."
                ) from exc
        path = target
    if path.is_dir():
        files = {split: path / f"{split}.parquet" for split in ("train", "test")}
        missing = [str(file) for file in files.values() if not file.is_file()]
        if missing:
            raise ValueError(f"{path}: a ToolRL rlla_4k folder holds train.parquet and test.parquet; missing {missing}.")
        return {split: read_rows(file) for split, file in files.items()}
    rows = read_rows(path)
    if path.suffix == ".parquet":
        split = "test" if "test" in path.stem else "train"
        return {split: rows}
    return rows


def toolrl_split(rows: list[Any]) -> dict[str, list[Any]]:
    """ToolRL's own split of the raw rows: numpy's global shuffle with seed 31415, the last 2% for test."""
    shuffled = list(rows)
    np.random.seed(SPLIT_SEED)
    np.random.shuffle(shuffled)
    test_count = int(len(shuffled) * TEST_FRACTION)
    if test_count == 0:
        raise ValueError(f"{len(rows)} rows are too few to split 2% off for test; pass ToolRL's rlla_4k folder instead.")
    return {"train": shuffled[:-test_count], "test": shuffled[-test_count:]}


def fields(row: Any) -> tuple[str, str, str]:
    """(instruction, input, output) of a raw row, or of a row of ToolRL's own verl parquet."""
    if not isinstance(row, dict):
        raise BadRow("not a JSON object")
    if "prompt" in row and "reward_model" in row:  # ToolRL's rlla_4k parquet
        prompt = list(row["prompt"])
        reward_model = row["reward_model"] if isinstance(row["reward_model"], dict) else {}
        if len(prompt) != 2 or not all(isinstance(turn, dict) for turn in prompt):
            raise BadRow("prompt is not [system, user]")
        row = {"instruction": prompt[0].get("content"), "input": prompt[1].get("content"),
               "output": reward_model.get("ground_truth")}
    values = []
    for key in ("instruction", "input", "output"):
        value = row.get(key)
        if not isinstance(value, str) or not value.strip():
            raise BadRow(f"{key} missing or not text")
        values.append(value)
    return values[0], values[1], values[2]


def convert_row(row: Any, split: str, index: int, counts: Counter) -> dict[str, Any]:
    instruction, user, output = fields(row)
    tools = TOOL_NAME.findall(instruction)
    if not tools:
        raise BadRow("no tools listed in the instruction (lines '1. Name: ...')")
    try:
        truth = parse_ground_truth(output)
    except ValueError as exc:
        raise BadRow("output does not parse", str(exc)) from None
    if truth.calls is None and truth.response is None:
        raise BadRow("output has neither <tool_call> nor <response>")
    kind = "tool call only" if truth.response is None else "response only" if truth.calls is None else "tool call and response"
    counts[f"{split}: {kind}"] += 1
    if truth.calls is not None and any(call["name"] not in tools for call in truth.calls):
        counts[f"{split}: ground truth calls a tool the instruction does not list (kept)"] += 1
    expected = {"tool_calls": None if truth.calls is None else list(truth.calls), "response": truth.response}
    types = parameter_types(instruction)
    if len(types) < len(set(tools)):
        counts[f"{split}: a listed tool without readable parameter types (its values typed by the gold's JSON)"] += 1
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "system", "content": instruction}, {"role": "user", "content": user}],
        "ability": "tool_calling",
        "reward_model": {"style": "rule", "ground_truth": output},
        "extra_info": {"split": split, "index": index, "tools": tools, "expected": json.dumps(expected),
                       "parameter_types": json.dumps(types)},
    }


def parameter_types(instruction: str) -> dict[str, dict[str, str]]:
    """``{tool: {parameter: type}}`` from the ``Parameters: {...}`` line of each tool the instruction lists (a list's
    entry type in brackets: ``array[float]``); a tool whose line does not parse as ``{name: {"type": str, ...}}``
    is left out (the reward then types its values by the gold's JSON)."""
    types: dict[str, dict[str, str]] = {}
    for name, line in TOOL_PARAMETERS.findall(instruction):
        try:
            parameters = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(parameters, dict) and all(isinstance(spec, dict) for spec in parameters.values()):
            types[name] = {key: schema_type(spec) for key, spec in parameters.items() if schema_type(spec) is not None}
    return types


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for train.parquet and test.parquet")
    parser.add_argument("--toolrl", type=Path,
                        help="ToolRL's rlla_rl.json, its rlla_4k folder, or one of its parquet files (default: download)")
    parser.add_argument("--skip-bad-rows", action="store_true", help="leave malformed rows out instead of stopping")
    args = parser.parse_args(argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        source = read_source(args.toolrl.expanduser() if args.toolrl else None, args.out)
        splits = source if isinstance(source, dict) else toolrl_split(source)
        written, counts = convert_splits(splits, convert_row, args.skip_bad_rows)
        write_splits(args.out, splits, written, counts)
    except ValueError as exc:
        print(f"prepare_tool_data: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
