"""Evaluate a checkpoint on the math benchmarks like the paper's Table 3 (accuracy and Exceed).

Generation uses vLLM (temperature 0.6, top_p 0.95, up to 32k tokens, 16 samples per question) on the
parquet files that scripts/prepare_data.py writes; scoring uses the training reward's correctness check.

    # generate and score (GPU node with vLLM)
    python scripts/evaluate.py --model CHECKPOINT_HF_DIR --data-dir ~/data/math_length --out results/r1_gdpo \
        --paper r1_1.5b_gdpo
    # score generations saved earlier (any machine)
    python scripts/evaluate.py --generations results/r1_gdpo/generations.jsonl --out results/r1_gdpo

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
    BENCHMARKS,
    PAPER,
    add_generation_options,
    generate_to_file,
    load_generations,
    markdown_table,
    score_generations,
)


def generate_all(args: argparse.Namespace) -> Path:
    benchmarks = {}
    for benchmark in args.benchmarks:
        path = args.data_dir / f"{benchmark}.parquet"
        if not path.is_file():
            raise ValueError(f"{path} not found: run scripts/prepare_data.py, or drop {benchmark} from --benchmarks.")
        benchmarks[benchmark] = pd.read_parquet(path).to_dict("records")
    return generate_to_file(args, benchmarks, args.out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint to generate with (a Hugging Face model directory)")
    source.add_argument("--generations", type=Path, help="score this generations.jsonl instead of generating")
    parser.add_argument("--data-dir", type=Path, help="the parquet files of scripts/prepare_data.py (with --model)")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS), help=f"comma-separated, from {list(BENCHMARKS)}")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results")
    add_generation_options(parser, samples=16, temperature=0.6, top_p=0.95, max_tokens=32768)
    parser.add_argument("--max-length", type=int, default=4000, help="the length budget behind Exceed (tokens)")
    parser.add_argument("--think", choices=["required", "none"], default="required",
                        help="required: the answer follows </think> (R1 distills); none: instruct models")
    parser.add_argument("--timeout-s", type=float, default=10.0, help="the longest one answer check may take")
    parser.add_argument("--paper", choices=sorted(PAPER), help="print the paper's numbers for this run beside ours")
    parser.add_argument("--label", default="ours", help="the column title of our numbers")
    args = parser.parse_args(argv)
    args.benchmarks = [name.strip() for name in args.benchmarks.split(",") if name.strip()]
    unknown = [name for name in args.benchmarks if name not in BENCHMARKS]
    if unknown:
        parser.error(f"--benchmarks {unknown}: unknown; known: {list(BENCHMARKS)}")
    if args.model and args.data_dir is None:
        parser.error("--model needs --data-dir (the parquet files of scripts/prepare_data.py)")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        generations = generate_all(args) if args.model else args.generations
        if not generations.is_file():
            raise ValueError(f"{generations}: no such file.")
        summary = score_generations(
            load_generations(generations), max_length=args.max_length, think=args.think, timeout_s=args.timeout_s
        )
        table = markdown_table(summary, args.paper, args.label)
    except ValueError as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    (args.out / "results.json").write_text(json.dumps(
        {"results": summary, "paper": PAPER.get(args.paper) if args.paper else None}, indent=2) + "\n")
    (args.out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
