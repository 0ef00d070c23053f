"""A reward's options (``reward.custom_reward_function.reward_kwargs.<name>``), each declared once in the reward's
module as a ``Kwarg``: its default, its check and its meaning. ``read`` gives every declared option its value (the
given one, else the default) as its check returns it; a name that is neither declared nor one that verl's reward
managers pass themselves (``VERL_KWARGS``) is refused, naming the closest option. ``tokens``, ``seconds`` and
``weight`` are the checks the rewards share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gdpo_verl.core.checks import closest, finite_number, whole_number
from gdpo_verl.rewards.common import VERL_KWARGS

WHERE = "reward.custom_reward_function.reward_kwargs"


@dataclass(frozen=True)
class Kwarg:
    """One option: ``check(value, what)`` returns the value as the reward takes it, or raises ValueError naming
    ``what`` (``reward.custom_reward_function.reward_kwargs.<name>``)."""

    default: Any
    check: Callable[[Any, str], Any]
    doc: str


def read(declared: Mapping[str, Kwarg], given: Mapping[str, Any], more: Iterable[str] = ()) -> dict[str, Any]:
    """Each option of ``declared`` as its check returns it, from ``given`` (the call's keyword arguments) or its
    default. ``more``: other names the reward takes and checks on its own (the coding reward's sandbox limits,
    ``Limits``); those given are returned as given."""
    more = tuple(more)
    unknown = sorted(set(given) - set(declared) - set(more) - set(VERL_KWARGS))
    if unknown:
        known = [*declared, *more]
        guesses = [f"{guess!r} for {name!r}" for name in unknown if (guess := closest(str(name), known))]
        meant = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
        raise ValueError(f"unknown {WHERE} {unknown}{meant}; the options are {', '.join(known)}.")
    values = {name: kwarg.check(given.get(name, kwarg.default), f"{WHERE}.{name}") for name, kwarg in declared.items()}
    return {**values, **{name: given[name] for name in more if name in given}}


def tokens(value: Any, what: str) -> int:
    """A number of tokens, 1 or more."""
    return whole_number(value, f"{what} (tokens)", minimum=1)


def seconds(value: Any, what: str) -> float:
    """A time in seconds, above 0."""
    return finite_number(value, f"{what} (seconds)", above=0)


def weight(value: Any, what: str) -> float:
    """A weight of ``score``: any finite number."""
    return finite_number(value, what)
