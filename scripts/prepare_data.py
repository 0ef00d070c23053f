"""Turn the math datasets of the length-constrained experiments into verl parquet files.

Training: DeepScaleR-Preview. Evaluation: AIME-24, AMC (2022+2023), MATH-500, Minerva, OlympiadBench.
Each row becomes verl's layout: ``data_source``, ``prompt`` (a chat list: one user turn in the
DeepSeek-R1 format, "... output the final answer within \\boxed{}"), ``ability``,
``reward_model: {style: rule, ground_truth}``, ``extra_info: {split, index, question, answer}``.

    # from the public datasets (needs internet and `pip install datasets`)
    python scripts/prepare_data.py --out ~/data/math_length
    # from local files (json, jsonl or parquet), some or all datasets
    python scripts/prepare_data.py --out ~/data/math_length --local aime24=aime.jsonl --local math500=m.parquet

Prints, per dataset, the rows read, the rows written (with how many have a multi-part answer or
alternatives) and the rows each filter removed. Duplicate questions are removed from the training set only;
evaluation sets stay as published. Exit code 2 on bad arguments or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from gdpo_verl.experiments.data_files import read_rows
from gdpo_verl.answers.guard import plain_number

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
    """One answer as a string ($...$ stripped), or None when unusable."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):  # a missing answer read as NaN: no ground truth (counted, not written)
            return None
        text = format(Decimal(repr(value)), "f")  # 5e-05 -> 0.00005, 1e16 -> 10000000000000000
        return text.rstrip("0").rstrip(".") if "." in text else text
    if not isinstance(value, str):
        return None
    text = plain_number(value.strip().strip("$").strip())
    if not text or re.fullmatch(r"[+-]?(?:nan|inf|infinity)", text, re.IGNORECASE):
        return None
    return text


def ground_truth(value: Any, multi_part: bool) -> str | None:
    """The ground truth as verl stores it (a string): one answer, or for a list of several, as JSON, the
    multi-part form ``{"all_of": [...]}`` (OlympiadBench's final answers: every part required, in order) or
    the alternatives ``{"any_of": [...]}`` (any one correct); see gdpo_verl.rewards.math_length. None when an
    answer is unusable."""
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and not isinstance(value, str)):
        items = [answer_text(item) for item in (value.tolist() if hasattr(value, "tolist") else value)]
        if not items or any(item is None for item in items):
            return None
        return items[0] if len(items) == 1 else json.dumps({"all_of" if multi_part else "any_of": items})
    return answer_text(value)


def unreadable(answer: str) -> str | None:
    """Why the math reward could not read ``answer`` (a gold as verl stores it) as values, or None: such a row
    could never be scored (gdpo_verl/answers/parsing.py reads golds and answers alike)."""
    from gdpo_verl.answers import Unreadable, parse
    from gdpo_verl.rewards.math_length import parse_ground_truth

    truth = parse_ground_truth(answer)
    for text in truth.parts or truth.alternatives:
        try:
            parse(text)  # the reward's own reading, its guards included
        except Unreadable as error:
            return str(error)
    return None


def convert(name: str, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Counter]:
    """verl rows, a Counter of skip reasons (one per filter) and a Counter of notable kept rows. A row whose gold
    the math reward cannot read is named on stderr."""
    from gdpo_verl.answers.where import last_boxed

    source = SOURCES[name]
    written, skipped, kept, seen = [], Counter(), Counter(), set()
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            skipped["not a JSON object"] += 1
            continue
        question = next((row[f] for f in QUESTION_FIELDS if isinstance(row.get(f), str) and row[f].strip()), None)
        if question is None:
            skipped[f"no question ({'/'.join(QUESTION_FIELDS)})"] += 1
            continue
        field = next((f for f in ANSWER_FIELDS if row.get(f) is not None), None)
        raw = row.get(field) if field else None
        answer = last_boxed(raw) if field == "solution" and isinstance(raw, str) else ground_truth(raw, multi_part=name == "olympiadbench")
        if answer is None:
            skipped[f"no usable answer ({'/'.join(ANSWER_FIELDS)})"] += 1
            continue
        why = unreadable(answer)
        if why is not None:
            skipped["a gold answer the math reward cannot read"] += 1
            print(f"prepare_data: {name} row {number}: the gold answer {answer[:80]!r} cannot be read as values "
                  f"({why}); left out", file=sys.stderr)
            continue
        if source.role == "train" and question.strip() in seen:  # evaluation sets stay as published
            skipped["duplicate question"] += 1
            continue
        seen.add(question.strip())
        if answer.startswith('{"all_of"'):
            kept["multi-part answer (all parts required, in order)"] += 1
        elif answer.startswith('{"any_of"'):
            kept["answer with alternatives (any one correct)"] += 1
        written.append(
            {
                "data_source": name,
                "prompt": [{"role": "user", "content": f"{question.strip()} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": answer},
                "extra_info": {"split": source.role, "index": len(written), "question": question.strip(), "answer": answer},
            }
        )
    return written, skipped, kept


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
            rows = read_rows(local[name]) if name in local else read_hub(SOURCES[name])
            written, skipped, kept = convert(name, rows)
            if not written:
                raise ValueError(f"{name}: no usable rows among {len(rows)} (skipped: {dict(skipped)}).")
            target = args.out / SOURCES[name].output
            pd.DataFrame(written).to_parquet(target)
            reasons = ", ".join(f"{count} {reason}" for reason, count in skipped.most_common()) or "none"
            notes = "".join(f"; {count} {what}" for what, count in kept.most_common())
            print(f"{name}: {len(rows)} rows read, {len(written)} written to {target}{notes}; "
                  f"{sum(skipped.values())} removed ({reasons})")
    except ValueError as exc:
        print(f"prepare_data: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
