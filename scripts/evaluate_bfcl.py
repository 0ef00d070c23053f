"""BFCL-v3, as the paper reports tool calling: accuracy per category and BFCL's summaries, and the format rate,
scored by BFCL's own checker and data (gdpo_verl/experiments/bfcl.py says what each step does).

    # 1. BFCL's environment (bfcl-eval pinned to BFCL v3's last release; its pins clash with verl's)
    bash scripts/setup_bfcl_env.sh
    .venv-bfcl/bin/python scripts/evaluate_bfcl.py prompts --out results/bfcl
    # 2. a GPU node with vLLM (the training environment), and BFCL's environment beside it for the multi-turn
    #    questions' calls: a greedy response to each prompt, each multi-turn question played turn by turn
    python scripts/evaluate_bfcl.py generate --prompts results/bfcl/prompts.jsonl --model HF_DIR --out results/gdpo
    # 3. BFCL's environment again, any machine: one run, or several side by side
    .venv-bfcl/bin/python scripts/evaluate_bfcl.py score --generations results/grpo/bfcl_generations.jsonl \\
        results/gdpo/bfcl_generations.jsonl --labels GRPO,GDPO --out results/compare

``prompts`` takes ``--categories`` (default: every category of BFCL v3) and ``--limit`` (the first N questions of
each, for a quick look; score those with ``score --partial``). ``generate`` writes ``bfcl_generations.jsonl``
(id, category, and the response, or a multi-turn question's turns of responses) as each is made, so that a run
that fails keeps what it made (``--resume`` generates the rest); ``score`` prints a markdown table
and writes ``bfcl_scores.json`` (per run: accuracy per category and summary, BFCL's error types counted, and the
questions that could not be decided, with why). Exit code 2 on bad arguments or input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gdpo_verl.records.jsonl import read_jsonl
from gdpo_verl.experiments import bfcl_multi_turn

ROOT = Path(__file__).resolve().parents[1]


def bfcl():
    """gdpo_verl.experiments.bfcl, which needs BFCL's environment (the generate step does not import it)."""
    from gdpo_verl.experiments import bfcl

    return bfcl


def prompts(args: argparse.Namespace) -> int:
    categories = [name.strip() for name in args.categories.split(",") if name.strip()]
    records = bfcl().prompt_records(categories)
    if args.limit is not None:
        records = [record for category in categories
                   for record in [record for record in records if record["category"] == category][:args.limit]]
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "prompts.jsonl"
    target.write_text("".join(json.dumps(record) + "\n" for record in records))
    print(f"{len(records)} prompts of {len(categories)} categories (bfcl-eval {bfcl().BFCL_RELEASE}'s data): "
          f"{target}")
    return 0


def generate(args: argparse.Namespace) -> int:
    records = []
    for number, record in read_jsonl(args.prompts):
        if not isinstance(record, dict) or not ({"id", "category", "prompt"} <= set(record)
                                                or {"id", "category", "system", "turns"} <= set(record)):
            raise ValueError(f"{args.prompts}:{number}: not a prompt record (id, category, and prompt or system and "
                             "turns); write the file with `evaluate_bfcl.py prompts`")
        records.append(record)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "bfcl_generations.jsonl"
    made = {record["id"]: record for _, record in read_jsonl(target)} if args.resume and target.is_file() else {}
    if made:
        print(f"{len(made)} questions already in {target} are kept (--resume)")
    single = [record for record in records if "prompt" in record and record["id"] not in made]
    multi = [record for record in records if "turns" in record and record["id"] not in made]
    with target.open("w") as out:
        def keep(record: dict) -> None:  # written as it is made: a failure later loses none of it
            made[record["id"]] = record
            out.write(json.dumps(record) + "\n")
            out.flush()

        for record in made.values():
            out.write(json.dumps(record) + "\n")
        try:
            made_now = play(args, single, multi, keep)
        except BaseException:
            print(f"evaluate_bfcl.py generate: {len(made)} of {len(records)} questions are in {target}; "
                  "--resume generates the rest", file=sys.stderr)
            raise
    # in the prompts' order, as a whole file
    target.write_text("".join(json.dumps(made[record["id"]]) + "\n" for record in records))
    print(f"{made_now[0]} responses and {made_now[1]} multi-turn conversations: {target}")
    return 0


def play(args: argparse.Namespace, single: list, multi: list, keep: Callable[[dict], None]) -> tuple[int, int]:
    """The greedy responses to ``single`` and the conversations of ``multi``, each given to ``keep`` as made."""
    from gdpo_verl.verl_adapter.for_experiments.generation import ChatGenerator, load_tokenizer

    if not single and not multi:
        return 0, 0
    executor = bfcl_multi_turn.Executor(str(args.bfcl_python)) if multi else None  # before vLLM's start
    try:
        tokenizer = load_tokenizer(args.model)
        max_model_len = args.max_model_len
        if max_model_len is None and not multi:  # the longest prompt and its answer; multi-turn: the model's own
            max_model_len = max(len(tokenizer(tokenizer.apply_chat_template(
                record["prompt"], add_generation_prompt=True, tokenize=False))["input_ids"]) for record in single)
            max_model_len += args.max_tokens
        generator = ChatGenerator(args.model, tensor_parallel_size=args.tp, max_model_len=max_model_len,
                                  dtype=args.dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                                  tokenizer=tokenizer)
        answers = generator.greedy([record["prompt"] for record in single], args.max_tokens) if single else []
        too_long = [record["id"] for record, answer in zip(single, answers) if answer is None]
        if too_long:
            raise ValueError(f"{len(too_long)} prompts (e.g. {too_long[:3]}) leave no room for an answer in the "
                             f"model's context ({generator.context} tokens): raise --max-model-len")
        for record, answer in zip(single, answers):
            keep({"id": record["id"], "category": record["category"], "response": answer})
        if multi:
            bfcl_multi_turn.run(multi, lambda conversations: generator.greedy(
                [conversation.prompt() for conversation in conversations], args.max_tokens), executor, done=keep)
    finally:
        if executor is not None:
            executor.close()
    return len(single), len(multi)


def score(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    labels = args.labels.split(",") if args.labels else (
        ["ours"] if len(args.generations) == 1 else [path.parent.name or str(path) for path in args.generations])
    if len(labels) != len(args.generations) or len(set(labels)) != len(labels):
        parser.error(f"--labels needs one distinct label per generations file ({len(args.generations)}); got {labels}")
    results = {label: bfcl().score_run([record for _, record in read_jsonl(path)], partial=args.partial)
               for label, path in zip(labels, args.generations)}
    table = bfcl().markdown_table({label: result["accuracy"] for label, result in results.items()})
    for label, result in results.items():
        for category, ids in result["undecided"].items():
            table += (f"\n\n{label}: {len(ids)} of {result['questions'][category]} {category} questions undecided "
                      f"(BFCL's execution or checker went past its budget or failed; not counted right; the "
                      f"reasons per question are under undecided_why in bfcl_scores.json): {', '.join(ids[:10])}")
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bfcl_scores.json").write_text(json.dumps(results, indent=1))
        (args.out / "bfcl_scores.md").write_text(table + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("prompts", help="BFCL's questions as ToolRL chats (in BFCL's environment)")
    step.add_argument("--out", type=Path, required=True)
    step.add_argument("--categories", default=None, help="comma-separated (default: every category of BFCL v3)")
    step.add_argument("--limit", type=int, default=None, help="the first N questions of each category")
    step = steps.add_parser("generate", help="a greedy response to each prompt (vLLM)")
    step.add_argument("--prompts", type=Path, required=True)
    step.add_argument("--model", required=True, help="a Hugging Face model folder or name")
    step.add_argument("--out", type=Path, required=True)
    step.add_argument("--max-tokens", type=int, default=1024, help="the training's response length (default 1024)")
    step.add_argument("--tp", type=int, default=1, help="vLLM tensor parallel size")
    step.add_argument("--max-model-len", type=int, default=None,
                      help="vLLM's context: prompt and response tokens (default: the longest prompt + --max-tokens; "
                           "with multi-turn questions, the model's own)")
    step.add_argument("--dtype", default="auto", help="vLLM's dtype (default: the checkpoint's)")
    step.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                      help="vLLM's share of GPU memory (of the machine's memory on its CPU build; default 0.9)")
    step.add_argument("--resume", action="store_true",
                      help="keep the questions already in --out's bfcl_generations.jsonl and generate the rest")
    step.add_argument("--bfcl-python", type=Path,
                      default=ROOT / os.environ.get("BFCL_VENV", ".venv-bfcl") / "bin" / "python",
                      help="the Python of BFCL's environment, which runs the multi-turn questions' calls "
                           "(default: .venv-bfcl/bin/python, as scripts/setup_bfcl_env.sh makes it)")
    step = steps.add_parser("score", help="BFCL's verdicts on saved generations (in BFCL's environment)")
    step.add_argument("--generations", type=Path, nargs="+", required=True)
    step.add_argument("--labels", default=None, help="a distinct label per generations file, comma-separated")
    step.add_argument("--out", type=Path, default=None)
    step.add_argument("--partial", action="store_true",
                      help="score the questions present (prompts --limit); no summary is given")
    args = parser.parse_args(argv)
    if args.step == "prompts" and args.categories is None:
        args.categories = ",".join(bfcl().CATEGORIES)
    if getattr(args, "limit", None) is not None and args.limit < 1:
        parser.error(f"--limit takes a positive number of questions; got {args.limit}")
    try:
        if args.step == "prompts":
            return prompts(args)
        if args.step == "generate":
            return generate(args)
        return score(args, parser)
    except (ValueError, OSError) as exc:
        print(f"evaluate_bfcl.py {args.step}: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # BFCL's executor failed (bfcl_multi_turn.Executor names how)
        print(f"evaluate_bfcl.py {args.step}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
