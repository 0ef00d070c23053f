"""BFCL-v3, as the paper reports tool calling: accuracy per category and BFCL's summaries, and the format rate,
scored by BFCL's own checker and data (gdpo_verl/experiments/bfcl.py says what each step does).

    # 1. BFCL's environment (bfcl-eval pinned to BFCL v3's last release; its pins clash with verl's)
    bash scripts/setup_bfcl_env.sh
    .venv-bfcl/bin/python scripts/evaluate_bfcl.py prompts --out results/bfcl
    # 2. a GPU node with vLLM (the training environment): a greedy response to each prompt
    python scripts/evaluate_bfcl.py generate --prompts results/bfcl/prompts.jsonl --model HF_DIR --out results/gdpo
    # 3. BFCL's environment again, any machine: one run, or several side by side
    .venv-bfcl/bin/python scripts/evaluate_bfcl.py score --generations results/grpo/bfcl_generations.jsonl \\
        results/gdpo/bfcl_generations.jsonl --labels GRPO,GDPO --out results/compare

``prompts`` takes ``--categories`` (default: every single-turn category of BFCL v3). ``generate`` writes
``bfcl_generations.jsonl`` (id, category, response); ``score`` prints a markdown table and writes
``bfcl_scores.json`` (per run: accuracy per category and summary, and BFCL's error types counted). Exit code 2 on
bad arguments or input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gdpo_verl.core.jsonl import read_jsonl
from gdpo_verl.experiments import bfcl


def prompts(args: argparse.Namespace) -> int:
    categories = [name.strip() for name in args.categories.split(",") if name.strip()]
    records = bfcl.prompt_records(categories)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "prompts.jsonl"
    target.write_text("".join(json.dumps(record) + "\n" for record in records))
    print(f"{len(records)} prompts of {len(categories)} categories (bfcl-eval {bfcl.BFCL_RELEASE}'s data): {target}")
    return 0


def generate(args: argparse.Namespace) -> int:
    from gdpo_verl.verl_adapter.generation import generate as vllm_generate

    records = []
    for number, record in read_jsonl(args.prompts):
        if not isinstance(record, dict) or not {"id", "category", "prompt"} <= set(record):
            raise ValueError(f"{args.prompts}:{number}: not a prompt record (id, category, prompt); write the file "
                             "with `evaluate_bfcl.py prompts`")
        records.append(record)
    responses = vllm_generate(args.model, [record["prompt"] for record in records], samples=1, temperature=0.0,
                              top_p=1.0, max_tokens=args.max_tokens, tensor_parallel_size=args.tp,
                              max_model_len=args.max_model_len, dtype=args.dtype,
                              gpu_memory_utilization=args.gpu_memory_utilization)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "bfcl_generations.jsonl"
    target.write_text("".join(
        json.dumps({"id": record["id"], "category": record["category"], "response": sampled[0]["text"]}) + "\n"
        for record, sampled in zip(records, responses, strict=True)))
    print(f"{len(records)} responses: {target}")
    return 0


def score(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    labels = args.labels.split(",") if args.labels else (
        ["ours"] if len(args.generations) == 1 else [path.parent.name or str(path) for path in args.generations])
    if len(labels) != len(args.generations) or len(set(labels)) != len(labels):
        parser.error(f"--labels needs one distinct label per generations file ({len(args.generations)}); got {labels}")
    results = {label: bfcl.score_run([record for _, record in read_jsonl(path)])
               for label, path in zip(labels, args.generations)}
    table = bfcl.markdown_table({label: result["accuracy"] for label, result in results.items()})
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
    step.add_argument("--categories", default=",".join(bfcl.CATEGORIES),
                      help="comma-separated (default: every single-turn category)")
    step = steps.add_parser("generate", help="a greedy response to each prompt (vLLM)")
    step.add_argument("--prompts", type=Path, required=True)
    step.add_argument("--model", required=True, help="a Hugging Face model folder or name")
    step.add_argument("--out", type=Path, required=True)
    step.add_argument("--max-tokens", type=int, default=1024, help="the training's response length (default 1024)")
    step.add_argument("--tp", type=int, default=1, help="vLLM tensor parallel size")
    step.add_argument("--max-model-len", type=int, default=None,
                      help="vLLM's context: prompt and response tokens (default: the longest prompt + --max-tokens)")
    step.add_argument("--dtype", default="auto", help="vLLM's dtype (default: the checkpoint's)")
    step.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                      help="vLLM's share of GPU memory (of the machine's memory on its CPU build; default 0.9)")
    step = steps.add_parser("score", help="BFCL's verdicts on saved generations (in BFCL's environment)")
    step.add_argument("--generations", type=Path, nargs="+", required=True)
    step.add_argument("--labels", default=None, help="a distinct label per generations file, comma-separated")
    step.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.step == "prompts":
            return prompts(args)
        if args.step == "generate":
            return generate(args)
        return score(args, parser)
    except (ValueError, OSError) as exc:
        print(f"evaluate_bfcl.py {args.step}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
