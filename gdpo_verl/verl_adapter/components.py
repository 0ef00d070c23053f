"""A response's reward components as verl carries them: where each is found (one rule, shared by the reward side,
the TransferQueue reader and the estimator), and the rule every ``compute_score`` dict is held to.

The rule: ``compute_score``'s dict holds every key of ``algorithm.gdpo_reward_keys`` for every response, as a number,
as None where the component does not apply to that response (a mixed-task batch), or per token as
``token_level_scores_<key>``. A key left out of the dict is a mistake (a misspelled key, or a reward that never
returns it), never "does not apply": ``require_components`` stops the run at the first response it is missing from,
naming the keys the dict holds and the one closest to the missing key.

``require_components`` runs once per response, on the reward side: in verl's ``RewardLoopWorker.compute_score``,
which every reward manager's result passes through on every trainer (wrapped in ``trainer_hooks``), before verl
stacks the batch's ``reward_extra_info``. The estimator refuses a key that reaches the advantage step by no other
way with the same message (``missing_component``).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Any

from gdpo_verl.core.checks import closest

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


def require_components(info: dict, keys: Any, forms: dict | None = None) -> dict:
    """Hold ``info`` (a response's ``reward_extra_info``, what ``compute_score`` returned besides ``score``) to the
    rule above: each of ``keys`` in it, in one of its forms; a key left out raises ``missing_component``.

    The components are then moved to the front of ``info``, in the order of ``keys``: verl takes the first sample's key
    order as a batch's ``reward_extra_keys``, and ``DataProto.concat`` refuses batches whose ``reward_extra_keys``
    differ (verl's fully asynchronous trainer assembles each prompt group separately, the legacy trainer's agent loop
    each worker's share of the batch).

    A per-token component (``token_level_scores_<key>``) cannot have a gap: verl stacks per-token lists into one
    array. One that is None, or (``forms``: what this caller saw of each key before, updated here) is per token in
    one response and None in another, is refused naming the fix."""
    components: list[str] = []
    for key in map(str, keys):
        found, token_level = find_reward(key, info)
        if found is None:
            raise ValueError(missing_component(key, info, keys))
        if token_level and info[found] is None:
            raise ValueError(per_token_gap(key))
        if forms is not None:
            form = "per token" if token_level else "gap" if info[key] is None else "value"
            seen = forms.setdefault(key, set())
            seen.add(form)
            if {"per token", "gap"} <= seen:
                raise ValueError(per_token_gap(key))
        components.append(found)
    rest = [(name, value) for name, value in info.items() if name not in components]
    ordered = [(name, info[name]) for name in components] + rest
    info.clear()
    info.update(ordered)
    return info


def missing_component(key: str, returned: Iterable[str], keys: Iterable[str] | None = None,
                      held: str = "it returned") -> str:
    """The error for a reward key that ``compute_score`` did not return (``returned``: the keys its dict held, or
    what ``held`` says they are), with the returned key closest to it, when one is close."""
    names = sorted(str(name) for name in returned)
    listed = f"algorithm.gdpo_reward_keys={list(map(str, keys))}" if keys is not None else "algorithm.gdpo_reward_keys"
    close = closest(key, [name.removeprefix(TOKEN_LEVEL_PREFIX) for name in names])
    guess = f" Did you mean {close!r}?" if close else ""
    if names == ["acc"]:  # verl's managers keep a plain number under "acc"
        guess = " (verl keeps a plain number that compute_score returns as 'acc': return a dict instead)"
    return (
        f"compute_score returned no {key!r}, which {listed} names; {held} {names or 'no keys'}.{guess} List the "
        f"components compute_score returns, or make it return {key!r} for every response (None where the component "
        "does not apply: a key left out is taken for a mistake, never for \"does not apply\")."
    )


def per_token_gap(key: str) -> str:
    """The error for a per-token component that does not apply to some responses."""
    return (f"reward component {key!r} is per token ({TOKEN_LEVEL_PREFIX}{key}) and does not apply to some responses "
            "(None): verl stacks per-token scores into one array, which cannot "
            f"hold a gap. For a component that applies to some responses only, return one value per response "
            f"({key!r}, None where it does not apply); or return per-token scores for every response (zeros where "
            "nothing is paid).")
