"""Evaluate a checkpoint on the held-out split of the tool-calling data with the training rewards.

Generation uses vLLM (greedy by default: one sample per prompt) on the test.parquet that
scripts/prepare_tool_data.py writes; scoring uses gdpo_verl.rewards.tool_calling: correct-format rate,
average correctness (-3..3), exact-call accuracy (the expected calls exactly, in order; or no call where none
is expected) and the parse rate of expected calls. The paper reports BFCL-v3 instead (docs/tool-calling.md
says how to run it); these numbers track the training objective on data like the training data.

    # generate and score (GPU node with vLLM)
    python scripts/evaluate_tool_calling.py --model CHECKPOINT_HF_DIR --data-dir ~/data/tool_calling --out results/gdpo
    # score generations saved earlier (any machine); several runs side by side
    python scripts/evaluate_tool_calling.py --generations results/grpo/generations.jsonl results/gdpo/generations.jsonl \
        --labels GRPO,GDPO --out results/compare

Writes generations.jsonl (when generating), results.json and results.md to --out. Exit code 2 on bad
arguments or inputs, with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gdpo_verl.experiments.evaluation import (
    add_generation_options,
    column_labels,
    generate_to_file,
    load_generations,
    score_tool_generations,
    tool_markdown_table,
)


def generate_split(args: argparse.Namespace) -> Path:
    path = args.data_dir / "test.parquet"
    if not path.is_file():
        raise ValueError(f"{path} not found: run scripts/prepare_tool_data.py first.")
    return generate_to_file(args, {"toolrl_test": pd.read_parquet(path).to_dict("records")}, args.out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint to generate with (a Hugging Face model directory)")
    source.add_argument("--generations", type=Path, nargs="+", help="score these generations.jsonl files instead")
    parser.add_argument("--data-dir", type=Path, help="the parquet files of scripts/prepare_tool_data.py (with --model)")
    parser.add_argument("--labels", help="comma-separated column titles, one per --generations file (default: ours)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results")
    add_generation_options(parser, samples=1, temperature=0.0, top_p=1.0, max_tokens=1024)
    args = parser.parse_args(argv)
    if args.model and args.data_dir is None:
        parser.error("--model needs --data-dir (the parquet files of scripts/prepare_tool_data.py)")
    files, labels = column_labels(parser, args)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        paths = [generate_split(args)] if args.model else files
        columns = {label: score_tool_generations(load_generations(path)) for label, path in zip(labels, paths, strict=True)}
    except ValueError as exc:
        print(f"evaluate_tool_calling: {exc}", file=sys.stderr)
        return 2
    table = tool_markdown_table(columns)
    (args.out / "results.json").write_text(json.dumps(columns, indent=2) + "\n")
    (args.out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
