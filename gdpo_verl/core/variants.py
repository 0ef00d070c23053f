"""The estimators that followed GDPO on its per-reward advantages, and weights that change with the step.

- GD2PO (arXiv 2606.16771; Qwen-Applications/GD2PO): ``conflict_keep`` masks a response whose rewards pull its
  advantage in opposite directions ("hard": any two signs differ; "snr": they differ and the agreement
  ``|sum_k c_k| / sum_k |c_k|`` is below a threshold), ``group_kept_fraction`` scales each group by the fraction it
  keeps.
- SAW (arXiv 2606.07705; Zhaolutuan/SAW): ``saw_weights``, each reward's coefficient of variation over the batch,
  ``w_k = K * CV_k / sum_j CV_j``.
- ``WeightSchedule``: a weight given as ``[step, weight]`` points, linear between them.

docs/estimator.md gives each formula, its source, and where this code and the authors' differ. Torch only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gdpo_verl.core.checks import finite_number, whole_number

# GD2PO's code: a per-reward advantage counts as positive above 1e-8 and negative below -1e-8 (summed over the
# response's tokens there; per response here, where a sum over tokens has the same sign), and the agreement's
# denominator gets 1e-8.
SIGN_EPS = 1e-8
# SAW's code: 1e-8 is added to |mean| and to the sum of the CVs.
SAW_EPS = 1e-8


def conflict_keep(contributions: torch.Tensor, mode: str, threshold: float) -> torch.Tensor:
    """``(B,)`` bool, the responses GD2PO keeps.

    Args:
        contributions: ``(B, K)`` float64 each reward's weighted normalized advantage ``w_k * A_k`` (GD2PO's code
            has no weights: with weights 1 these are its ``A_k``; a negative weight turns a reward's pull around).
        mode: ``"hard"``: drop a response where some contribution is positive and another negative. ``"snr"``: drop
            such a response only when its agreement ``|s|``, ``s = sum_k c_k / (sum_k |c_k| + 1e-8)``, is below
            ``threshold``.
    """
    positive = (contributions > SIGN_EPS).any(dim=1)
    negative = (contributions < -SIGN_EPS).any(dim=1)
    mixed = positive & negative
    if mode == "snr":
        agreement = contributions.sum(dim=1) / (contributions.abs().sum(dim=1) + SIGN_EPS)
        mixed = mixed & (agreement.abs() < threshold)
    return ~mixed


def group_kept_fraction(keep: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """``(B,)`` float64: for every response, the fraction of its group's responses that ``keep`` holds."""
    ones = torch.ones_like(keep, dtype=torch.float64)
    size = torch.zeros(num_groups, dtype=torch.float64, device=keep.device).index_add_(0, group, ones)
    kept = torch.zeros_like(size).index_add_(0, group, keep.to(torch.float64))
    return (kept / size)[group]


def saw_weights(scores: torch.Tensor, applies: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor:
    """``(K,)`` float64 SAW's weights ``w_k = K * CV_k / (sum_j CV_j + 1e-8)``, ``CV_k = std_k / (|mean_k| + 1e-8)``
    with the unbiased std and the mean of reward k over the batch: the responses in ``rows`` (``(B,)`` bool: those
    with a valid token) that it applies to. A reward with fewer than 2 such responses, or constant over them, has
    CV 0 (weight 0: it carries no signal this batch)."""
    use = rows.unsqueeze(1).expand_as(scores)
    if applies is not None:
        use = use & applies
    weight = use.to(torch.float64)
    count = weight.sum(dim=0)
    mean = (scores * weight).sum(dim=0) / count.clamp(min=1)
    deviation = (scores - mean) * weight
    largest = deviation.abs().amax(dim=0)
    unit = torch.where(largest > 0, largest, torch.ones_like(largest))
    std = unit * ((deviation / unit).square().sum(dim=0) / (count - 1).clamp(min=1)).sqrt()
    cv = torch.where(count >= 2, std / (mean.abs() + SAW_EPS), torch.zeros_like(std))
    return scores.shape[1] * cv / (cv.sum() + SAW_EPS)


@dataclass(frozen=True)
class WeightSchedule:
    """A weight that changes with the trainer's global step: ``points`` ``((step, weight), ...)`` with steps
    increasing; linear between two points, the first weight before the first step, the last after the last."""

    points: tuple[tuple[int, float], ...]

    def at(self, step: int) -> float:
        points = self.points
        if step <= points[0][0]:
            return points[0][1]
        for (start, low), (end, high) in zip(points, points[1:]):
            if step <= end:
                return low + (high - low) * (step - start) / (end - start)
        return points[-1][1]


def read_weight(value: Any, what: str) -> float | WeightSchedule:
    """A weight as configured: a number, or a list of ``[step, weight]`` points (``WeightSchedule``)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        return finite_number(value, what)
    example = "for example [[0, 0.0], [100, 1.0]] (0 until step 0, rising to 1 at step 100, 1 after)"
    if not value:
        raise ValueError(f"{what} is an empty list; a schedule needs [step, weight] points, {example}.")
    points = []
    for point in value:
        if isinstance(point, (str, bytes, Mapping)) or not isinstance(point, Sequence) or len(point) != 2:
            raise ValueError(f"{what}: each point of a schedule must be [step, weight]; got {point!r}; {example}.")
        step = whole_number(point[0], f"{what}: the step of point {list(point)!r}", minimum=0)
        points.append((step, finite_number(point[1], f"{what}: the weight of point {list(point)!r}")))
    steps = [step for step, _ in points]
    if any(later <= earlier for earlier, later in zip(steps, steps[1:])):
        raise ValueError(f"{what}: the steps of a schedule must increase; got {steps}; {example}.")
    return WeightSchedule(tuple(points))


def weights_at(weights: Mapping[str, float | WeightSchedule], step: int | None) -> dict[str, float]:
    """The weights in force at the trainer's global ``step``; ``step`` may be None when none is scheduled."""
    if any(isinstance(weight, WeightSchedule) for weight in weights.values()):
        if step is None:
            raise ValueError(
                "a scheduled weight (algorithm.gdpo_reward_weights given as [step, weight] points) is read at the "
                "trainer's global step, and this advantage step ran outside verl's trainer (no step). Give the step "
                "(gdpo-verl demo and inspect: --step), or give the weights as numbers."
            )
    return {name: weight.at(step) if isinstance(weight, WeightSchedule) else weight for name, weight in weights.items()}


def schedule_breakpoints(weights: Mapping[str, float | WeightSchedule]) -> list[int]:
    """The steps where the weights can all be 0 at once, if anywhere, sorted: every point of a schedule, and the
    whole steps on either side of each place a scheduled weight crosses 0 (the weights are linear in between)."""
    steps = set()
    for weight in weights.values():
        if isinstance(weight, WeightSchedule):
            steps.update(step for step, _ in weight.points)
            for (start, low), (end, high) in zip(weight.points, weight.points[1:]):
                if low * high < 0:
                    crossing = start + (end - start) * low / (low - high)
                    steps.update((math.floor(crossing), math.ceil(crossing)))
    return sorted(steps)
