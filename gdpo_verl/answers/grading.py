"""Whether an answer's values are the gold's: ``grade`` credits an answer whose values and the gold's are the same
collection, order-free; more distinct values than the gold is a hedge (never credited, whichever is right); fewer
is wrong.

Values come from gdpo_verl/answers/parsing.py. Every number in them is exact: a decimal literal is the rational it
writes (``0.1`` is 1/10), so values compare by what they are. Two values are the same (``same``, not symmetric: the
gold's rounding sets the tolerance) when they are of one kind and equal, by one comparison for every shape:

- numbers are equal exactly, except where a side is a rounded decimal: a gold written as a decimal is answered by
  what rounds to it at its places (a gold of ``0.33`` takes ``\\frac{1}{3}``; ``2.55`` answers ``2.6``, not
  ``2.5``), and a decimal answer states its value to half a unit of its last written place, which answers an exact
  gold when the gold lies within that and the answer has at least six significant digits (``1.414214`` is
  ``\\sqrt{2}``, ``1.414`` is not). A decimal whose written places are not known (``1.5 \\times 10^{3}``) is the
  exact value it writes. A complex number is equal exactly, part by part;
- the entries of a tuple, an interval, a set or a matrix compare by the rule for numbers, each with the places it
  was written with: a rounded decimal is rounded the same inside any container;
- a percent sign scales in one direction only, from the side that has it to the side that does not: ``20\\%``
  answers a gold of 20 or 0.2, and a gold of ``20\\%`` takes 20 or 0.2; two percents compare as written;
- a value with a unit or a modulus compares it with the gold's when both have one; a value in degrees against one
  without a unit that holds pi (a radian measure) is converted exactly (``30^\\circ`` is ``\\frac{\\pi}{6}``;
  ``\\pi^\\circ`` is not ``\\pi``); against a plain number it is that number of degrees;
- a number written in a base (``101_2``) is its value; a gold written in a base is answered in that base only;
- an equation is only ever the same as an equation: the two sides' differences are multiples of one another by a
  nonzero number (``y = 2x + 3`` is ``2x - y + 3 = 0``); an inequality likewise, by a positive number, or by a
  negative one with the sign reversed. An equation naming a value (``a_n = 2n + 1``) answers that value; a matrix
  of one row or one column answers a tuple of its entries, in order;
- anything else (expressions with unknowns, words) is the same when the difference simplifies to exactly 0, or
  the two are the same symbol.
"""

from __future__ import annotations

import itertools
from typing import Any

from gdpo_verl.answers.value import Unreadable, Value, shown

CORRECT, WRONG, HEDGED = "correct", "wrong", "hedged"


def grade(gold: list[Value], answer: list[Value]) -> str:
    """``CORRECT`` when ``answer`` states the same collection of values as ``gold`` (order-free), ``HEDGED`` when
    it states more distinct values, else ``WRONG``."""
    if len(answer) > len(gold):
        return HEDGED
    if len(answer) < len(gold):
        return WRONG
    return CORRECT if _matched(gold, answer, same) else WRONG


def _matched(golds: list[Any], answers: list[Any], equal: Any) -> bool:
    """Whether each of ``golds`` has its own one of ``answers`` (as many) that ``equal`` it."""
    if len(golds) != len(answers):
        return False
    matches = [[equal(expected, given) for given in answers] for expected in golds]
    if len(answers) <= 6:
        return any(all(matches[index][chosen] for index, chosen in enumerate(order))
                   for order in itertools.permutations(range(len(answers))))
    free = set(range(len(answers)))  # a greedy matching: golds of more than 6 values are rare, and rarely repeat
    for row in matches:
        chosen = next((index for index in free if row[index]), None)
        if chosen is None:
            return False
        free.discard(chosen)
    return True


def distinct(values: list[Value]) -> list[Value]:
    """``values`` with each value equal to an earlier one left out: the same value, written with the same
    letter, unit, modulus, base and percent sign (``5`` and ``5 \\text{ cm}`` are two values; so are ``(C)`` and
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


def same(gold: Value, answer: Value) -> bool:
    """Whether ``answer`` states the value ``gold`` is (not symmetric: the gold's rounding sets the tolerance)."""
    if gold.choice is not None and answer.choice is not None:
        return answer.choice == gold.choice and (gold.expr is None or answer.expr is None or _same_expr(gold, answer))
    if gold.choice is not None:  # a letter with its value: a plain value answers it by its value
        return gold.expr is not None and answer.expr is not None and _same_expr(gold, answer)
    if gold.literal is not None:  # a gold in a base: the question asked for that base
        return gold.literal == answer.literal
    if answer.expr is None:
        return False
    if gold.modulus is not None and answer.modulus is not None and gold.modulus != answer.modulus:
        return False
    if (gold.labels is not None and answer.unknown is not None) or (answer.labels is not None
                                                                     and gold.unknown is not None):
        return False  # a point (x = 5, y = 7) is no solution set (5 < x < 7)
    if (gold.percent and answer.unit is not None) or (answer.percent and gold.unit is not None):
        return False  # 30\\% is no angle, \\$5 no percentage
    for degrees, radians in ((gold, answer), (answer, gold)):
        if degrees.unit == "degree" and (radians.unit == "radian" or radians.unit is None and _holds_pi(radians.expr)):
            import sympy

            converted = Value(degrees.expr * sympy.pi / 180)  # exact: no rounded decimal survives the product
            return _same_expr(converted, answer) if degrees is gold else _same_expr(gold, converted)
    if gold.unit is not None and answer.unit is not None:
        return gold.unit == answer.unit and _same_expr(gold, answer)
    return _same_expr(gold, answer)


def _holds_pi(expr: Any) -> bool:
    import sympy

    return isinstance(expr, sympy.Basic) and expr.has(sympy.pi)


def _same_expr(gold: Value, answer: Value) -> bool:
    import sympy

    if is_number(gold.expr) and is_number(answer.expr):
        gold_places, answer_places = _decimals(gold), _decimals(answer)
        # the percent sign scales from the side that has it to the side that has not: 20\% answers 0.2 and 20
        scales = ([(1, 1)] + [(1, 100)] * (answer.percent and not gold.percent)
                  + [(100, 1)] * (gold.percent and not answer.percent))
        return any(same_number(gold.expr * gold_scale, answer.expr * answer_scale, _places(gold_places, gold_scale),
                               _places(answer_places, answer_scale))
                   for gold_scale, answer_scale in scales)
    if _relational(gold.expr) != _relational(answer.expr):
        # a_n = 2n + 1 states 2n + 1, named; x + y = 5 states no value, and 5 no equation
        named_gold, named_answer = _named_value(gold.expr), _named_value(answer.expr)
        if _relational(named_gold) is not None or _relational(named_answer) is not None:
            return False
        return same(Value(named_gold, decimals=gold.decimals, places=gold.places),
                    Value(named_answer, decimals=answer.decimals, places=answer.places))
    entries = _vector_and_tuple(gold.expr, answer.expr) or _entries(gold.expr, answer.expr)
    if entries is not None:
        return len(entries[0]) == len(entries[1]) and all(
            _same_entry(gold, expected, answer, given, entries) for expected, given in zip(*entries, strict=True))
    if isinstance(gold.expr, (sympy.FiniteSet, sympy.Union)) and type(gold.expr) is type(answer.expr):
        members = (list(gold.expr.args), list(answer.expr.args))
        return _matched(*members, lambda expected, given: _same_entry(gold, expected, answer, given, members))
    if isinstance(gold.expr, sympy.core.relational.Relational) and isinstance(
            answer.expr, sympy.core.relational.Relational):
        return _same_relation(gold.expr, answer.expr)
    if isinstance(gold.expr, sympy.logic.boolalg.BooleanFunction) or isinstance(
            answer.expr, sympy.logic.boolalg.BooleanFunction):
        return (type(gold.expr) is type(answer.expr) and
                _matched(list(gold.expr.args), list(answer.expr.args),
                         lambda expected, given: _same_expr(Value(expected), Value(given))))
    return _same_symbolic(gold.expr, answer.expr)


def _same_entry(gold: Value, expected: Any, answer: Value, given: Any, entries: tuple[list[Any], list[Any]]) -> bool:
    """Whether the entry ``given`` of ``answer`` is the entry ``expected`` of ``gold`` (``entries``: the two
    containers' entries), each number with the places it was written with."""
    def entry(value: Value, number: Any, among: list[Any]) -> Value:  # a number's places are settled here
        if is_number(number):
            return Value(number, decimals=places_of(number, value.places, among))
        return Value(number, places=value.places)

    return same(entry(gold, expected, entries[0]), entry(answer, given, entries[1]))


def places_of(entry: Any, places: tuple[tuple[Any, int], ...], entries: list[Any]) -> int | None:
    """The places ``entry`` (one of ``entries``, a value or a container's) was written with: those of the decimal
    literals equal to it (with its sign or not), when every entry equal to it is one of them (``(1.5, 1.5)``);
    None when it is not one, or when some equal entry may be written exactly (``(1.5, \\frac{3}{2})``: which is
    which?), or when equal literals have different places."""
    if not places:
        return None
    counts = [count for value, count in places if entry == value or entry == -value]
    equal = sum(1 for other in entries if other == entry or other == -entry)
    if not counts or len(counts) < equal or len(set(counts)) != 1:
        return None
    return counts[0]


def _same_relation(gold: Any, answer: Any) -> bool:
    """Equations: the sides' differences are multiples of one another by a nonzero number; inequalities: by a
    positive number (the same direction), or a negative one (reversed: ``x < y`` is ``y > x``)."""
    import sympy

    if isinstance(gold, sympy.Eq) != isinstance(answer, sympy.Eq):
        return False
    expected, given = _side_difference(gold), _side_difference(answer)
    if expected is None or given is None:
        return False
    if isinstance(gold, sympy.Eq):
        if expected == 0 or given == 0:
            return _same_symbolic(expected, given)
        ratio = _simplified(given / expected)
        return is_number(ratio) and ratio != 0 and bool(ratio.is_finite)  # iy = 2ix + 3i is y = 2x + 3
    strict = {sympy.StrictLessThan: True, sympy.StrictGreaterThan: True, sympy.LessThan: False,
              sympy.GreaterThan: False}
    upward = {sympy.StrictLessThan: -1, sympy.LessThan: -1, sympy.StrictGreaterThan: 1, sympy.GreaterThan: 1}
    if type(gold) not in strict or type(answer) not in strict or strict[type(gold)] != strict[type(answer)]:
        return False
    expected, given = expected * upward[type(gold)], given * upward[type(answer)]  # both read "... > 0"
    if expected == 0:
        return False
    ratio = _simplified(given / expected)
    return is_number(ratio) and bool(ratio.is_positive)


def _side_difference(relation: Any) -> Any:
    import sympy

    if not all(isinstance(side, sympy.Expr) for side in (relation.lhs, relation.rhs)):
        return None
    return relation.lhs - relation.rhs


def _simplified(expr: Any, by_parts: bool = False) -> Any:
    """``expr`` simplified by sympy (``by_parts``: its real and imaginary parts written out first, exactly:
    ``expand_complex``, which turns a complex exponential into its cosine and sine)."""
    import sympy

    try:
        return sympy.simplify(sympy.expand_complex(expr) if by_parts else expr)
    except (TypeError, ValueError, NotImplementedError, AttributeError) as error:  # no verdict, never "wrong"
        raise Unreadable(f"sympy cannot simplify {shown(expr)} ({type(error).__name__})") from None


def _same_symbolic(gold: Any, answer: Any) -> bool:
    """Exactly the same: the same object, or their difference simplifies to 0 (no numeric tolerance)."""
    import sympy

    if gold == answer:
        return True
    if not (isinstance(gold, sympy.Expr) and isinstance(answer, sympy.Expr)):
        if isinstance(gold, sympy.MatrixBase) or isinstance(answer, sympy.MatrixBase):
            return False  # shapes differ, or one is no matrix: entries were compared above when they could be
        if not (isinstance(gold, sympy.Set) and isinstance(answer, sympy.Set)):
            return False
        return bool(_simplified(gold.symmetric_difference(answer)) == sympy.S.EmptySet)
    return _simplified(gold - answer) == 0


def _decimals(value: Value) -> int | None:
    """The places of a number written as a decimal, however dressed (``x = 1.49``, ``\\textbf{1.49}``): as read,
    or those of the decimal literal it is."""
    if value.decimals is not None:
        return value.decimals
    return places_of(value.expr, value.places, [value.expr])


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


def _entries(gold: Any, answer: Any) -> tuple[list[Any], list[Any]] | None:
    """The entries of both, in order, when both are tuples (a pair in parentheses, read as an open interval, is a
    tuple beside one), both intervals of the same ends' openness, or both matrices of one shape; else None."""
    import sympy

    def entries(expr: Any) -> tuple[list[Any], Any] | None:
        if isinstance(expr, sympy.Tuple):
            return list(expr.args), "tuple"
        if isinstance(expr, sympy.Interval):
            return [expr.start, expr.end], (bool(expr.left_open), bool(expr.right_open))
        if isinstance(expr, sympy.MatrixBase):
            return list(expr), expr.shape
        return None

    first, second = entries(gold), entries(answer)
    if first is None or second is None:
        return None
    if {first[1], second[1]} == {"tuple", (True, True)}:  # (1, 2) is read as an open interval: a pair beside a tuple
        return first[0], second[0]
    if first[1] != second[1]:
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
_PRECISION = 5 * 10**-6  # (as a sympy Rational below)


def same_number(gold: Any, answer: Any, gold_decimals: int | None = None, answer_decimals: int | None = None) -> bool:
    """Whether the number ``answer`` answers ``gold``: equal when neither is a rounded decimal (exactly: rationals
    by their values, other numbers when their difference is proven 0, complex numbers included); a decimal gold
    with ``gold_decimals`` places is answered by what rounds to it there (by an exact answer whose decimal
    expansion ends, such as ``\\frac{1}{4}``, only when equal); an exact gold by a decimal of ``answer_decimals``
    places that it lies within half a unit of the last, with six significant digits. Rationals in exact arithmetic,
    other numbers to as many digits as the places compared need: any size, no float rounding, no tolerance."""
    import sympy

    gold, answer = sympy.sympify(gold).doit(), sympy.sympify(answer).doit()
    if gold_decimals is not None:
        if answer_decimals is None and isinstance(answer, sympy.Rational) and _terminates(answer):
            return gold == answer  # \frac{1}{4} is 0.25 exactly, which a gold of 0.3 would have written
        rounded = _rounded(answer, gold_decimals)
        return rounded is not None and rounded == _rounded(gold, gold_decimals)
    if answer_decimals is not None and gold != answer:
        half = sympy.Rational(1, 2 * 10**answer_decimals)
        return (_within(gold, answer, half) and half <= sympy.Rational(_PRECISION) * abs(gold)
                if _real(gold) else False)
    return _equal(gold, answer)


def _real(number: Any) -> bool:
    return bool(getattr(number, "is_real", False)) and number.is_finite is not False


def _equal(gold: Any, answer: Any) -> bool:
    """Exactly equal: rationals by their values; anything else when the two agree to 50 significant digits (which
    rejects nearly every unequal pair at once) and sympy proves their difference 0. Two that agree so far and that
    sympy cannot prove equal or unequal are not judged (``Unreadable``: no verdict)."""
    import sympy

    if isinstance(gold, sympy.Rational) and isinstance(answer, sympy.Rational):
        return gold == answer
    difference = gold - answer
    if difference == 0:
        return True
    digits = 60 + _magnitude(gold)
    # the absolute values of the numbers evaluated (sympy's N of an Abs of a complex expression can come back
    # complex): each a Float
    apart, size = abs(sympy.N(difference, digits)), abs(sympy.N(gold, digits))
    if not (isinstance(apart, sympy.Number) and isinstance(size, sympy.Number)):
        return False
    if apart > sympy.Float(10, digits) ** -50 * max(size, 1):
        return False
    proven = _simplified(difference)
    if proven != 0 and proven.is_zero is not False and difference.has(sympy.I):
        proven = _simplified(difference, by_parts=True)  # e^{i pi/4} against (1 + i)/sqrt(2)
    if proven == 0:
        return True
    if proven.is_zero is False:
        return False
    raise Unreadable(f"sympy cannot decide whether {shown(answer)} equals {shown(gold)} (they agree to 50 "
                     "significant digits)")


def _magnitude(number: Any) -> int:
    """About how many digits ``number``'s whole part has (0 for a small or non-real number)."""
    import sympy

    try:
        value = abs(sympy.N(number, 15))
        return int(sympy.log(value, 10).evalf(5)) + 1 if value.is_number and value > 1 else 0
    except (TypeError, ValueError):
        return 0


def _within(gold: Any, answer: Any, half: Any) -> bool:
    """Whether |gold - answer| <= half, exactly for rationals, else to the digits ``half`` needs and 30 more."""
    import sympy

    difference = abs(gold - answer)
    if isinstance(difference, sympy.Rational):
        return difference <= half
    digits = 30 + _magnitude(gold) + len(str(half.q))
    return bool(sympy.N(difference, digits) <= half)


def _rounded(number: Any, places: int) -> Any:
    """``number`` rounded at ``places`` after the point, half away from zero, as the integer number * 10^places;
    None when it is not a real number."""
    import sympy

    if not _real(number):
        return None
    scaled = number * sympy.Integer(10) ** places
    if not isinstance(scaled, sympy.Rational):  # an irrational is never on a half: enough digits decide it
        scaled = sympy.N(scaled, 30 + _magnitude(number) + places)
        if not isinstance(scaled, sympy.Float):
            return None
    sign = -1 if scaled < 0 else 1
    return sign * sympy.floor(abs(scaled) + sympy.Rational(1, 2))


def _terminates(number: Any) -> bool:
    """Whether an exact rational's decimal expansion ends (its denominator has no prime factor but 2 and 5)."""
    denominator = int(number.q)
    for factor in (2, 5):
        while denominator % factor == 0:
            denominator //= factor
    return denominator == 1


