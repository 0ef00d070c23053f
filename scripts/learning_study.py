"""A GRPO-vs-GDPO learning study on the CPU: the same task, data and budget, several seeds, verl's real main_ppo.

Run it through ``bash scripts/learning_study.sh`` (which sets up the environment); docs/learning-study.md
explains the task and shows a result.

    python scripts/learning_study.py run --out DIR --task conditioned --steps N --seeds 1,2,3,4,5 \\
        --estimators grpo,gdpo,grpo_no_std [hydra overrides ...]
    python scripts/learning_study.py report --out DIR      # summary.json, curves.png, results.md again

Every run is one ``main_ppo`` (scripts/cpu_main_ppo.sh: its own Ray, actor and vLLM server, under the
supervisor that stops it when a part dies or a step stalls) writing verl's metrics to
``DIR/runs/<estimator>-seed<seed>/metrics.jsonl``. The report reads those files only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

# What each estimator name means, as verl overrides (GRPO trains on the summed score).
ESTIMATORS = {
    "grpo": ["algorithm.adv_estimator=grpo"],
    "gdpo": ["algorithm.adv_estimator=gdpo"],
    "grpo_no_std": ["algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=False"],
}
STOP_PATIENCE = 120.0  # seconds a run's supervisor gets to stop the run when the study is stopped
STUDY_FILE = "study.json"  # the study's settings, written before the first run
RUN_FILE = "run.json"  # in each run's folder: its wall time, start-up included
OUTPUTS = ("summary.json", "curves.png", "results.md")
# results.md: rewards are averaged over the last quarter of the steps (at least one), GRPO's collapse also over
# the first quarter (while the rewards still vary).
WINDOW = 0.25
# The second task's warm start (docs/learning-study.md): examples drawn, AdamW steps, learning rate.
WARM_EXAMPLES, WARM_STEPS, WARM_LR = 4096, 300, 3e-3
# The pre-registered comparison (docs/learning-study.md): the primary metric is PRIMARY's mean over all the steps of
# a run (the area under its learning curve: how fast the hard reward is learned), GDPO minus GRPO paired by seed,
# with a percentile interval from BOOTSTRAP resamples of the seeds (fixed RNG seed).
PRIMARY = "correct"
BOOTSTRAP, BOOTSTRAP_SEED, LEVEL = 10_000, 0, 0.95
# The design's number of seeds: with fewer, a percentile bootstrap over so few differences declares a difference far
# more often than 5% of the time when there is none, and the report gives no decision.
DECIDE_SEEDS = 5


# --------------------------------------------------------------------------- checking the request


def parse_list(text: str, what: str) -> list[str]:
    items = [item for item in text.replace(",", " ").split() if item]
    if not items:
        raise ValueError(f"{what} is empty; give at least one, e.g. {what}=1,2,3." if what == "SEEDS"
                         else f"{what} is empty; give at least one of {', '.join(ESTIMATORS)}.")
    duplicates = sorted({item for item in items if items.count(item) > 1})
    if duplicates:
        raise ValueError(f"{what} lists {duplicates} more than once.")
    return items


def check_request(out: Path, steps: int, seeds_text: str, estimators_text: str,
                  task: str = "conditioned") -> tuple[list[int], list[str]]:
    """The seeds and estimators, or ValueError naming what is wrong; nothing is written."""
    from gdpo_verl.rewards.learning_study import TASKS

    if task not in TASKS:
        raise ValueError(f"unknown TASK {task!r}; choose from {', '.join(TASKS)}.")
    if steps < 1:
        raise ValueError(f"STEPS must be at least 1; got {steps}.")
    estimators = parse_list(estimators_text, "ESTIMATORS")
    unknown = [name for name in estimators if name not in ESTIMATORS]
    if unknown:
        raise ValueError(f"unknown estimator(s) {unknown} in ESTIMATORS; choose from {', '.join(ESTIMATORS)}.")
    seeds = []
    for seed in parse_list(seeds_text, "SEEDS"):
        if not seed.isdigit():
            raise ValueError(f"SEEDS must be non-negative integers; got {seed!r}.")
        seeds.append(int(seed))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        held = sorted(path.name for path in out.iterdir())[:5] if out.is_dir() else [out.name]
        kind = "an earlier study's files" if (out / STUDY_FILE).exists() else "files"
        raise ValueError(
            f"OUT={out} already holds {kind} ({', '.join(held)}); nothing was started or overwritten. "
            "Give a new OUT, or delete that one first."
        )
    return seeds, estimators


# --------------------------------------------------------------------------- running


def write_data(out: Path) -> Path:
    import pandas as pd

    from gdpo_verl.rewards import learning_study as task

    rows = [
        {
            "data_source": "learning_study",
            "prompt": [{"role": "user", "content": prompt}],
            "ability": "copy",
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"index": index},
        }
        for index, (prompt, answer) in enumerate(task.prompts())
    ]
    path = out / "data" / "train.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def run_overrides(out: Path, data: Path, estimator: str, seed: int, task_name: str = "conditioned") -> list[str]:
    from gdpo_verl.rewards import learning_study

    task = learning_study.TASKS[task_name]
    groups = len(learning_study.prompts()) // 2
    return [
        *ESTIMATORS[estimator],
        # every estimator logs the gdpo/ metrics of its batches (GDPO computed on them, for the logs only)
        f"algorithm.gdpo_reward_keys=[{','.join(task.reward_keys)}]",
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.learning_study",
        f"reward.custom_reward_function.name={task.reward_function}",
        # 6 of the 12 prompts x 8 responses of up to 16 tokens per step, one policy update per step
        f"data.train_files={data}", f"data.val_files={data}", f"data.train_batch_size={groups}",
        "data.max_prompt_length=16", "data.max_response_length=16", f"data.seed={seed}",
        f"actor_rollout_ref.model.path={out / 'models' / f'seed{seed}'}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={groups}", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=48",
        f"actor_rollout_ref.actor.optim.lr={task.lr:g}", "actor_rollout_ref.actor.optim.weight_decay=0.0",
        "actor_rollout_ref.actor.use_kl_loss=False", f"actor_rollout_ref.actor.fsdp_config.seed={seed}",
        "actor_rollout_ref.rollout.n=8", f"actor_rollout_ref.rollout.seed={seed}",
        "actor_rollout_ref.rollout.max_model_len=64", "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
        "actor_rollout_ref.rollout.max_num_seqs=48", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=48",
        "trainer.save_freq=-1", "trainer.project_name=learning_study", f"trainer.experiment_name={estimator}-seed{seed}",
    ]


def run_study(args: argparse.Namespace) -> int:
    from gdpo_verl.rewards import learning_study
    from gdpo_verl.cpu_run import tiny_model

    out = args.out
    seeds, estimators = check_request(out, args.steps, args.seeds, args.estimators, args.task)
    task = learning_study.TASKS[args.task]
    out.mkdir(parents=True, exist_ok=True)
    study = {"task": task.description, "task_name": task.name, "steps": args.steps, "seeds": seeds,
             "estimators": estimators, "overrides": args.overrides}
    (out / STUDY_FILE).write_text(json.dumps(study, indent=1) + "\n")
    data = write_data(out)
    for seed in seeds:
        model = tiny_model.build(out / "models" / f"seed{seed}", seed=seed, words=learning_study.WORDS)
        if task.warm_start:
            tiny_model.warm_start(model, learning_study.warm_start_examples(WARM_EXAMPLES, seed), WARM_STEPS, WARM_LR,
                                  seed)
    started = time.monotonic()
    for estimator in estimators:
        for seed in seeds:
            directory = run_dir(out, estimator, seed)
            directory.mkdir(parents=True)
            env = {**os.environ, "OUT": str(directory), "STEPS": str(args.steps),
                   "LABEL": f"{estimator} seed {seed}"}
            command = ["bash", str(ROOT / "scripts" / "cpu_main_ppo.sh"),
                       *run_overrides(out, data, estimator, seed, task.name), *args.overrides]
            run_started = time.monotonic()
            if run_supervised(command, env) != 0:
                print(f"learning study: the {estimator} run with seed {seed} failed (its log: {directory / 'run.log'}); "
                      "no report written.", file=sys.stderr)
                return 1
            (directory / RUN_FILE).write_text(json.dumps({"wall_seconds": time.monotonic() - run_started}) + "\n")
    print(f"learning study: {len(estimators) * len(seeds)} runs in {time.monotonic() - started:.0f} s")
    return report(out)


def run_supervised(command: list[str], env: dict[str, str]) -> int:
    """Run one supervised main_ppo; when the study is stopped (Ctrl-C, SIGTERM), stop the run first.

    The run gets a session of its own, so a terminal's Ctrl-C reaches the study alone, which sends the run's
    supervisor one SIGTERM: the supervisor ends everything the run started. It gets STOP_PATIENCE seconds; then
    its whole process group is killed. Further Ctrl-Cs meanwhile are ignored, so the clean-up is not cut short.
    """
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        return process.wait()
    except KeyboardInterrupt:
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=STOP_PATIENCE)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise StudyStopped(f"the run under way did not stop within {STOP_PATIENCE:g} s and was killed with its "
                               "process group") from None
        raise StudyStopped(f"the run under way was stopped by its supervisor (exit {code})") from None


class StudyStopped(Exception):
    """The study was stopped (Ctrl-C or SIGTERM) during a run; the message says what became of the run."""


def run_dir(out: Path, estimator: str, seed: int) -> Path:
    return out / "runs" / f"{estimator}-seed{seed}"


# --------------------------------------------------------------------------- the report


def read_run(path: Path, reward_keys: tuple[str, ...]) -> list[dict]:
    """One entry per step of ``summary.json``, read from the run's verl metrics file as written."""
    from gdpo_verl.core import diagnostics as metric

    steps = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        data = entry["data"]
        steps.append({
            "step": entry["step"],
            "rewards": {key: data[metric.reward_metric(key, metric.MEAN)] for key in reward_keys},
            "distinct_adv_per_group": {"gdpo": data[metric.DISTINCT], "grpo": data[metric.GRPO_DISTINCT]},
            "grpo_collapsed_group_frac": data[metric.GRPO_COLLAPSED],
            "seconds": data["timing_s/step"],
        })
    return steps


def summarize(out: Path) -> dict:
    from gdpo_verl.rewards.learning_study import TASKS

    if not (out / STUDY_FILE).is_file():
        raise ValueError(f"{out / STUDY_FILE} is missing: {out} is not the OUT of a learning study.")
    study = json.loads((out / STUDY_FILE).read_text())
    task_name = study.get("task_name", "copy")  # a study written before the second task ran the first
    if task_name not in TASKS:
        raise ValueError(f"{out / STUDY_FILE} names task {task_name!r}, which is not one of {', '.join(TASKS)}.")
    reward_keys = TASKS[task_name].reward_keys
    runs = []
    for estimator in study["estimators"]:
        for seed in study["seeds"]:
            metrics = run_dir(out, estimator, seed) / "metrics.jsonl"
            if not metrics.is_file():
                raise ValueError(f"{metrics} is missing: the {estimator} run with seed {seed} did not log a step.")
            steps = read_run(metrics, reward_keys)
            if [step["step"] for step in steps] != list(range(1, study["steps"] + 1)):
                raise ValueError(f"{metrics} holds steps {[s['step'] for s in steps]}, not 1..{study['steps']}.")
            runs.append({"estimator": estimator, "seed": seed, "steps": steps})
    summary = {"task": study["task"], "task_name": task_name, "reward_keys": list(reward_keys),
               "steps": study["steps"], "seeds": study["seeds"], "runs": runs}
    comparison = compare(summary)
    if comparison is not None:
        summary["comparison"] = comparison
    return summary


def final_mean(run: dict, key: str | None, width: int) -> float:
    """The mean over the run's last ``width`` steps of reward ``key`` (None: the sum of the rewards)."""
    return statistics.fmean(sum(step["rewards"].values()) if key is None else step["rewards"][key]
                            for step in run["steps"][-width:])


def compare(summary: dict) -> dict | None:
    """The pre-registered comparison: GDPO minus GRPO on PRIMARY's mean over all steps, paired by seed, with a
    percentile bootstrap interval over the seeds and the decision it gives, and under ``"secondary"`` the same
    difference and interval for every other reward (reported, not decided on); None without both estimators on
    at least two seeds, or when PRIMARY is not a reward of the task."""
    if PRIMARY not in summary["reward_keys"]:
        return None
    primary = paired_difference(summary, PRIMARY)
    if primary is None:
        return None
    low, high = primary["interval"]
    if len(primary["seeds"]) < DECIDE_SEEDS:
        decision = f"too few seeds to decide (the design asks for {DECIDE_SEEDS})"
    elif low > 0:
        decision = "GDPO better"
    elif high < 0:
        decision = "GRPO better"
    else:
        decision = "no difference shown"
    secondary = {key: paired_difference(summary, key) for key in summary["reward_keys"] if key != PRIMARY}
    return {**primary, "decision": decision, "secondary": secondary}


def paired_difference(summary: dict, key: str) -> dict | None:
    """GDPO minus GRPO on reward ``key``'s mean over all steps, by seed, with its percentile bootstrap interval."""
    import random

    width = summary["steps"]
    finals = {(run["estimator"], run["seed"]): final_mean(run, key, width) for run in summary["runs"]}
    seeds = [seed for seed in summary["seeds"] if ("gdpo", seed) in finals and ("grpo", seed) in finals]
    if len(seeds) < 2:
        return None
    differences = [finals["gdpo", seed] - finals["grpo", seed] for seed in seeds]
    draw = random.Random(BOOTSTRAP_SEED)
    means = sorted(statistics.fmean(draw.choices(differences, k=len(differences))) for _ in range(BOOTSTRAP))
    low, high = _quantile(means, (1 - LEVEL) / 2), _quantile(means, (1 + LEVEL) / 2)
    return {"metric": f"mean of {key} over all {width} step(s)", "seeds": seeds, "differences": differences,
            "mean": statistics.fmean(differences), "level": LEVEL, "interval": [low, high], "resamples": BOOTSTRAP}


def window(steps: int) -> int:
    return max(1, math.ceil(steps * WINDOW))


def results_table(summary: dict, wall_seconds: dict[tuple[str, int], float]) -> str:
    from gdpo_verl.tools.plots import LABELS

    reward_keys = summary["reward_keys"]
    width = window(summary["steps"])
    estimators = list(dict.fromkeys(run["estimator"] for run in summary["runs"]))
    lines = [
        f"# Learning study: {len(summary['runs'])} runs, {summary['steps']} steps, seeds {summary['seeds']}",
        "",
        f"Task: {summary['task']}.",
        "",
        f"Each reward's mean over the last {width} step(s) of a run: median over seeds, [min, max] in brackets.",
        "",
        "| estimator | " + " | ".join(reward_keys) + " | sum | GRPO-collapsed groups, first "
        f"{width} step(s) / all | wall time per run (of it, steps) |",
        "|---|" + "---|" * (len(reward_keys) + 3),
    ]
    for estimator in estimators:
        runs = [run for run in summary["runs"] if run["estimator"] == estimator]
        cells = []
        for key in (*reward_keys, None):
            finals = [final_mean(run, key, width) for run in runs]
            cells.append(f"{statistics.median(finals):.3f} [{min(finals):.3f}, {max(finals):.3f}]")
        early = statistics.fmean(step["grpo_collapsed_group_frac"] for run in runs for step in run["steps"][:width])
        collapsed = statistics.fmean(step["grpo_collapsed_group_frac"] for run in runs for step in run["steps"])
        wall = statistics.fmean(wall_seconds[estimator, run["seed"]] for run in runs)
        steps = statistics.fmean(sum(step["seconds"] for step in run["steps"]) for run in runs)
        lines.append(f"| {LABELS[estimator]} | " + " | ".join(cells)
                     + f" | {early:.0%} / {collapsed:.0%} | {wall:.0f} s ({steps:.0f} s) |")
    lines += [
        "",
        "GRPO-collapsed groups: the share of groups where two responses with different reward combinations got the "
        "same GRPO advantage (`gdpo/grpo_collapsed_group_frac`: GRPO on the summed reward, computed on the batch each "
        "run trained on), averaged over the estimator's runs. Wall time: the whole `main_ppo` run, start-up "
        f"included; in brackets its steps alone (verl's `timing_s/step`). All {len(summary['runs'])} runs: "
        f"{sum(wall_seconds.values()) / 60:.1f} minutes.",
        "",
    ]
    comparison = summary.get("comparison")
    if comparison is not None:
        seeds = ", ".join(f"seed {seed}: {difference:+.3f}" for seed, difference in
                          zip(comparison["seeds"], comparison["differences"]))
        low, high = comparison["interval"]
        lines += [
            f"**GDPO - GRPO**, {comparison['metric']}, paired by seed ({seeds}): mean {comparison['mean']:+.3f}, "
            f"{comparison['level']:.0%} paired bootstrap interval [{low:+.3f}, {high:+.3f}] ({comparison['resamples']} "
            f"resamples of the {len(comparison['seeds'])} seeds). Decision (the rule in docs/learning-study.md, "
            f"with at least {DECIDE_SEEDS} seeds: GDPO better if the interval lies above 0, GRPO better if below, "
            f"else no difference shown): **{comparison['decision']}**.",
            "",
        ]
        for other in comparison["secondary"].values():
            low, high = other["interval"]
            lines.append(f"Reported, not decided on: GDPO - GRPO, {other['metric']}: mean {other['mean']:+.3f}, "
                         f"{other['level']:.0%} interval [{low:+.3f}, {high:+.3f}].")
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gdpo_verl.tools.plots import LABELS

    reward_keys = summary["reward_keys"]
    estimators = list(dict.fromkeys(run["estimator"] for run in summary["runs"]))
    steps = list(range(1, summary["steps"] + 1))
    figure, axes = plt.subplots(1, len(reward_keys), figsize=(4.6 * len(reward_keys), 3.6), squeeze=False)
    for panel, key in zip(axes[0], reward_keys):
        for estimator in estimators:
            curves = [[step["rewards"][key] for step in run["steps"]] for run in summary["runs"]
                      if run["estimator"] == estimator]
            per_step = list(zip(*curves))
            median = [statistics.median(values) for values in per_step]
            low = [_quantile(values, 0.25) for values in per_step]
            high = [_quantile(values, 0.75) for values in per_step]
            line = panel.plot(steps, median, label=f"{LABELS[estimator]} (median of {len(curves)} seed(s))")[0]
            panel.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
        panel.set_title(f"{key} (mean over the batch)", fontsize=10)
        panel.set_xlabel("step")
        panel.set_ylim(-0.02, 1.02)
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _quantile(values, q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def wall_times(out: Path, summary: dict) -> dict[tuple[str, int], float]:
    times = {}
    for run in summary["runs"]:
        path = run_dir(out, run["estimator"], run["seed"]) / RUN_FILE
        if not path.is_file():
            raise ValueError(f"{path} is missing: the {run['estimator']} run with seed {run['seed']} did not finish.")
        times[run["estimator"], run["seed"]] = json.loads(path.read_text())["wall_seconds"]
    return times


def report(out: Path) -> int:
    summary = summarize(out)
    walls = wall_times(out, summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    plot(summary, out / "curves.png")
    (out / "results.md").write_text(results_table(summary, walls))
    print(f"learning study: {', '.join(str(out / name) for name in OUTPUTS)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="check the request, run every estimator x seed, then report")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--task", default="conditioned", help="conditioned (the default) or copy (the first study's)")
    run.add_argument("--steps", type=int, default=None, help="default: the task's (conditioned 20, copy 40)")
    run.add_argument("--seeds", required=True, help="e.g. 1,2,3")
    run.add_argument("--estimators", required=True, help=f"from {', '.join(ESTIMATORS)}")
    run.add_argument("--check-only", action="store_true", help="check the request and stop")
    run.add_argument("overrides", nargs="*", help="hydra overrides for every run")
    again = commands.add_parser("report", help="write summary.json, curves.png and results.md from the runs")
    again.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "run" and args.steps is None:
        from gdpo_verl.rewards.learning_study import TASKS

        args.steps = TASKS[args.task].steps if args.task in TASKS else 1  # an unknown task is refused below
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops the study as Ctrl-C does
    try:
        if args.command == "report":
            return report(args.out)
        if args.check_only:
            check_request(args.out, args.steps, args.seeds, args.estimators, args.task)
            return 0
        return run_study(args)
    except ValueError as exc:
        print(f"learning study: {exc}", file=sys.stderr)
        return 2
    except StudyStopped as stopped:
        print(f"learning study: stopped (Ctrl-C or SIGTERM); {stopped}; no report written.", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("learning study: stopped (Ctrl-C or SIGTERM) between runs; no report written.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
