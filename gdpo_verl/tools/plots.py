"""PNG figures for the command line (matplotlib, no display needed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gdpo_verl.core.collapse import COLLAPSE_METHODS  # noqa: E402
from gdpo_verl.core import diagnostics as metric  # noqa: E402

# The estimators as figures and tables name them (these plots and the learning study's report).
LABELS = {"grpo": "GRPO", "grpo_no_std": "GRPO w/o std", "gdpo": "GDPO"}


def plot_collapse(rows: Sequence[Mapping[str, int]], path: Path) -> None:
    """Distinct advantage groups against the number of rollouts (or of rewards when G is fixed), per method,
    one line per value of the other parameter; log scale like the paper's Fig. 2/3."""
    rollouts = sorted({row["rollouts"] for row in rows})
    x_key, line_key = ("rollouts", "rewards") if len(rollouts) > 1 else ("rewards", "rollouts")
    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    markers = {"grpo": "o", "grpo_no_std": "s", "gdpo": "^"}
    for line_value in sorted({row[line_key] for row in rows}):
        members = sorted((row for row in rows if row[line_key] == line_value), key=lambda row: row[x_key])
        for method in COLLAPSE_METHODS:
            axes.plot(
                [row[x_key] for row in members],
                [row[method] for row in members],
                marker=markers[method],
                label=f"{LABELS[method]} ({line_key}={line_value})",
            )
    axes.set_yscale("log")
    axes.set_xlabel(f"number of {x_key}")
    axes.set_ylabel("distinct advantage groups")
    axes.set_title("Distinct advantage groups, binary rewards")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    _save(figure, path)


def plot_inspect(reports: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Four panels over training steps: per-reward means, zero-variance group fractions, distinct
    advantages per group (GRPO vs GDPO), cancelled groups and sign conflicts."""
    steps = [report["step"] for report in reports]
    names = metric.reward_names(key for report in reports for key in report["metrics"])
    figure, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    series = {
        (0, 0, "reward mean"): [(name, metric.reward_metric(name, metric.MEAN)) for name in names],
        (0, 1, "fraction of groups where the reward is constant"): [
            (name, metric.reward_metric(name, metric.ZERO_VAR)) for name in names
        ],
        (1, 0, "distinct advantages per group"): [("GDPO", metric.DISTINCT), ("GRPO on the sum", metric.GRPO_DISTINCT)],
        (1, 1, "fraction"): [("groups that cancel", metric.CANCELLED), ("responses with a sign conflict", metric.SIGN_CONFLICT)],
    }
    for (row, column, title), lines in series.items():
        for label, key in lines:
            axes[row][column].plot(steps, [report["metrics"].get(key, math.nan) for report in reports], label=label)
        axes[row][column].set_title(title, fontsize=10)
        axes[row][column].grid(True, alpha=0.3)
        axes[row][column].legend(fontsize=8)
    for column in range(2):
        axes[1][column].set_xlabel("step")
    _save(figure, path)


def plot_curves(runs: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]], tags: Sequence[str], path: Path) -> None:
    """One panel per tag, every run overlaid."""
    columns = min(3, len(tags))
    rows = math.ceil(len(tags) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.4 * rows), squeeze=False)
    for position, tag in enumerate(tags):
        panel = axes[position // columns][position % columns]
        for label, scalars in runs.items():
            points = scalars.get(tag, [])
            if points:
                panel.plot([step for step, _ in points], [value for _, value in points], label=label)
        panel.set_title(tag, fontsize=10)
        panel.set_xlabel("step")
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=8)
    for position in range(len(tags), rows * columns):
        axes[position // columns][position % columns].set_visible(False)
    _save(figure, path)


def _save(figure: Any, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
