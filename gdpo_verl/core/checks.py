"""Checks of single values from configs and reward functions: one wording for every such error."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np


def shown(value: Any) -> str:
    """``value`` for an error message: its repr, short even for a long list or string, and an integer too large
    for a float by its size (Python refuses to print one of over 4,300 digits)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and abs(int(value)) > 2**1024:
        return f"an integer too large for a float (about {int(int(value).bit_length() * math.log10(2)) + 1:,} digits)"
    return f"{value!r:.80}"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The name in ``known`` a misspelled ``name`` most likely meant, or None when none is close."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the name in ``known`` closest to ``name``; ``""`` when none is close."""
    guess = closest(name, known)
    return f" (did you mean {guess!r}?)" if guess else ""


def finite_number(value: Any, what: str, *, minimum: float | None = None, above: float | None = None) -> float:
    """``value`` as a float: a real, finite number (a bool is not one), at least ``minimum``, above ``above``."""
    if isinstance(value, (bool, np.bool_)) or not is_reward_value(value):
        raise ValueError(f"{what} must be a finite number; got {shown(value)}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what} must be at least {minimum:g}; got {shown(value)}.")
    if above is not None and value <= above:
        raise ValueError(f"{what} must be above {above:g}; got {shown(value)}.")
    return float(value)


def whole_number(value: Any, what: str, *, minimum: int) -> int:
    """``value`` as an int: an integer (a bool is not one) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{what} must be a whole number of at least {minimum}; got {value!r}.")
    return int(value)


def boolean(value: Any, what: str) -> bool:
    """``value`` as True or False: a bool, numpy's, the integers 1 and 0, or a one-element numpy array or torch
    tensor of one of those (verl may hand a flag over as a tensor). A string such as "false" is refused, not read
    as true; so is a float, even 1.0."""
    if isinstance(value, (bool, np.bool_)) or isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    if getattr(value, "shape", None) in ((), (1,)) and hasattr(value, "item"):
        item = value.item()
        if isinstance(item, (bool, numbers.Integral)) and not isinstance(item, float):
            return boolean(item, what)
    raise ValueError(f"{what} must be true or false; got {shown(value)}.")


def one_of(*choices: str) -> Callable[[Any, str], str]:
    """The check of a choice: one of ``choices`` (strings), which it holds as ``check.choices``."""
    def check(value: Any, what: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{what} must be one of {choices}; got {shown(value)}.")
        return value
    check.choices = choices
    return check


def is_number(value: Any) -> bool:
    """True for a real number as a reward function may return it: bools and numpy scalars included (True
    counts as 1), NaN and Inf too (``is_reward_value`` leaves those out)."""
    return isinstance(value, (numbers.Real, np.bool_))


def is_reward_value(value: Any) -> bool:
    """True for a usable score: a finite real number (``is_number`` and finite). An integer too large for a float
    (Python's ints have no bound; JSON allows one of 4,300 digits) is not one: False, never OverflowError."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
