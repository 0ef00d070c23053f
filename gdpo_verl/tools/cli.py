"""The gdpo-verl command line: demo, collapse, inspect, plot, doctor, check-reward.

Bad arguments or inputs print one line saying what is wrong and exit with code 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

from gdpo_verl.core.diagnostics import (
    CANCELLED,
    DISTINCT,
    GRPO_DISTINCT,
    MEAN,
    SIGN_CONFLICT,
    ZERO_VAR,
    reward_metric,
    reward_names,
)


def int_set(text: str, maximum: int = 1024) -> list[int]:
    """An integer ``4``, a range ``2-11`` or a list ``2,3,5`` (items may be ranges) -> sorted integers in
    1 .. ``maximum``."""
    values: set[int] = set()
    try:
        for item in text.split(","):
            low, dash, high = item.strip().partition("-")
            start, stop = (int(low), int(high)) if dash else (int(low), int(low))
            if start > stop:
                raise argparse.ArgumentTypeError(f"range {item!r} runs backwards")
            if stop > maximum:
                raise argparse.ArgumentTypeError(f"values must be at most {maximum}; got {text!r}")
            values.update(range(start, stop + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer, a range a-b or a list a,b,c; got {text!r}"
        ) from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"values must be at least 1; got {text!r}")
    return sorted(values)


def png_path(text: str) -> Path:
    path = Path(text)
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"expected a .png file name; got {text!r}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {str(path.parent)!r} does not exist")
    if os.path.lexists(path) and not path.is_file():  # writing to a FIFO waits for a reader without end
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a regular file; name another file")
    return path


def table_or_plot(command: argparse.ArgumentParser, plot_help: str) -> None:
    """The output options of a command that prints a table: --json instead, --plot FILE.png as well."""
    command.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    command.add_argument("--plot", type=png_path, metavar="FILE.png", help=plot_help)


def names(text: str) -> list[str]:
    values = [name.strip() for name in text.split(",") if name.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated names; got {text!r}")
    return values


def weights_json(text: str) -> dict:
    """``--weights``: a JSON object, reward -> weight or a schedule of [step, weight] points."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}); e.g. '{{\"correct\": 1, \"length\": [[0, 0], [50, 1]]}}'")
    if not isinstance(value, dict) or not value:
        raise argparse.ArgumentTypeError("a JSON object of reward -> weight (or [[step, weight], ...]) is needed")
    from gdpo_verl.core.variants import read_weight

    try:
        return {name: read_weight(weight, f"weight of reward {name!r}") for name, weight in value.items()}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def estimator_options(command: argparse.ArgumentParser, records: bool) -> None:
    """The GDPO options of training (algorithm.gdpo.*, algorithm.gdpo_reward_weights), for a command that computes
    GDPO offline."""
    from gdpo_verl.core.corrgrpo import AUTHORS_NAME
    from gdpo_verl.core.options import COMMAND_LINE, OPTIONS
    from gdpo_verl.records.steps import ESTIMATORS

    given = " (default: the record's)" if records else ""
    group = command.add_argument_group("GDPO options, as algorithm.gdpo.* in training")
    group.add_argument("--estimator", choices=(*ESTIMATORS, AUTHORS_NAME),
                       help="algorithm.adv_estimator: gdpo, or corrgrpo (CorrGRPO, whose authors call it "
                            f"grpo_covariance_coefficient; it takes --weights only){given or ' (default: gdpo)'}")
    for name in COMMAND_LINE:
        option = OPTIONS[name]
        kind = {"choices": option.choices} if option.choices else {"type": float, "metavar": "NUMBER"}
        group.add_argument(f"--{name.replace('_', '-')}", **kind,
                           help=f"{option.key}: {option.summary.replace('%', '%%')}{given}")
    group.add_argument("--weights", type=weights_json, metavar="JSON",
                       help="algorithm.gdpo_reward_weights as a JSON object; a schedule ([[step, weight], ...]) is read "
                            + ("at each record's step" if records else "at --step"))
    if not records:
        group.add_argument("--step", type=int, help="the trainer step scheduled weights are read at")


def chosen_options(args: argparse.Namespace) -> dict:
    """The estimator options given on the command line, as algorithm.gdpo names them."""
    from gdpo_verl.core.options import COMMAND_LINE

    return {name: getattr(args, name) for name in (*COMMAND_LINE, "estimator") if getattr(args, name) is not None}


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
    estimator_options(demo, records=False)

    collapse = commands.add_parser(
        "collapse",
        help="count distinct advantage groups for K binary rewards and G rollouts (the paper's Fig. 2/3)",
        description="Enumerates every group of G rollouts with K binary rewards and counts the distinct "
        "advantage vectors of GRPO (summed reward), GRPO without std and GDPO, with the estimator's own "
        "normalization (no eps, rounded to 1e-4 as in the paper; population std, which gives the same counts as "
        "the unbiased std of the paper's example). K and G each take an "
        "integer, a range a-b or a list a,b,c; every combination is counted.",
    )
    collapse.add_argument("--rewards", type=functools.partial(int_set, maximum=16), default=[2],
                          help="K, the number of rewards (default 2, at most 16)")
    collapse.add_argument("--rollouts", type=functools.partial(int_set, maximum=1024), default=[4],
                          help="G, rollouts per group (default 4, at most 1024)")
    table_or_plot(collapse, "draw the counts")

    inspect = commands.add_parser(
        "inspect",
        help="per-step collapse diagnostics from algorithm.gdpo.dump_dir records or verl rollout dumps",
        description="Reads the per-step records that algorithm.gdpo.dump_dir writes (gdpo_steps.jsonl, or "
        "the directory holding it), or verl's rollout dumps (trainer.rollout_data_dir, <step>.jsonl) when "
        "they carry the reward components, and reports per step: reward means, zero-variance group "
        "fractions, distinct advantages per group under GRPO and GDPO, groups where the rewards cancel and "
        "responses where rewards pull in opposite directions. Without PATH it reads a synthetic record "
        "shipped with the package.",
    )
    inspect.add_argument("path", nargs="?", type=Path, help="record file or directory")
    inspect.add_argument("--rewards", type=names, help="reward components (required for verl's rollout dumps)")
    estimator_options(inspect, records=True)
    table_or_plot(inspect, "draw the per-step diagnostics")

    plot = commands.add_parser(
        "plot",
        help="training curves of one or more runs from verl's logs (tensorboard or its file logger), overlaid",
        description="Reads the scalars verl logs for each run (tensorboard's events, trainer.logger including "
        "tensorboard; or its file logger's metrics.jsonl, as the CPU training run writes in its OUT) and draws one "
        "panel per metric with the runs overlaid: by default every gdpo/<reward>/mean, response_length/mean and "
        "response_length/max (the paper's Fig. 5).",
    )
    plot.add_argument("runs", nargs="+", type=Path,
                      help="each run: its $TENSORBOARD_DIR, a directory holding metrics.jsonl (the CPU run's OUT) or "
                           "that file")
    plot.add_argument("--labels", type=names, help="one label per run (default: the directory names)")
    plot.add_argument("--metrics", type=names, help="tags to draw instead of the defaults")
    plot.add_argument("--out", type=png_path, metavar="FILE.png", help="where to draw (default curves.png)")
    plot.add_argument("--json", action="store_true", help="print the drawn series as JSON")

    doctor = commands.add_parser(
        "doctor",
        help="check this environment: verl version, plugin active (fresh process and every Ray node), vLLM, GPUs",
        description="Each check prints OK, WARN (needed for some uses only) or FAIL (GDPO will not work) and "
        "what to do. Exit code 1 when a check fails. The Ray check runs a task on every node of the cluster at "
        "--ray-address (or RAY_ADDRESS), else of a local Ray it starts on 127.0.0.1, and names each node where "
        '"gdpo" is not this plugin\'s estimator.',
    )
    doctor.add_argument("--no-ray", action="store_true", help="skip the Ray check")
    doctor.add_argument("--ray-address", metavar="ADDRESS", help="the cluster to check (default: RAY_ADDRESS)")

    from gdpo_verl.tools.check_reward import add_parser

    add_parser(commands, names, weights_json)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"demo": run_demo, "collapse": run_collapse, "inspect": run_inspect, "plot": run_plot,
                "check-reward": run_check_reward}
    try:
        if args.command == "doctor":
            return run_doctor(args, parser)
        return handlers[args.command](args, parser)
    except (ValueError, OSError) as exc:  # a bad input (or an unreadable file): one line, never a traceback
        print(f"gdpo-verl {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gdpo-verl {args.command}: interrupted", file=sys.stderr)
        return 130


def run_check_reward(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.core.variants import WeightSchedule
    from gdpo_verl.tools.check_reward import run

    if len(set(args.keys)) != len(args.keys):
        parser.error(f"--keys lists a key more than once: {args.keys}")
    if args.rows < 1 or args.group < 2 or not args.timeout > 0:
        parser.error("--rows must be at least 1, --group at least 2 and --timeout above 0")
    for what, path in (("--data", args.data), ("--rollouts", args.rollouts)):
        if path is not None and not path.is_file():
            parser.error(f"{what} {path}: {'not a regular file' if os.path.lexists(path) else 'no such file'}")
    if args.weights is not None:
        scheduled = [name for name, weight in args.weights.items() if isinstance(weight, WeightSchedule)]
        if scheduled:
            parser.error(f"--weights: {scheduled[0]} is a schedule; give the weight in force at the step to check")
        unknown = sorted(set(args.weights) ^ set(args.keys))
        if unknown:
            parser.error(f"--weights must give one weight for each of --keys {args.keys}; differs in {unknown}")
    return run(args)


def run_doctor(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.tools.doctor import report, run_checks
    from gdpo_verl.verl_adapter.for_tools.environment import ray_check_timeout

    if not args.no_ray:
        ray_check_timeout()  # a bad GDPO_VERL_DOCTOR_RAY_TIMEOUT_S: refused before any check runs
    if args.ray_address:
        os.environ["RAY_ADDRESS"] = args.ray_address  # read by the Ray check's child process
    return report(run_checks(ray_worker=not args.no_ray))


def run_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.tools.demo import run_demo as demo

    if args.rollouts is not None and not args.rollouts.is_file():
        what = "not a regular file" if os.path.lexists(args.rollouts) else "no such file"
        parser.error(f"--rollouts {args.rollouts}: {what}")
    weights = args.weights
    if weights is not None:
        from gdpo_verl.core.variants import WeightSchedule

        weights = {name: [list(point) for point in weight.points] if isinstance(weight, WeightSchedule) else weight
                   for name, weight in weights.items()}
    summary = demo(args.rollouts, weights=weights, options=chosen_options(args), step=args.step)
    if args.json:
        print(json.dumps(summary))
    return 0


# groups x rollouts: each method keeps its distinct vectors (8 bytes a value), at most one per group. Measured
# just under it on 2 cores: K=2, G=125 (4.3e7 values) 1.3 GB peak, 32 s; K=7, G=4 (4.7e7) 0.7 GB, 100 s.
MAX_COLLAPSE_VALUES = 5 * 10**7


def run_collapse(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.core.collapse import COLLAPSE_METHODS, distinct_advantage_groups, multiset_count

    too_large = [(k, g) for k in args.rewards for g in args.rollouts if multiset_count(2**k, g) * g > MAX_COLLAPSE_VALUES]
    if too_large:
        k, g = too_large[0]
        parser.error(
            f"K={k}, G={g} has {multiset_count(2**k, g):,} groups of {g} rollouts: more than this command enumerates "
            f"({MAX_COLLAPSE_VALUES:,} advantage values, about 1.5 GB of memory at most). Ask for fewer rewards or "
            "rollouts."
        )
    rows = []
    start = time.perf_counter()
    for rewards in args.rewards:
        for rollouts in args.rollouts:
            groups = multiset_count(2**rewards, rollouts)
            if groups > 10**7:
                print(f"enumerating {groups:,} groups for K={rewards}, G={rollouts}; this takes a while", file=sys.stderr)
            rows.append({"rewards": rewards, "rollouts": rollouts, **distinct_advantage_groups(rewards, rollouts)})
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"{'K':>3} {'G':>3} | {'GRPO':>10} {'GRPO w/o std':>13} {'GDPO':>10}")
        for row in rows:
            print(f"{row['rewards']:>3} {row['rollouts']:>3} | " + " ".join(
                f"{row[method]:>{width}}" for method, width in zip(COLLAPSE_METHODS, (10, 13, 10), strict=True)
            ))
        print(f"({time.perf_counter() - start:.1f} s)")
    if args.plot:
        from gdpo_verl.tools.plots import plot_collapse

        plot_collapse(rows, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def run_inspect(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.records.steps import example_path, reports

    path = args.path
    if path is None:
        path = example_path()
        print(f"no PATH given: reading the synthetic example record {path}", file=sys.stderr)
    overrides = chosen_options(args)
    if args.weights is not None:
        overrides["weights"] = args.weights
    steps = reports(path, args.rewards, overrides)
    if args.json:
        print(json.dumps(steps))
    else:
        print_inspect_table(steps)
    if args.plot:
        from gdpo_verl.tools.plots import plot_inspect

        plot_inspect(steps, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def print_inspect_table(steps: list[dict]) -> None:
    rewards = reward_names(key for step in steps for key in step["metrics"])
    columns = [(f"{name} mean", reward_metric(name, MEAN)) for name in rewards]
    columns += [(f"{name} const", reward_metric(name, ZERO_VAR)) for name in rewards]
    columns += [("GRPO dist", GRPO_DISTINCT), ("GDPO dist", DISTINCT), ("cancel", CANCELLED), ("conflict", SIGN_CONFLICT)]
    widths = [max(len(title), 7) for title, _ in columns]
    print(f"{'step':>6} {'resp':>6} {'groups':>6} | " + " ".join(f"{t:>{w}}" for (t, _), w in zip(columns, widths, strict=True)))
    for step in steps:
        cells = [f"{step['metrics'].get(key, float('nan')):>{w}.3f}" for (_, key), w in zip(columns, widths, strict=True)]
        print(f"{step['step']:>6} {step['responses']:>6} {step['groups']:>6} | " + " ".join(cells))
    print("mean: raw reward mean; const: fraction of groups where the reward is constant; dist: distinct advantages "
          "per group; cancel: groups whose rewards cancel under GDPO; conflict: responses whose rewards pull in "
          "opposite directions")


def run_plot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from gdpo_verl.tools.curves import default_tags, read_scalars
    from gdpo_verl.tools.plots import plot_curves

    labels = args.labels or [path.parent.name if path.suffix == ".jsonl" else path.name for path in args.runs]
    if len(labels) != len(args.runs):
        raise ValueError(f"--labels has {len(labels)} names for {len(args.runs)} runs.")
    if len(set(labels)) != len(labels):
        raise ValueError(f"run labels must differ; got {labels}: pass --labels.")
    runs = {label: read_scalars(path) for label, path in zip(labels, args.runs, strict=True)}
    tags = args.metrics or default_tags(list(runs.values()))
    if not tags:
        raise ValueError("none of the default metrics (gdpo/<reward>/mean, response_length/mean|max) is in the logs; "
                         "name tags with --metrics.")
    missing = [tag for tag in tags if not any(tag in scalars for scalars in runs.values())]
    if missing:
        present = sorted(set().union(*runs.values()))
        raise ValueError(f"no run logged {missing}; logged tags include {present[:12]}.")
    out = args.out or Path("curves.png")
    plot_curves(runs, tags, out)
    if args.json:
        print(json.dumps({label: {tag: scalars.get(tag, []) for tag in tags} for label, scalars in runs.items()}))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
