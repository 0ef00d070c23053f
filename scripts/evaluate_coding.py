"""Evaluate a checkpoint on code problems like the paper's Table 5 (Pass / Exceed / Bug per benchmark).

Generation uses vLLM (temperature 0.6, top_p 0.95, 16 samples per problem, as the paper's evaluation) on verl
parquet files such as the validation.parquet that scripts/prepare_coding_data.py writes; a row's benchmark is its
data_source (apps, codecontests, codeforces, taco). Scoring runs every program on every test case in the training
reward's sandbox (gdpo_verl.rewards.coding: --sandbox local, fusion or none, with its limits).

    # generate and score (GPU node with vLLM)
    python scripts/evaluate_coding.py --model CHECKPOINT_HF_DIR --data ~/data/coding/validation.parquet --out results/gdpo
    # score generations saved earlier (any Linux machine); several runs side by side
    python scripts/evaluate_coding.py --generations results/grpo/generations.jsonl results/gdpo/generations.jsonl \
        --labels GRPO,GDPO --out results/compare

Writes generations.jsonl (when generating), results.json and results.md to --out. Responses the checker could not
judge (the sandbox failed) are counted apart, never scored. Exit code 2 on bad arguments or inputs, 3 when the
sandbox cannot run here, each with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gdpo_verl.sandbox import SandboxUnavailable
from gdpo_verl.experiments.evaluation import (
    add_generation_options,
    column_labels,
    coding_markdown_table,
    generate_to_file,
    load_generations,
    read_paper_columns,
    score_coding_generations,
)


def generate_benchmarks(args: argparse.Namespace) -> Path:
    benchmarks: dict[str, list[dict]] = {}
    for path in args.data:
        if not path.is_file():
            raise ValueError(f"{path} not found: run scripts/prepare_coding_data.py first, or name a verl parquet file.")
        for row in pd.read_parquet(path).to_dict("records"):
            benchmarks.setdefault(str(row.get("data_source") or path.stem), []).append(row)
    return generate_to_file(args, benchmarks, args.out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint to generate with (a Hugging Face model directory)")
    source.add_argument("--generations", type=Path, nargs="+", help="score these generations.jsonl files instead")
    parser.add_argument("--data", type=Path, nargs="+", help="verl parquet files of code problems (with --model)")
    parser.add_argument("--labels", help="comma-separated column titles, one per --generations file (default: ours)")
    parser.add_argument("--out", type=Path, required=True, help="directory for the results")
    add_generation_options(parser, samples=16, temperature=0.6, top_p=0.95, max_tokens=32768)
    parser.add_argument("--max-length", type=int, default=4000, help="the length budget behind Exceed (tokens)")
    parser.add_argument("--think", choices=["required", "none"], default="required",
                        help="required: the program follows </think> (R1 distills); none: models that answer directly")
    parser.add_argument("--sandbox", choices=["local", "fusion", "none"], default="local",
                        help="where programs run (docs/coding.md): local bubblewrap, a Sandbox Fusion server, or "
                             "limits only (trusted machines)")
    parser.add_argument("--sandbox-fusion-url", help="with --sandbox fusion: the server's run_code endpoint")
    parser.add_argument("--sandbox-fusion-concurrent", type=int, default=64, help="with --sandbox fusion: requests at once")
    parser.add_argument("--wall-s", type=float, default=10.0, help="one test case's wall clock (s)")
    parser.add_argument("--cpu-s", type=int, help="one test case's CPU seconds (local and none; default 5)")
    parser.add_argument("--memory-mb", type=int, default=1024, help="one test case's memory (MB)")
    parser.add_argument("--stop-after-timeouts", type=int, default=0,
                        help="skip a response's remaining test cases once this many ran out of time (training uses 1; "
                             "0, the default here, runs every case, so that test_pass_rate does not depend on load)")
    parser.add_argument("--paper", type=Path, help="a JSON file of published numbers to print beside ours: "
                                                   '{"column": {"apps": [pass, exceed, bug], ...}}')
    args = parser.parse_args(argv)
    if args.model and not args.data:
        parser.error("--model needs --data (verl parquet files of code problems, e.g. scripts/prepare_coding_data.py's)")
    if (args.sandbox == "fusion") != bool(args.sandbox_fusion_url):
        parser.error("--sandbox fusion and --sandbox-fusion-url go together")
    if args.sandbox == "fusion" and args.cpu_s is not None:
        parser.error("--cpu-s: a Sandbox Fusion request carries no CPU limit (only --wall-s and --memory-mb)")
    files, labels = column_labels(parser, args)
    options: dict = {"sandbox": args.sandbox, "wall_s": args.wall_s, "stop_after_timeouts": args.stop_after_timeouts}
    if args.sandbox == "fusion":
        options["sandbox_fusion"] = {"url": args.sandbox_fusion_url, "max_concurrent": args.sandbox_fusion_concurrent,
                                     "memory_limit_mb": args.memory_mb}
    else:
        options.update(cpu_s=5 if args.cpu_s is None else args.cpu_s, memory_mb=args.memory_mb)
    try:
        paper = read_paper_columns(args.paper) if args.paper else None
        args.out.mkdir(parents=True, exist_ok=True)
        paths = [generate_benchmarks(args)] if args.model else files
        columns = {label: score_coding_generations(load_generations(path), max_length=args.max_length,
                                                   think=args.think, **options)
                   for label, path in zip(labels, paths, strict=True)}
    except SandboxUnavailable as exc:
        print(f"evaluate_coding: {exc}", file=sys.stderr)
        return 3
    except ValueError as exc:
        print(f"evaluate_coding: {exc}", file=sys.stderr)
        return 2
    table = coding_markdown_table(columns, paper)
    (args.out / "results.json").write_text(json.dumps({"results": columns, "paper": paper}, indent=2) + "\n")
    (args.out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
