"""The gdpo-verl command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gdpo-verl", description="GDPO for verl: tools around the estimator.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="push a multi-reward rollout batch through verl's advantage stage, GRPO next to GDPO",
        description="Runs verl's compute_advantage with 'grpo' (summed reward) and 'gdpo' (each reward "
        "normalized) on a rollout batch and prints per-reward statistics and how many distinct advantages "
        "each keeps. Without --rollouts it uses a synthetic math batch shipped with the package.",
    )
    demo.add_argument(
        "--rollouts",
        type=Path,
        help="JSONL file, one rollout a line: uid, response_length, and one number per reward component",
    )
    demo.add_argument("--json", action="store_true", help="print the summary as JSON after the report")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from gdpo_verl.demo import run_demo

        if args.rollouts is not None and not args.rollouts.is_file():
            parser.error(f"--rollouts {args.rollouts}: no such file")
        try:
            summary = run_demo(args.rollouts)
        except ValueError as exc:
            print(f"gdpo-verl demo: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
