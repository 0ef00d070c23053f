"""What the reader makes of an answer: ``Value``s, or ``Unreadable`` naming what it could not place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Unreadable(ValueError):
    """The text holds something the reader cannot place as values; the message says what."""


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as a reason shows it, at most ``limit`` characters; a number too long for Python to write out (over
    ``sys.get_int_max_str_digits()`` digits, which the answer guards allow up to 20,000) by its size instead."""
    try:
        return str(value)[:limit]
    except ValueError:  # Python refuses to convert an integer that long to text
        return "a number too long to write out"


@dataclass(frozen=True)
class Value:
    """One stated value: a sympy object (``expr``), a multiple-choice letter (``choice``), or both (a letter with
    the value written after it); how it was written (``decimals``: places after the point, when the value is a
    decimal literal; ``places``: every decimal literal written in it, (its exact value, its places), so that a
    container's entries keep theirs; ``literal``: a number in another base, as written (``expr`` is its value);
    ``percent``; ``unit``: in gdpo_verl/answers/words.py's one spelling, or "degree" and "dollar" for the signs;
    ``modulus``: the m of a residue written ``v \\pmod{m}``; ``labels``: the unknowns of a labelled point, in the
    order of ``expr``'s coordinates)."""

    expr: Any = None
    choice: str | None = None
    decimals: int | None = None
    places: tuple[tuple[Any, int], ...] = ()
    literal: str | None = None
    percent: bool = False
    unit: str | None = None
    modulus: int | None = None
    labels: tuple[str, ...] | None = None
    unknown: Any = None  # while reading: the one unknown of the inequality whose solution set ``expr`` is
    join: str = "list"  # while reading: how it joins the value before it ("or", "and" or "list")
