"""Evaluation of the paper's experiments: generate with vLLM, score with the training rewards, tabulate like its
tables (math: Table 3; tool calling: the held-out split; coding: Table 5, below).

Math scoring uses the training reward's own correctness check (``gdpo_verl.rewards.math_length``): the values
the ``\\boxed{}`` answers after the reasoning state, compared with the gold's (``gdpo_verl.answers.parsing``).
Per benchmark it reports pass@1 averaged over the samples of each question (then over questions) and Exceed,
the percentage of responses longer than the length budget (4000 tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gdpo_verl.records.jsonl import read_jsonl
from gdpo_verl.rewards.math_length import MathLengthReward

# Table 3 layout: benchmark key -> row label, in the paper's order.
BENCHMARKS = {"math500": "MATH", "aime24": "AIME", "amc": "AMC", "minerva": "Minerva", "olympiadbench": "Olympiad"}

# The paper's numbers, (accuracy %, exceed %): Table 3 (plain length reward) and Table 4 (conditioned, R1-7B).
PAPER: dict[str, dict[str, tuple[float, float]]] = {
    "r1_1.5b_grpo": {"math500": (83.6, 1.5), "aime24": (23.1, 10.8), "amc": (64.5, 3.2), "minerva": (43.5, 1.7), "olympiadbench": (44.3, 2.6)},
    "r1_1.5b_gdpo": {"math500": (86.2, 0.8), "aime24": (29.4, 6.5), "amc": (69.0, 2.3), "minerva": (44.0, 0.3), "olympiadbench": (46.6, 1.9)},
    "r1_7b_grpo": {"math500": (94.1, 0.5), "aime24": (50.2, 2.1), "amc": (83.8, 0.6), "minerva": (53.2, 0.2), "olympiadbench": (60.2, 1.1)},
    "r1_7b_gdpo": {"math500": (93.9, 0.1), "aime24": (53.1, 0.2), "amc": (84.0, 0.3), "minerva": (53.8, 0.1), "olympiadbench": (59.7, 0.4)},
    "qwen3_4b_grpo": {"math500": (93.9, 0.8), "aime24": (54.6, 2.5), "amc": (85.2, 0.7), "minerva": (52.4, 0.3), "olympiadbench": (66.8, 1.6)},
    "qwen3_4b_gdpo": {"math500": (93.9, 0.1), "aime24": (56.9, 0.1), "amc": (84.3, 0.1), "minerva": (51.9, 0.1), "olympiadbench": (67.5, 1.0)},
    "r1_7b_grpo_conditioned": {"math500": (93.2, 2.7), "aime24": (53.3, 29.2), "amc": (82.9, 8.6)},
    "r1_7b_gdpo_conditioned": {"math500": (93.9, 1.4), "aime24": (57.7, 12.3), "amc": (85.9, 3.8)},
}


def add_generation_options(parser: Any, *, samples: int, temperature: float, top_p: float, max_tokens: int) -> None:
    """The vLLM sampling options of the evaluation scripts, with each experiment's defaults."""
    parser.add_argument("--samples", type=int, default=samples, help=f"responses per prompt (default {samples})")
    parser.add_argument("--temperature", type=float, default=temperature)
    parser.add_argument("--top-p", type=float, default=top_p)
    parser.add_argument("--max-tokens", type=int, default=max_tokens)
    parser.add_argument("--tp", type=int, default=1, help="vLLM tensor parallel size")


def column_labels(parser: Any, args: Any) -> tuple[list[Path | None], list[str]]:
    """The generations files of ``--generations`` (``[None]`` when generating) and a distinct column title for each
    (``--labels``, else "ours" for one file, else each file's folder name); a parser error otherwise."""
    files = args.generations or [None]
    labels = [label.strip() for label in args.labels.split(",")] if args.labels else (
        ["ours"] if len(files) == 1 else [str(path.parent.name or path) for path in files])
    if len(labels) != len(files) or len(set(labels)) != len(labels):
        parser.error(f"--labels needs one distinct label per generations file ({len(files)}); got {labels}")
    return files, labels


def generate_to_file(args: Any, benchmarks: Mapping[str, Sequence[Mapping[str, Any]]], out: Path) -> Path:
    """Generate with vLLM (``args.model`` and the options of ``add_generation_options``) for the verl rows of
    each benchmark; write ``out/generations.jsonl`` in the layout ``load_generations`` reads; return its path."""
    from gdpo_verl.verl_adapter.for_experiments.generation import generate

    records = []
    for benchmark, rows in benchmarks.items():
        prompts = [[dict(turn) for turn in row["prompt"]] for row in rows]
        responses = generate(args.model, prompts, samples=args.samples, temperature=args.temperature,
                             top_p=args.top_p, max_tokens=args.max_tokens, tensor_parallel_size=args.tp)
        for index, (row, sampled) in enumerate(zip(rows, responses, strict=True)):
            record = {"benchmark": benchmark, "index": index,
                      "ground_truth": row["reward_model"]["ground_truth"], "responses": sampled}
            types = (row.get("extra_info") or {}).get("parameter_types")
            if types is not None:  # the tool-calling reward compares values by the tools' declared types
                record["parameter_types"] = types
            records.append(record)
    target = out / "generations.jsonl"
    target.write_text("".join(json.dumps(record) + "\n" for record in records))
    return target


def load_generations(path: Path) -> list[dict[str, Any]]:
    """JSONL, one question a line: ``benchmark``, ``ground_truth``, ``responses``: [{``text``, ``tokens``}] (and, for
    tool calling, the row's ``parameter_types``)."""
    records = []
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(record, dict):
            raise ValueError(f"{where}: expected a JSON object (one question), got {record!r:.80}.")
        missing = [key for key in ("benchmark", "ground_truth", "responses") if key not in record]
        if missing:
            raise ValueError(f"{where}: missing {missing}; each line needs benchmark, ground_truth and responses.")
        if not isinstance(record["responses"], list) or not record["responses"]:
            raise ValueError(f"{where}: responses must be a non-empty list of {{text, tokens}}.")
        for response in record["responses"]:
            tokens = response.get("tokens") if isinstance(response, dict) else None
            if not isinstance(response, dict) or not isinstance(response.get("text"), str) or not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
                raise ValueError(f"{where}: every response needs a string text and a non-negative integer tokens.")
        records.append(record)
    if not records:
        raise ValueError(f"{path}: no generations in it.")
    return records


def score_generations(
    records: Iterable[Mapping[str, Any]], *, max_length: int = 4000, think: str = "required", timeout_s: float = 10.0
) -> dict[str, dict[str, float]]:
    """benchmark -> {questions, responses, accuracy (pass@1 %), exceed (%), verify_failed (count)}."""
    per_benchmark: dict[str, list[tuple[float, int, int, float]]] = {}
    with MathLengthReward() as reward:
        reward.start()  # timeout_s covers each check, not the checker processes' start
        for record in records:
            results = [
                reward(
                    record["benchmark"], response["text"], record["ground_truth"],
                    {"response_length": response["tokens"]}, max_length=max_length, think=think, timeout_s=timeout_s,
                )
                for response in record["responses"]
            ]
            pass_at_1 = sum(result["correct"] for result in results) / len(results)
            exceeded = sum(result["short"] == 0.0 for result in results)
            failed = sum(result["verify_failed"] for result in results)
            per_benchmark.setdefault(record["benchmark"], []).append((pass_at_1, exceeded, len(results), failed))
    summary = {}
    for benchmark, questions in per_benchmark.items():
        responses = sum(count for _, _, count, _ in questions)
        summary[benchmark] = {
            "questions": len(questions),
            "responses": responses,
            "accuracy": 100.0 * sum(p for p, _, _, _ in questions) / len(questions),
            "exceed": 100.0 * sum(e for _, e, _, _ in questions) / responses,
            "verify_failed": sum(f for _, _, _, f in questions),
        }
    return summary


def markdown_table(summary: Mapping[str, Mapping[str, float]], paper: str | None = None, label: str = "ours") -> str:
    """Table 3 layout: one row per benchmark, accuracy / exceed %; the paper's column beside when asked."""
    if paper is not None and paper not in PAPER:
        raise ValueError(f"unknown paper column {paper!r}; known: {sorted(PAPER)}.")
    header = f"| | {label} |" + (f" paper {paper} |" if paper else "")
    rule = "|---|---|" + ("---|" if paper else "")
    lines = [header, rule]
    ordered = [b for b in BENCHMARKS if b in summary] + sorted(b for b in summary if b not in BENCHMARKS)
    for benchmark in ordered:
        row = summary[benchmark]
        cell = f"{row['accuracy']:.1f} / {row['exceed']:.1f}"
        line = f"| {BENCHMARKS.get(benchmark, benchmark)} | {cell} |"
        if paper:
            theirs = PAPER[paper].get(benchmark)
            line += f" {theirs[0]:.1f} / {theirs[1]:.1f} |" if theirs else " - |"
        lines.append(line)
    return "\n".join(lines) + "\n\naccuracy (pass@1, %) / exceed (% of responses over the length budget)\n"


# --------------------------------------------------------------------------- tool calling

# The held-out split's numbers, in this order: key -> (row label, format).
TOOL_METRICS = {
    "format": ("correct format (%)", "{:.1f}"),
    "correct": ("average correctness (-3..3)", "{:.3f}"),
    "exact": ("exact-call accuracy (%)", "{:.1f}"),
    "parsed": ("tool calls that parse (% of expected)", "{:.1f}"),
}


def score_tool_generations(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The tool-calling rewards over every response: format rate, mean correctness, exact-call accuracy (the
    expected calls exactly, or no call where none is expected) and the parse rate of expected calls."""
    from gdpo_verl.rewards.tool_calling import compute_score as tool_score

    results = [
        tool_score(record["benchmark"], response["text"], record["ground_truth"],
                   {"parameter_types": record["parameter_types"]} if "parameter_types" in record else {})
        for record in records
        for response in record["responses"]
    ]
    expected = [result for result in results if result["tool_call_expected"]]
    return {
        "questions": len(records),
        "responses": len(results),
        "format": 100.0 * sum(result["format"] for result in results) / len(results),
        "correct": sum(result["correct"] for result in results) / len(results),
        "exact": 100.0 * sum(result["exact_match"] for result in results) / len(results),
        "parsed": 100.0 * sum(result["tool_call_parsed"] for result in expected) / len(expected) if expected else float("nan"),
    }


def tool_markdown_table(columns: Mapping[str, Mapping[str, float]]) -> str:
    """One row per metric, one column per run (label -> ``score_tool_generations`` result)."""
    labels = list(columns)
    lines = ["| | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for key, (title, style) in TOOL_METRICS.items():
        lines.append(f"| {title} | " + " | ".join(style.format(columns[label][key]) for label in labels) + " |")
    responses = ", ".join(f"{label}: {int(columns[label]['responses'])}" for label in labels)
    return "\n".join(lines) + f"\n\nresponses scored ({responses}); the training rewards of gdpo_verl.rewards.tool_calling\n"


# --------------------------------------------------------------------------- coding

# Table 5 layout: data_source -> row label, in the paper's order.
CODING_BENCHMARKS = {"apps": "Apps", "codecontests": "CodeContests", "codeforces": "Codeforces", "taco": "Taco"}
# The numbers of one cell, in this order.
CODING_METRICS = ("pass", "exceed", "bug")


def score_coding_generations(records: Iterable[Mapping[str, Any]], *, max_length: int = 4000, think: str = "required",
                             **reward_options: Any) -> dict[str, dict[str, float]]:
    """benchmark -> {questions, responses, judged, pass, test_pass_rate, exceed, bug, no_code, verify_failed}.

    Scoring runs each response's program on every test case with the training reward
    (``gdpo_verl.rewards.coding.CodingReward``; ``reward_options``: its ``sandbox``, ``sandbox_fusion``, ``python``
    and limits). Per benchmark, over the responses the checker judged (``verify_failed`` ones are counted apart, never
    scored): ``pass``, the % whose program passed every test case (pass@1 over the samples); ``test_pass_rate``, the
    mean % of test cases passed; ``bug``, the % that were not clean (the bug reward's 0: a program that does not parse,
    raises, crashes or runs past a limit on some test case, or no program at all; ``no_code`` gives the share of the
    last); and over every response, ``exceed``, the % longer than ``max_length`` tokens.
    """
    from gdpo_verl.rewards.coding import CodingReward

    results: dict[str, list[tuple[dict[str, float], int]]] = {}
    questions: dict[str, int] = {}
    with CodingReward() as reward:
        for record in records:
            benchmark = record["benchmark"]
            questions[benchmark] = questions.get(benchmark, 0) + 1
            for response in record["responses"]:
                result = reward(benchmark, response["text"], record["ground_truth"],
                                {"response_length": response["tokens"]}, max_length=max_length, think=think,
                                **reward_options)
                results.setdefault(benchmark, []).append((result, response["tokens"]))
    summary = {}
    for benchmark, scored in results.items():
        judged = [result for result, _ in scored if not result["verify_failed"]]
        share = (lambda count: 100.0 * count / len(judged)) if judged else (lambda count: float("nan"))
        summary[benchmark] = {
            "questions": questions[benchmark],
            "responses": len(scored),
            "judged": len(judged),
            "pass": share(sum(result["pass_rate"] == 1.0 for result in judged)),
            "test_pass_rate": share(sum(result["pass_rate"] for result in judged)),
            "exceed": 100.0 * sum(tokens > max_length for _, tokens in scored) / len(scored),
            "bug": share(sum(result["no_bug"] == 0.0 for result in judged)),
            "no_code": share(sum(result["code_found"] == 0.0 for result in judged)),
            "verify_failed": len(scored) - len(judged),
        }
    return summary


def read_paper_columns(path: Path) -> dict[str, dict[str, list[float]]]:
    """A JSON file of published numbers to show beside ours: {column: {benchmark: [pass, exceed, bug]}}."""
    try:
        columns = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"--paper {path}: {error}") from None
    example = '{"GDPO 3-obj (paper)": {"apps": [pass, exceed, bug], "taco": [...]}}'
    if not isinstance(columns, dict) or not columns:
        raise ValueError(f"--paper {path}: expected a JSON object of columns, like {example}.")
    for column, rows in columns.items():
        if not isinstance(rows, dict) or not all(
            isinstance(row, list) and len(row) == 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                            for x in row) for row in rows.values()):
            raise ValueError(f"--paper {path}: column {column!r} must map benchmarks to [pass, exceed, bug] "
                             f"numbers, like {example}.")
    return columns


def coding_markdown_table(columns: Mapping[str, Mapping[str, Mapping[str, float]]],
                          paper: Mapping[str, Mapping[str, Sequence[float]]] | None = None) -> str:
    """Table 5 layout: one row per benchmark, one column per run (label -> ``score_coding_generations`` result),
    each cell pass / exceed / bug (%); published columns (``read_paper_columns``) after ours."""
    paper = paper or {}
    labels, published = list(columns), list(paper)
    benchmarks = {benchmark for summary in columns.values() for benchmark in summary}
    ordered = [b for b in CODING_BENCHMARKS if b in benchmarks] + sorted(benchmarks - set(CODING_BENCHMARKS))
    lines = ["| | " + " | ".join(labels + published) + " |", "|---|" + "---|" * (len(labels) + len(published))]
    for benchmark in ordered:
        cells = []
        for label in labels:
            row = columns[label].get(benchmark)
            cells.append(" / ".join(f"{row[key]:.1f}" for key in CODING_METRICS) if row else "-")
        for column in published:
            row = paper[column].get(benchmark)
            cells.append(" / ".join(f"{value:.1f}" for value in row) if row else "-")
        lines.append(f"| {CODING_BENCHMARKS.get(benchmark, benchmark)} | " + " | ".join(cells) + " |")
    notes = ["", "pass (% of responses whose program passed every test case) / exceed (% of responses over the length "
             "budget) / bug (% whose program failed to parse, raised, crashed or ran past a limit, or that held no "
             "program)"]
    failed = {label: sum(int(row["verify_failed"]) for row in summary.values()) for label, summary in columns.items()}
    if any(failed.values()):
        listed = ", ".join(f"{label}: {count}" for label, count in failed.items() if count)
        notes.append(f"not judged (the checker failed; left out of pass and bug, see results.json): {listed}")
    return "\n".join(lines + notes) + "\n"
