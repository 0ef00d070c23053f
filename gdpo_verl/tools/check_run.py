"""Read what scripts/run_cpu_training.sh wrote and say whether GDPO trained: a summary, and exit 1 with the
reasons when it did not.

    python -m gdpo_verl.tools.check_run OUT --steps 2

What a run must show:
- every step reached verl's logger (``metrics.jsonl``), each with this plugin's ``gdpo/`` metrics, once (a
  resumed run must not log or record a step twice);
- this plugin's estimator wrote one record per step (``gdpo/gdpo_steps.jsonl``), and verl trained on exactly
  those advantages (``critic/advantages/max`` and ``/min`` equal the records'); they are not all zero at every
  step (a step where they are, because every group's rewards are equal, is named in the summary: a policy that
  settled on one answer gives such steps, as under GRPO);
- vLLM generated with the actor's current weights at every step (``training/rollout_probs_diff_max`` small:
  vLLM starts from random "dummy" weights and only verl's weight sync makes the two agree);
- the checkpoint's weights differ from the initial model's, in every tensor.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

from gdpo_verl.core.records import RECORD_FILE

GDPO_METRICS = (
    "gdpo/correct/mean",
    "gdpo/length/mean",
    "gdpo/correct/zero_var_group_frac",
    "gdpo/length/zero_var_group_frac",
    "gdpo/cancelled_group_frac",
    "gdpo/distinct_adv_per_group",
    "gdpo/grpo_distinct_adv_per_group",
)
# The largest difference of a sampled token's probability between vLLM (bf16) and the actor. Measured on this
# run: 0.0009 to 0.0020 at both steps of several runs, when the weights agree; 0.15 between the initial and the
# trained weights (the learning rate moves every weight by about 1e-2 per step), so a rollout server left on
# old weights fails.
MAX_PROBS_DIFF = 0.02


def read_jsonl(path: Path) -> list[dict]:
    """The lines of a file another process may be appending to: a last line without its newline (being
    written, or torn by a kill) is not read."""
    if not path.is_file():
        return []
    lines = path.read_text().split("\n")
    return [json.loads(line) for line in lines[:-1] if line.strip()]


# verl's file logger starts its file afresh each time a run starts; run_cpu_training.sh with RESUME=1 keeps
# what the runs before logged here first.
EARLIER_METRICS = "metrics.earlier.jsonl"


def logged_lines(out: Path) -> list[dict]:
    """verl's file logger, the runs before a resume first: one line per step, ``{"step": n, "data": {...}}``."""
    return read_jsonl(out / EARLIER_METRICS) + read_jsonl(out / "metrics.jsonl")


def step_metrics(out: Path) -> dict[int, dict]:
    return {line["step"]: line["data"] for line in logged_lines(out)}


def step_records(out: Path) -> dict[int, dict]:
    """This plugin's per-step records (``algorithm.gdpo.dump_dir``)."""
    return {record["step"]: record for record in read_jsonl(out / "gdpo" / RECORD_FILE)}


def weight_changes(out: Path, step: int) -> dict[str, float]:
    """Largest absolute change of each weight tensor between the initial model and the step's checkpoint."""
    import torch
    from safetensors.torch import load_file

    initial = load_file(out / "model" / "model.safetensors")
    shard = out / "checkpoints" / f"global_step_{step}" / "actor" / "model_world_size_1_rank_0.pt"
    if not shard.is_file():
        return {}
    trained = torch.load(shard, map_location="cpu", weights_only=False)
    changes = {}
    for name, value in trained.items():
        value = value.to_local() if hasattr(value, "to_local") else value  # DTensor on a world of one
        changes[name] = (value.float() - initial[name].float()).abs().max().item()
    return changes


def check(out: Path, steps: int) -> tuple[list[str], list[str]]:
    """(summary lines, problems); no problems means the run trained with GDPO."""
    metrics, records = step_metrics(out), step_records(out)
    lines, problems, checked, still = [], [], [], []
    for what, entries in (("verl's metrics", logged_lines(out)), ("the records", read_jsonl(out / "gdpo" / RECORD_FILE))):
        counts = Counter(entry["step"] for entry in entries)
        problems += [f"step {step}: {count} lines in {what} (a resumed run wrote it again)"
                     for step, count in sorted(counts.items()) if count > 1]
    for step in range(1, steps + 1):
        data, record = metrics.get(step), records.get(step)
        if data is None:
            problems.append(f"step {step}: not in {out / 'metrics.jsonl'} (the run stopped before it)")
            continue
        missing = [name for name in GDPO_METRICS if name not in data]
        if missing:
            problems.append(f"step {step}: gdpo metrics missing: {missing} (the plugin's estimator did not run)")
            continue
        if record is None:
            problems.append(f"step {step}: no per-step record in {out / 'gdpo'}")
            continue
        advantages = record["advantage"]
        checked.append(step)
        trained_on = (data["critic/advantages/min"], data["critic/advantages/max"])
        if not any(advantages):
            # every group's rewards equal (a policy that gives one answer everywhere): a legitimate step, as in
            # GRPO; a run where this holds at every step trained on nothing, which is a problem (below)
            still.append(step)
        recorded = (min(advantages), max(advantages))
        if not all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5) for a, b in zip(trained_on, recorded)):
            problems.append(
                f"step {step}: verl trained on advantages in [{trained_on[0]:.6f}, {trained_on[1]:.6f}], "
                f"the estimator's record says [{recorded[0]:.6f}, {recorded[1]:.6f}]"
            )
        probs_diff = data["training/rollout_probs_diff_max"]
        if not probs_diff < MAX_PROBS_DIFF:
            problems.append(
                f"step {step}: vLLM's token probabilities differ from the actor's by up to {probs_diff:.4f} "
                f"(limit {MAX_PROBS_DIFF}): the weight sync did not reach the rollout server"
            )
        lines.append(
            f"step {step}: correct {data['gdpo/correct/mean']:.3f}  length {data['gdpo/length/mean']:.3f}  "
            f"distinct advantages per group GDPO {data['gdpo/distinct_adv_per_group']:.2f} / "
            f"GRPO {data['gdpo/grpo_distinct_adv_per_group']:.2f}  advantages [{min(advantages):+.3f}, "
            f"{max(advantages):+.3f}]  rollout/actor probs diff {probs_diff:.4f}  "
            f"{data['timing_s/step']:.1f} s"
        )
    if still:
        if still == checked:
            problems.append(f"steps {still}: every GDPO advantage is 0 at every step, so there was nothing to learn")
        else:
            lines.append(f"steps {still}: every GDPO advantage is 0 (every group's rewards equal): nothing to learn there")
    changes = weight_changes(out, steps)
    if not changes:
        problems.append(f"no checkpoint for step {steps} under {out / 'checkpoints'}")
    else:
        unchanged = sorted(name for name, change in changes.items() if change == 0)
        if unchanged:
            problems.append(f"weights unchanged after {steps} steps: {unchanged}")
        lines.append(
            f"weights: {len(changes) - len(unchanged)} of {len(changes)} tensors changed, "
            f"largest change {max(changes.values()):.4f}"
        )
    return lines, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the run's OUT folder")
    parser.add_argument("--steps", type=int, default=2, help="training steps the run was asked for")
    args = parser.parse_args(argv)
    lines, problems = check(args.out, args.steps)
    print("\n".join(lines))
    if problems:
        print("GDPO CPU training run: FAILED\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"GDPO CPU training run: OK ({args.steps} steps; outputs in {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
