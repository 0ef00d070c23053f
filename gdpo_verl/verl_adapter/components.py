"""A response's reward components as verl carries them: where each is found (one rule, shared by the reward side,
the TransferQueue reader and the estimator) and the fill-in of the components that do not apply to a response.

``fill_unapplied`` runs once per response, on the reward side: in verl's ``RewardLoopWorker.compute_score``, which
every reward manager's result passes through on every trainer (wrapped in ``trainer_hooks``), before verl stacks
the batch's ``reward_extra_info``.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

TOKEN_LEVEL_PREFIX = "token_level_scores_"


def reward_fields(key: str) -> tuple[str, str]:
    """Where a reward's scores are looked up, first match wins: per-token scores, then one value per response."""
    return TOKEN_LEVEL_PREFIX + key, key


def find_reward(key: str, *places: Container[str]) -> tuple[str | None, bool]:
    """The rule the estimator and the reward manager look a component up by: ``(the first of reward_fields(key)
    that some place holds, whether it is the per-token field)``; ``(None, False)`` when no place holds either.
    (The TransferQueue reader walks ``reward_fields`` in the same order, refusing a field only some samples have.)"""
    token_level_key = TOKEN_LEVEL_PREFIX + key
    for name in reward_fields(key):
        if any(name in place for place in places):
            return name, name == token_level_key
    return None, False


def fill_unapplied(info: dict, keys: Any, forms: dict | None = None) -> dict:
    """Set each GDPO component that ``info`` (a response's ``reward_extra_info``) lacks, in both its forms, to None:
    it does not apply to that response. verl stacks the samples' values by the first sample's keys, so a key some
    samples lack would otherwise raise there (or vanish when the first sample lacks it).

    The components are then moved to the front of ``info``, in the order of ``keys``, whichever a response left out:
    verl takes the first sample's key order as a batch's ``reward_extra_keys``, and ``DataProto.concat`` refuses
    batches whose ``reward_extra_keys`` differ (verl's fully asynchronous trainer assembles each prompt group
    separately, the legacy trainer's agent loop each worker's share of the batch).

    A per-token component (``token_level_scores_<key>``) cannot have such a gap: verl stacks per-token lists into one
    array. One that is None, or (``forms``: what this caller saw of each key before, updated here) is per token in
    one response and missing or None in another, is refused naming the fix."""
    components: list[str] = []
    for key in map(str, keys):
        found, token_level = find_reward(key, info)
        if found is None:
            info[key] = None
        if token_level and info[found] is None:
            raise ValueError(per_token_gap(key))
        if forms is not None:
            form = "per token" if token_level else "gap" if info.get(key) is None else "value"
            seen = forms.setdefault(key, set())
            seen.add(form)
            if {"per token", "gap"} <= seen:
                raise ValueError(per_token_gap(key))
        components.append(found or key)
    rest = [(name, value) for name, value in info.items() if name not in components]
    ordered = [(name, info[name]) for name in components] + rest
    info.clear()
    info.update(ordered)
    return info


def per_token_gap(key: str) -> str:
    """The error for a per-token component that does not apply to some responses."""
    return (f"reward component {key!r} is per token ({TOKEN_LEVEL_PREFIX}{key}) and does not apply to some responses "
            "(None, or left out of compute_score's dict): verl stacks per-token scores into one array, which cannot "
            f"hold a gap. For a component that applies to some responses only, return one value per response "
            f"({key!r}, None where it does not apply); or return per-token scores for every response (zeros where "
            "nothing is paid).")
