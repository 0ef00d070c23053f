"""What an answer's values are, and when they are the gold's: ``judge`` credits an answer whose values and the
gold's are the same collection, order-free; more distinct values than the gold is a hedge (never credited,
whichever is right); fewer is wrong.

Values come from gdpo_verl/rewards/answers.py, which reads them. Two values are the same (``same``, not
symmetric: the gold's rounding sets the tolerance) when they are of one kind and equal:

- numbers by value, in exact decimal arithmetic: exactly when both are exact. A decimal states its value to half
  a unit of its last written place: it answers an exact gold when the gold lies within that and it has at least
  six significant digits (``1.414214`` is ``\\sqrt{2}``, ``1.414`` is not); a gold written as a decimal is
  answered by what rounds to it at its places (a gold of ``0.33`` takes ``\\frac{1}{3}``; ``2.55`` answers
  ``2.6``, not ``2.5``). A decimal whose written places are not known (``1.5 \\times 10^{3}``) must equal the
  gold;
- a percent sign scales in one direction only, from the side that has it to the side that does not: ``20\\%``
  answers a gold of 20 or 0.2, and a gold of ``20\\%`` takes 20 or 0.2; two percents compare as written
  (``2000\\%`` is not ``20\\%``);
- a value with a unit or a modulus compares it with the gold's when both have one;
- an equation is only ever the same as an equation, an inequality as an inequality (``x + y = 5`` does not
  answer 5), except that an equation naming a value (``a_n = 2n + 1``) answers that value; a matrix of one row
  or one column answers a tuple of its entries, in order;
- anything else (sets, intervals, matrices, expressions with unknowns, equations) compares with math-verify's
  ``verify``.
"""

from __future__ import annotations

import decimal
import itertools
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Value:
    """One stated value: a sympy object (``expr``), a multiple-choice letter (``choice``), or both (a letter with
    the value written after it); how it was written (``decimals``: places after the point of a decimal literal;
    ``literal``: a number in another base, as written; ``percent``; ``unit``: in answer_words' one spelling;
    ``modulus``: the m of a residue written ``v \\pmod{m}``; ``labels``: the unknowns of a labelled point, in the
    order of ``expr``'s coordinates)."""

    expr: Any = None
    choice: str | None = None
    decimals: int | None = None
    literal: str | None = None
    percent: bool = False
    unit: str | None = None
    modulus: int | None = None
    labels: tuple[str, ...] | None = None
    unknown: Any = None  # while reading: the one unknown of the inequality whose solution set ``expr`` is
    join: str = "list"  # while reading: how it joins the value before it ("or", "and" or "list")


def distinct(values: list[Value]) -> list[Value]:
    """``values`` with each value equal to an earlier one left out: the same value, written with the same
    letter, unit, modulus and percent sign (``5`` and ``5 \\text{ cm}`` are two values; so are ``(C)`` and
    ``(C)\\ 7``, and ``20\\%`` and ``0.2``)."""
    kept: list[Value] = []
    for value in values:
        if not any(_written_alike(earlier, value) and same(earlier, value) and same(value, earlier)
                   for earlier in kept):
            kept.append(value)
    return kept


def _written_alike(one: Value, other: Value) -> bool:
    return ((one.choice, one.unit, one.modulus, one.percent, one.expr is None, one.literal)
            == (other.choice, other.unit, other.modulus, other.percent, other.expr is None, other.literal))


# ------------------------------------------------------------------------------------------------ judging

CORRECT, WRONG, HEDGED = "correct", "wrong", "hedged"


def judge(gold: list[Value], answer: list[Value]) -> str:
    """``CORRECT`` when ``answer`` states the same collection of values as ``gold`` (order-free), ``HEDGED`` when
    it states more distinct values, else ``WRONG``."""
    if len(answer) > len(gold):
        return HEDGED
    if len(answer) < len(gold):
        return WRONG
    matches = [[same(expected, given) for given in answer] for expected in gold]
    for order in itertools.permutations(range(len(answer))) if len(answer) <= 6 else ():
        if all(matches[index][chosen] for index, chosen in enumerate(order)):
            return CORRECT
    if len(answer) > 6:  # a greedy matching: golds of more than 6 values are rare, and each value rarely repeats
        free = set(range(len(answer)))
        for row in matches:
            chosen = next((index for index in free if row[index]), None)
            if chosen is None:
                return WRONG
            free.discard(chosen)
        return CORRECT
    return WRONG


def same(gold: Value, answer: Value) -> bool:
    """Whether ``answer`` states the value ``gold`` is (not symmetric: the gold's rounding sets the tolerance)."""
    if gold.choice is not None and answer.choice is not None:
        return answer.choice == gold.choice and (gold.expr is None or answer.expr is None or _same_expr(gold, answer))
    if gold.choice is not None:  # a letter with its value: a plain value answers it by its value
        return gold.expr is not None and answer.expr is not None and _same_expr(gold, answer)
    if gold.literal is not None or answer.literal is not None:
        return gold.literal == answer.literal
    if answer.expr is None:
        return False
    if gold.unit is not None and answer.unit is not None and gold.unit != answer.unit:
        return False
    if gold.modulus is not None and answer.modulus is not None and gold.modulus != answer.modulus:
        return False
    if (gold.labels is not None and answer.unknown is not None) or (answer.labels is not None
                                                                     and gold.unknown is not None):
        return False  # a point (x = 5, y = 7) is no solution set (5 < x < 7)
    return _same_expr(gold, answer)


def _same_expr(gold: Value, answer: Value) -> bool:
    from math_verify import verify

    if is_number(gold.expr) and is_number(answer.expr):
        # the percent sign scales from the side that has it to the side that has not: 20\% answers 0.2 and 20
        scales = ([(1, 1)] + [(1, 100)] * (answer.percent and not gold.percent)
                  + [(100, 1)] * (gold.percent and not answer.percent))
        return any(same_number(gold.expr * gold_scale, answer.expr * answer_scale, _places(gold.decimals, gold_scale),
                               _places(answer.decimals, answer_scale), gold.expr)
                   for gold_scale, answer_scale in scales)
    if _relational(gold.expr) != _relational(answer.expr):
        # a_n = 2n + 1 states 2n + 1, named; x + y = 5 states no value, and 5 no equation
        named_gold, named_answer = _named_value(gold.expr), _named_value(answer.expr)
        if _relational(named_gold) is not None or _relational(named_answer) is not None:
            return False
        return same(Value(named_gold, decimals=gold.decimals), Value(named_answer, decimals=answer.decimals))
    entries = _vector_and_tuple(gold.expr, answer.expr) or _tuples(gold.expr, answer.expr)
    if entries is not None:
        return len(entries[0]) == len(entries[1]) and all(
            same(Value(expected), Value(given)) for expected, given in zip(*entries, strict=True))
    return bool(verify(gold.expr, answer.expr, timeout_seconds=None))


def _places(decimals: int | None, scale: int) -> int | None:
    """The places after the point of a decimal multiplied by ``scale`` (1 or 100): 0.142857 has 6, 14.2857 4."""
    if decimals is None or scale == 1:
        return decimals
    return max(decimals - 2, 0)


def _named_value(expr: Any) -> Any:
    """The value of an equation that names one (an unknown alone on a side, not in the other: ``y = 2x + 3``);
    anything else as it is."""
    import sympy

    if isinstance(expr, sympy.Eq):
        for side, other in ((expr.lhs, expr.rhs), (expr.rhs, expr.lhs)):
            if isinstance(side, sympy.Symbol) and side not in other.free_symbols:
                return other
    return expr


def _relational(expr: Any) -> type | None:
    """The kind of statement ``expr`` is (an equation, an inequality, a logical combination), None for a value."""
    import sympy

    boolean = sympy.logic.boolalg
    for kind in (sympy.Eq, sympy.core.relational.Relational, boolean.BooleanFunction, boolean.BooleanAtom):
        if isinstance(expr, kind):
            return kind
    return None


def _tuples(gold: Any, answer: Any) -> tuple[list[Any], list[Any]] | None:
    """The entries of both, in order, when both are tuples (a pair in parentheses is read as an open interval) or
    both intervals of the same ends' openness: compared entry by entry by ``same``, with its rules for numbers
    (math-verify would round them to six places); else None."""
    import sympy

    def entries(expr: Any) -> tuple[list[Any], tuple[bool, bool] | None] | None:
        if isinstance(expr, sympy.Tuple):
            return list(expr.args), (True, True)
        if isinstance(expr, sympy.Interval):
            return [expr.start, expr.end], (bool(expr.left_open), bool(expr.right_open))
        return None

    first, second = entries(gold), entries(answer)
    if first is None or second is None or first[1] != second[1]:
        return None
    return first[0], second[0]


def _vector_and_tuple(gold: Any, answer: Any) -> tuple[list[Any], list[Any]] | None:
    """The entries of both, in order, when one is a matrix of one row or one column and the other a tuple (or a
    pair in parentheses); else None."""
    import sympy

    def entries(expr: Any) -> list[Any] | None:
        if isinstance(expr, sympy.MatrixBase) and 1 in expr.shape:
            return list(expr)
        return None

    def coordinates(expr: Any) -> list[Any] | None:  # (1, 2) is read as an open interval: a pair here
        if isinstance(expr, sympy.Tuple):
            return list(expr.args)
        if isinstance(expr, sympy.Interval) and expr.left_open and expr.right_open:
            return [expr.start, expr.end]
        return None

    for matrix, other, flip in ((gold, answer, False), (answer, gold, True)):
        if entries(matrix) is not None and coordinates(other) is not None:
            pair = (entries(matrix), coordinates(other))
            return pair[::-1] if flip else pair
    return None


def is_number(expr: Any) -> bool:
    import sympy

    return (isinstance(expr, sympy.Expr) and not expr.free_symbols and bool(expr.is_number)
            and expr.is_finite is not False)


# Significant digits a decimal needs to answer an exact gold: half a unit of its last place, relative.
_PRECISION = decimal.Decimal("5e-6")


def same_number(gold: Any, answer: Any, gold_decimals: int | None, answer_decimals: int | None,
                 written_gold: Any) -> bool:
    """Whether the number ``answer`` answers ``gold``: exactly equal when both are exact; a decimal gold with
    ``gold_decimals`` places is answered by what rounds to it there (by an exact answer whose decimal expansion
    ends, such as ``\\frac{1}{4}``, only when equal); an exact gold by a decimal of
    ``answer_decimals`` places that it lies within half a unit of the last, with six significant digits; a
    decimal of unknown places must equal it (to 12 digits). In sympy's numbers and exact decimal arithmetic:
    any size, no overflow, no float rounding."""
    import sympy

    gold, answer = sympy.sympify(gold).doit(), sympy.sympify(answer).doit()
    if isinstance(gold, sympy.Rational) and isinstance(answer, sympy.Rational) and gold_decimals is None:
        return gold == answer
    expected, given = _decimal(gold), _decimal(answer)
    if expected is None or given is None:  # sympy could not evaluate it as a real number
        from math_verify import verify

        return bool(verify(gold, answer, timeout_seconds=None))
    if gold_decimals is not None:
        if answer_decimals is None and isinstance(answer, sympy.Rational) and _terminates(answer):
            return expected == given  # \frac{1}{4} is 0.25 exactly, which a gold of 0.3 would have written
        quantum = decimal.Decimal(1).scaleb(-gold_decimals)
        rounded = given.quantize(quantum, rounding=decimal.ROUND_HALF_UP, context=_NUMBERS)
        return rounded == expected.quantize(quantum, context=_NUMBERS)
    if not (gold.has(sympy.Float) or answer.has(sympy.Float)):
        return abs(expected - given) <= decimal.Decimal("1e-40") * max(1, abs(expected))
    if answer_decimals is not None and not gold.has(sympy.Float):
        half = decimal.Decimal(1).scaleb(-answer_decimals) / 2
        return expected == given or (abs(expected - given) <= half and half <= _PRECISION * abs(expected))
    return abs(expected - given) <= decimal.Decimal("1e-12") * max(abs(expected), abs(given))


def _terminates(number: Any) -> bool:
    """Whether an exact rational's decimal expansion ends (its denominator has no prime factor but 2 and 5)."""
    denominator = int(number.q)
    for factor in (2, 5):
        while denominator % factor == 0:
            denominator //= factor
    return denominator == 1


_NUMBERS = decimal.Context(prec=80, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _decimal(number: Any) -> decimal.Decimal | None:
    """A real sympy number as a Decimal: a float as its decimal digits (2.55 is 2.55, not the binary float
    nearest it), anything else to 60 significant digits; None when it is not a real number."""
    import sympy

    value = number if isinstance(number, sympy.Float) else sympy.N(number, 15 if number.has(sympy.Float) else 60)
    if not (isinstance(value, sympy.Number) and value.is_real and value.is_finite):
        return None
    return _NUMBERS.create_decimal(str(value) if not isinstance(value, sympy.Integer) else int(value))
