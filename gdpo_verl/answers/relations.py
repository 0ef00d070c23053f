"""What relations between values state, read fail-closed (gdpo_verl/answers/parsing.py reads the values):

- an equation states a value only as unknown = value (``x = 5``), or, about different unknowns joined by commas or
  "and", a point (``x = 1, y = 2``); an equation between numbers must hold; an equation that is itself an answer
  (a line, a relation between several unknowns) is one value; any other equation, one to solve, is not read;
- ``a \\approx b`` states its most exact member when every decimal member is that one rounded at its places;
- ``v \\pmod{m}`` and ``x \\equiv v \\pmod{m}`` state the residue v, when v is a whole number from 0 to m - 1;
- inequalities about one unknown joined by "or" are the union of their solution sets, by "and" (or commas) the
  intersection; listed apart they are several values;
- a union of sets of values is the set of them.

``stated`` gives the values one parsed piece states, each with the unknown of the inequality it solves.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gdpo_verl.answers.value import Unreadable, Value, shown
from gdpo_verl.answers.grading import is_number, same_number

MODULUS = re.compile(r"(?:\\pmod\s*(?:\{\s*(\d+)\s*\}|(\d+))|\\mod\s*(?:\{\s*(\d+)\s*\}|(\d+))"
                     r"|\(\s*\\(?:bmod|mod)\s*(\d+)\s*\))\s*$")
CONGRUENT = re.compile(r"\\equiv(?![A-Za-z])")
APPROXIMATELY = re.compile(r"\\(?:approx|thickapprox|simeq|doteq)(?![A-Za-z])")


def approximated(values: list[Value], written: str) -> Value:
    """What ``a \\approx b`` states: its most exact member, when every decimal member is that one rounded at its
    own places (``\\pi \\approx 3.14`` states pi; ``x \\approx 0.33`` states 0.33); a value said to approximate
    a different one (``5 \\approx 7``) is not read."""
    import sympy

    unknowns = [value for value in values if isinstance(value.expr, sympy.Symbol)]
    numbers = [value for value in values if is_number(value.expr)]
    if len(unknowns) > 1 or not numbers or len(numbers) + len(unknowns) != len(values):
        raise Unreadable(f"{written[:80]!r}: an approximation is read between numbers, with at most one unknown")
    exact = [value for value in numbers if value.decimals is None and not value.expr.has(sympy.Float)]
    stated = exact[0] if exact else max(numbers, key=lambda value: value.decimals or 0)
    for value in numbers:
        rounded = value.decimals is not None and value is not stated
        if not same_number(value.expr, stated.expr, value.decimals if rounded else None):
            raise Unreadable(f"{written[:80]!r}: {shown(value.expr)} is not {shown(stated.expr)} rounded")
    return stated


def modulus(piece: str) -> tuple[int | None, str]:
    """The modulus m of a piece that ends in ``\\pmod{m}`` (or ``\\pmod m``, ``\\mod m``, ``(\\bmod m)``), and the
    piece before it; (None, piece) otherwise."""
    found = MODULUS.search(piece)
    if found is None:
        return None, piece
    modulus = int(next(group for group in found.groups() if group))
    if modulus < 2:
        raise Unreadable(f"{piece[:80]!r}: a modulus below 2")
    return modulus, piece[:found.start()]


def residue(values: list[Value], modulus: int | None, written: str) -> Value:
    """What ``v \\pmod{m}`` or ``x \\equiv v \\pmod{m}`` states: the residue v, with its modulus, when v is a
    whole number from 0 to m - 1; anything else (``\\equiv`` without a modulus, ``12 \\pmod 7``) is not read."""
    import sympy

    if modulus is None:
        raise Unreadable(f"{written[:80]!r}: \\equiv without a modulus")
    numbers = [value.expr for value in values if not isinstance(value.expr, sympy.Symbol)]
    if len(values) - len(numbers) > 1 or len(set(numbers)) != 1 or not isinstance(numbers[0], sympy.Integer):
        raise Unreadable(f"{written[:80]!r}: a congruence is read as one whole number and at most one unknown")
    if not 0 <= numbers[0] < modulus:
        raise Unreadable(f"{written[:80]!r}: {shown(numbers[0])} is not a residue modulo {shown(modulus)} (0 to "
                         f"{shown(modulus - 1)})")
    return Value(numbers[0], modulus=modulus)


def one_set(expr: Any) -> Any:
    """A union of sets of values as the one set of them (``\\{5\\} \\cup \\{7\\}`` is {5, 7}); anything else as
    it is."""
    import sympy

    if isinstance(expr, sympy.Union):
        parts = [one_set(part) for part in expr.args]  # \{5\} \cup \{7\} \cup \{9\} nests
        if all(isinstance(part, sympy.FiniteSet) for part in parts):
            return sympy.FiniteSet(*(element for part in parts for element in part.args))
    return expr


def equations(expr: Any) -> list[Any] | None:
    """The equations of an equation or an equation chain (``a = b = c`` parses as ``Eq(b, c) & Eq(a, b)``); None
    for anything else."""
    import sympy

    if isinstance(expr, sympy.Eq) and not isinstance(one_set(expr.rhs), sympy.FiniteSet):
        return [expr]
    if isinstance(expr, sympy.And) and all(isinstance(arg, sympy.Eq) for arg in expr.args):
        return list(expr.args)
    if isinstance(expr, sympy.logic.boolalg.BooleanAtom):  # sympy decided an equation between numbers
        raise Unreadable("an equation between numbers that does not hold")
    return None


def equation_value(equations: list[Any], written: str) -> tuple[Any, Any]:
    """What an equation (chain) states. Every member without an unknown must be the same number (``7 = 5`` is a
    false claim, not a value). One unknown alone on a side with numbers on the others states the number
    (``x = 5``). An equation that is itself the answer (a line, a curve) is one value, compared only with an
    equation: one unknown alone on a side of an expression without it (``y = 2x - 1``), or a relation between
    several unknowns (``2x - y + 3 = 0``). Any other equation is one to solve (``7y = 5``, ``|x| = 5``,
    ``y + 7 = 5``, ``x = 2x + 3``): not read."""
    import sympy

    members = list(dict.fromkeys(side for equation in equations for side in (equation.lhs, equation.rhs)))
    numbers = [member for member in members if not member.free_symbols]
    for number in numbers[1:]:
        if not same_number(numbers[0], number):
            raise Unreadable(f"{written[:80]!r} claims that {shown(numbers[0])} equals {shown(number)}")
    unknowns = [member for member in members if isinstance(member, sympy.Symbol)]
    others = [member for member in members if member.free_symbols and not isinstance(member, sympy.Symbol)]
    if numbers and len(unknowns) <= 1 and not others:
        value = numbers[0]
        return (sympy.Eq(unknowns[0], value, evaluate=False) if unknowns else value), None
    if len(equations) > 1:
        raise Unreadable(f"{written[:80]!r}: an equation chain with unknowns on several sides")
    equation = equations[0]
    if not all(isinstance(side, sympy.Expr) for side in (equation.lhs, equation.rhs)):  # (x, y) = (1, 2)
        raise Unreadable(f"{written[:80]!r}: an equation between tuples, sets or intervals")
    alone = [side for side, other in ((equation.lhs, equation.rhs), (equation.rhs, equation.lhs))
             if isinstance(side, sympy.Symbol) and side not in other.free_symbols]
    if alone or len(equation.free_symbols) > 1:
        return equation, None
    raise Unreadable(f"{written[:80]!r} is an equation to solve, not a value (an unknown = a value is read)")


def labelled(values: list[Value]) -> list[Value]:
    """``x = v`` states v when every equation among the values is about the same one unknown (``x = 2`` and
    ``x = 3``: two values of x). Equations about different unknowns, each with a number, joined by commas or
    "and", are one labelled point (``x = 1, y = 2``), its coordinates in the order of the unknowns' names; joined
    by "or" they are several values; listed apart (a line break, an arrow) they are not read."""
    import sympy

    def labelled(value: Value) -> bool:
        expr = value.expr
        return isinstance(expr, sympy.Eq) and isinstance(expr.lhs, sympy.Symbol) and not expr.rhs.free_symbols

    equations = [value for value in values if labelled(value)]
    if not equations:
        return values
    sides = {value.expr.lhs for value in equations}
    if len(sides) == 1:
        return [replace(value, expr=value.expr.rhs) if labelled(value) else value for value in values]
    if len(equations) != len(values) or len(sides) != len(equations):
        return values  # equations beside other values, or an unknown given twice: compared as written
    joins = {value.join for value in values[1:]}
    if "or" in joins:  # x = 5 or y = 7: two statements, not a point
        return values
    if joins != {"and"}:
        raise Unreadable("equations about different unknowns listed apart: a point is written with commas or and")
    bases = {re.sub(r"_.*", "", str(value.expr.lhs)) for value in equations}
    if len(bases) == 1:  # x_1 = 2, x_2 = 3: the roots, or a point? Not read
        raise Unreadable("equations about one letter's subscripts: a list of values or a point?")
    ordered = sorted(equations, key=lambda value: str(value.expr.lhs))
    return [Value(sympy.Tuple(*(value.expr.rhs for value in ordered)),
                  labels=tuple(str(value.expr.lhs) for value in ordered))]


def joined_sets(values: list[Value]) -> list[Value]:
    """Inequalities about one unknown: one value, the union of their solution sets when "or" joins them all
    (``x < 1 \\text{ or } x > 2``), their intersection when "and" or commas do (``x > 1, x < 3``); listed apart
    (``x \\geq 3 \\\\ x \\geq 1``) they are several values, and "and" beside "or" is not read."""
    import sympy

    unknowns = {value.unknown for value in values}
    if len(values) < 2 or None in unknowns or len(unknowns) != 1:
        return values
    sets = [value.expr for value in values]
    joins = {value.join for value in values[1:]}
    if joins == {"or"}:
        return [Value(sympy.Union(*sets))]
    if joins == {"and"}:
        return [Value(sympy.Intersection(*sets))]
    if joins == {"or", "and"}:
        raise Unreadable("inequalities joined by both \"and\" and \"or\"")
    return values  # listed apart (a line break, an arrow): several values


def ray(expr: Any, unknown: Any) -> Any:
    """The solution set of an inequality between the unknown alone and a real number (``x \\geq 3``,
    ``3 < x``), as sympy's ``as_set`` gives it, without its solver (tens of milliseconds); None for any other."""
    import sympy

    relational = sympy.core.relational
    kinds = {relational.StrictGreaterThan: (True, True), relational.GreaterThan: (True, False),
             relational.StrictLessThan: (False, True), relational.LessThan: (False, False)}
    if type(expr) not in kinds:
        return None
    above, strict = kinds[type(expr)]
    side, bound = expr.lhs, expr.rhs
    if side != unknown:
        side, bound, above = bound, side, not above  # 3 < x is x > 3
    if side != unknown or not (bound.is_number and bound.is_real and bound.is_finite):
        return None
    if above:
        return sympy.Interval(bound, sympy.oo, left_open=strict, right_open=True)
    return sympy.Interval(-sympy.oo, bound, left_open=True, right_open=strict)


def stated(expr: Any, written: str) -> list[tuple[Any, Any]]:
    """The values one parsed piece states, each with the unknown of the inequality it solves (or None)."""
    import sympy

    expr = one_set(expr)
    if isinstance(expr, sympy.FiniteSet):
        braces = "\\{" in written  # a set written as one: \{\{5\}\}, \{[4,4]\} (a box in a box, {5}, is grouping)
        if any(element is sympy.S.EmptySet or braces and isinstance(element, sympy.Set) for element in expr.args):
            raise Unreadable(f"{written[:80]!r}: a set of sets")  # not a list of values
        return [found for element in expr.args for found in stated(element, written)]
    parts = expr.args if isinstance(expr, sympy.Tuple) else (expr.start, expr.end) if isinstance(
        expr, sympy.Interval) else ()
    if any(isinstance(part, sympy.core.relational.Relational) for part in parts):
        raise Unreadable(f"{written[:80]!r}: equations inside a tuple")  # (x = 5, x = 7)
    system = equations(expr)
    if system is not None:
        return [equation_value(system, written)]
    listed = one_set(expr.rhs) if isinstance(expr, sympy.Eq) else None
    if isinstance(listed, sympy.FiniteSet):  # x = 2, 3 or x \in \{2, 3\}
        return [(sympy.Eq(expr.lhs, element, evaluate=False), None) for element in listed.args]
    if isinstance(expr, sympy.Ne) and not expr.free_symbols:
        raise Unreadable(f"{written[:80]!r}: an inequation between values states none")
    inequality = (sympy.core.relational.Relational, sympy.And, sympy.Or)
    if isinstance(expr, inequality) and len(expr.free_symbols) == 1:
        try:
            unknown = next(iter(expr.free_symbols))
            solutions = ray(expr, unknown) or expr.as_set()
            if isinstance(solutions, sympy.FiniteSet):  # (x-5)^2(x-7)^2 <= 0: the values 5 and 7
                return [(element, None) for element in solutions.args]
            return [(solutions, unknown)]
        except (NotImplementedError, TypeError, ValueError):  # sympy cannot solve it: the inequality as written
            return [(expr, None)]
    return [(expr, None)]
