"""Turn the math datasets of the length-constrained experiments into verl parquet files.

Training: DeepScaleR-Preview. Evaluation: AIME-24, AMC (2022+2023), MATH-500, Minerva, OlympiadBench.
Each row becomes verl's layout: ``data_source``, ``prompt`` (a chat list: one user turn in the
DeepSeek-R1 format, "... output the final answer within \\boxed{}"), ``ability``,
``reward_model: {style: rule, ground_truth}``, ``extra_info: {split, index, question, answer}``.

    # from the public datasets (needs internet and `pip install datasets`)
    python scripts/prepare_data.py --out ~/data/math_length
    # from local files (json, jsonl or parquet), some or all datasets
    python scripts/prepare_data.py --out ~/data/math_length --local aime24=aime.jsonl --local math500=m.parquet

Prints, per dataset, the rows written and the rows skipped with the reason. Exit code 2 on bad arguments
or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


@dataclass(frozen=True)
class Source:
    hub: str  # the public dataset
    config: str | None
    split: str  # the split read from the hub
    role: str  # "train" or "test": where it is used
    output: str  # file name written


SOURCES = {
    "deepscaler": Source("agentica-org/DeepScaleR-Preview-Dataset", None, "train", "train", "deepscaler_train.parquet"),
    "aime24": Source("HuggingFaceH4/aime_2024", None, "train", "test", "aime24.parquet"),
    "amc": Source("AI-MO/aimo-validation-amc", None, "train", "test", "amc.parquet"),
    "math500": Source("HuggingFaceH4/MATH-500", None, "test", "test", "math500.parquet"),
    "minerva": Source("math-ai/minervamath", None, "test", "test", "minerva.parquet"),
    "olympiadbench": Source("Hothan/OlympiadBench", "OE_TO_maths_en_COMP", "train", "test", "olympiadbench.parquet"),
}

QUESTION_FIELDS = ("problem", "question", "Problem", "Question", "prompt")
ANSWER_FIELDS = ("answer", "final_answer", "Answer", "solution")


def read_local(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ValueError(f"{path}: no such file.")
    if path.suffix == ".parquet":
        return pd.read_parquet(path).to_dict("records")
    text = path.read_text()
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg}).") from exc
        return rows
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg}).") from exc
        rows = data.get("data", data.get("rows")) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a list of rows (or {{\"data\": [...]}}).")
        return rows
    raise ValueError(f"{path}: expected a .json, .jsonl or .parquet file.")


def read_hub(source: Source) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError as exc:
        raise ValueError(
            f"reading {source.hub} needs the `datasets` package (pip install datasets) and internet; "
            "or pass the file with --local NAME=PATH."
        ) from exc
    return list(datasets.load_dataset(source.hub, source.config, split=source.split))


def answer_text(value: Any) -> str | None:
    """The ground truth as a string: lists (OlympiadBench) give their first entry; $...$ is stripped."""
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and not isinstance(value, str)):
        items = list(value.tolist() if hasattr(value, "tolist") else value)
        value = items[0] if items else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(int(value)) if float(value).is_integer() else str(value)
    if not isinstance(value, str):
        return None
    text = value.strip().strip("$").strip()
    return text or None


def convert(name: str, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Counter]:
    """verl rows and a Counter of skip reasons."""
    from gdpo_verl.rewards.math_length import last_boxed

    source = SOURCES[name]
    written, skipped, seen = [], Counter(), set()
    for row in rows:
        if not isinstance(row, dict):
            skipped["not a JSON object"] += 1
            continue
        question = next((row[f] for f in QUESTION_FIELDS if isinstance(row.get(f), str) and row[f].strip()), None)
        if question is None:
            skipped[f"no question ({'/'.join(QUESTION_FIELDS)})"] += 1
            continue
        field = next((f for f in ANSWER_FIELDS if row.get(f) is not None), None)
        raw = row.get(field) if field else None
        answer = last_boxed(raw) if field == "solution" and isinstance(raw, str) else answer_text(raw)
        if answer is None:
            skipped[f"no usable answer ({'/'.join(ANSWER_FIELDS)})"] += 1
            continue
        if question.strip() in seen:
            skipped["duplicate question"] += 1
            continue
        seen.add(question.strip())
        written.append(
            {
                "data_source": name,
                "prompt": [{"role": "user", "content": f"{question.strip()} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": answer},
                "extra_info": {"split": source.role, "index": len(written), "question": question.strip(), "answer": answer},
            }
        )
    return written, skipped


def parse_local(values: list[str]) -> dict[str, Path]:
    paths = {}
    for value in values:
        name, separator, path = value.partition("=")
        if not separator or name not in SOURCES:
            raise ValueError(f"--local {value!r}: expected NAME=PATH with NAME one of {sorted(SOURCES)}.")
        paths[name] = Path(path).expanduser()
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the parquet files")
    parser.add_argument("--local", action="append", default=[], metavar="NAME=PATH",
                        help=f"read NAME from a local json/jsonl/parquet file; NAME in {sorted(SOURCES)}")
    parser.add_argument("--only", help="comma-separated dataset names (default: the --local ones if any, else all)")
    args = parser.parse_args(argv)
    try:
        local = parse_local(args.local)
        names = [n.strip() for n in args.only.split(",")] if args.only else (list(local) or list(SOURCES))
        unknown = [n for n in names if n not in SOURCES]
        if unknown:
            raise ValueError(f"--only {unknown}: unknown datasets; known: {sorted(SOURCES)}.")
        args.out.mkdir(parents=True, exist_ok=True)
        for name in names:
            rows = read_local(local[name]) if name in local else read_hub(SOURCES[name])
            written, skipped = convert(name, rows)
            if not written:
                raise ValueError(f"{name}: no usable rows among {len(rows)} (skipped: {dict(skipped)}).")
            target = args.out / SOURCES[name].output
            pd.DataFrame(written).to_parquet(target)
            reasons = ", ".join(f"{count} {reason}" for reason, count in skipped.most_common()) or "none"
            print(f"{name}: {len(written)} rows written to {target}; {sum(skipped.values())} skipped ({reasons})")
    except ValueError as exc:
        print(f"prepare_data: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
