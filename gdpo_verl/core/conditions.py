"""Conditioned rewards, the paper's general form (section 3.2): keep reward k only where reward l >= t.

E.g. the math experiments' conditioned length reward pays for brevity only when the answer is correct:
``Condition(reward="length", given="correct", at_least=1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gdpo_verl.core.checks import finite_number


@dataclass(frozen=True)
class Condition:
    """Keep ``reward`` only for responses whose ``given`` reward is at least ``at_least`` (else 0)."""

    reward: str
    given: str
    at_least: float


def check_conditions(names: Sequence[str], conditions: Sequence[Condition]) -> tuple[Condition, ...]:
    """``conditions`` with float thresholds; raises ValueError naming a reward outside ``names`` or a bad threshold."""
    checked = []
    for condition in conditions:
        unknown = [name for name in (condition.reward, condition.given) if name not in names]
        if unknown:
            raise ValueError(f"conditions name {unknown}, which are not among the rewards {list(names)}.")
        if condition.reward == condition.given:
            raise ValueError(f"conditions: reward {condition.reward!r} cannot be conditioned on itself.")
        at_least = finite_number(condition.at_least, f"conditions: at_least of {condition.reward!r}")
        checked.append(Condition(condition.reward, condition.given, at_least))
    return tuple(checked)


def apply_conditions(
    scores: torch.Tensor, names: Sequence[str], conditions: Sequence[Condition], applies: torch.Tensor | None = None
) -> torch.Tensor:
    """``(B, K)`` outcome scores with each conditioned reward zeroed where its ``given`` reward (the raw value,
    before any condition) is below ``at_least``, or does not apply (``applies`` ``(B, K)`` bool: a condition on a
    reward a response does not have is not met); ``scores`` itself when there are no conditions."""
    if not conditions:
        return scores
    column = {name: k for k, name in enumerate(names)}
    gated = scores.clone()
    for condition in conditions:
        given = column[condition.given]
        keep = scores[:, given] >= condition.at_least
        if applies is not None:
            keep &= applies[:, given]
        gated[:, column[condition.reward]] *= keep.to(scores.dtype)
    return gated


def applies_under_conditions(applied: torch.Tensor | None, names: Sequence[str],
                             conditions: Sequence[Condition]) -> torch.Tensor | None:
    """``applied`` ``(B, K)`` with each conditioned reward not applying where its ``given`` reward does not (a
    condition on a reward that does not apply: neither does the conditioned one); None stays None."""
    if applied is None or not conditions:
        return applied
    gated = applied.clone()
    for condition in conditions:
        gated[:, names.index(condition.reward)] &= applied[:, names.index(condition.given)]
    return gated
