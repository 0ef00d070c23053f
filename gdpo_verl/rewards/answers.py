"""What a final answer states: the collection of values in its boxes, read whole with math-verify's LaTeX parser,
and the rule that credits it.

math-verify, asked for the value of a box, reads the box whole when it can and otherwise falls back to the last
number or equation it finds in it: ``\\boxed{x=7 \\land x=5}`` reads as 5, ``\\boxed{5 \\text{ (or 7)}}`` as 5.
A policy learns to list several values and collect the credit of whichever is right. This reader never falls
back. A box's content is placed whole, or the answer is not read:

- a box is split into its pieces at the places an answer lists values: a line break (``\\\\``, ``\\newline``,
  ``\\cr``), a semicolon, ``\\quad``, a logical connective (``\\lor``, ``\\land``, ``\\vee``, ``\\wedge``), an
  arrow (``\\to``, ``\\Rightarrow``...), "or" and "and" (in ``\\text{}`` or not), a new math segment (``$``),
  and a space between two numbers (``7 5``, which the parser would read as the mixed number 7 + 5). Only at the top
  level: inside braces, brackets and environments nothing splits;
- each piece must parse whole (latex2sympy, math-verify's LaTeX parser, with math-verify's normalization but
  not its removal of text). A ``\\text{}`` holding only words after a value is a unit or a label and is left
  out (``5 \\text{ cm}``); a ``\\text{}`` holding anything else (``5 \\text{ (or 7)}``) cannot be placed, and
  the answer is not read (``Unreadable``, with the reason): it is then never credited;
- a piece states values: a set or a comma list states each of its elements (``2, 3``, ``\\{1, 2\\}``, ``\\pm 2``
  is {2, -2}, ``x = 2, 3``); ``x = v`` states v when every equation of the answer is about the same unknown
  (``a = 1, b = 2`` stays a labelled pair); an inequality in one unknown states its solution set (``x \\geq 3``
  is ``[3, \\infty)``); a tuple, an interval or a union of intervals, a matrix and any expression is one value;
  a multiple-choice letter (``\\textbf{(C)}\\ 5``, ``(C)``, ``C``) is one value, with the value written after it;
- values equal to one another count once.

The gold is read by the same reader. ``judge`` credits an answer when its values and the gold's are the same
collection: each answer value equal to a different gold value, order-free (a list or set of solutions; an
ordered object, a tuple or a point, is one value and compares in order). More distinct values than the gold is
a hedge (never credited, whichever is right); fewer is wrong.

Numbers compare by value: exactly when both are exact; when a decimal is involved, within 1e-6 relative, or
within the gold's own rounding when the gold is written as a decimal (a gold of ``0.33`` takes ``\\frac{1}{3}``;
``0.0000004`` is not ``0.0000001``). Anything else (sets, intervals, matrices, expressions with unknowns,
equations) compares with math-verify's ``verify``.

Everything here imports sympy, latex2sympy2_extended and math-verify when first used; it runs in the checker
processes of ``gdpo_verl.rewards.verifier`` (under their deadline) and in ``scripts/prepare_data.py``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any


class Unreadable(ValueError):
    """The text holds something the reader cannot place as values; the message says what."""


@dataclass(frozen=True)
class Value:
    """One stated value: a sympy object (``expr``), a multiple-choice letter (``choice``), or both (a letter with
    the value written after it). ``decimals``: places after the point when written as a decimal literal."""

    expr: Any = None
    choice: str | None = None
    decimals: int | None = None
    unknown: Any = None  # the one unknown of the inequality whose solution set ``expr`` is


# ------------------------------------------------------------------------------------------------ reading

# Where an answer lists values (only at the top level: see _pieces).
_SEPARATOR = re.compile(
    r"\\\\(?:\[[^\]]*\])?"
    r"|\\(?:newline|cr|quad|qquad|lor|land|vee|wedge|to|rightarrow|Rightarrow|longrightarrow|Longrightarrow"
    r"|implies|iff|Leftrightarrow|leftrightarrow)(?![A-Za-z])"
    r"|[;$]"
    r"|(?<![A-Za-z\\])(?:or|and)(?![A-Za-z])"  # the words, written in math mode (outside \\text)
)
# A space (or a spacing command) between two number literals: two values, not a mixed number. The first number
# stands alone (not a subscript, an exponent or part of a name: \log_2 8 is one value).
_NUMBER_GAP = re.compile(r"(?<![\w^_.\\])(\d+(?:\.\d*)?)(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))+(?=[+-]?\.?\d)")
_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|textnormal|operatorname)\s*\{")
_WORDS = re.compile(r"[A-Za-z][A-Za-z' .-]*")
_CONNECTIVE = re.compile(r"[\s,.;]*(?:(?:or|and)(?![A-Za-z])[\s,.;]*)*", re.IGNORECASE)
_BEGIN = re.compile(r"\\begin\s*\{([^{}]*)\}")
_CHOICE = re.compile(
    r"(?:\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(\s*([A-E])\s*\)\s*\}"  # \textbf{(C)}
    r"|\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*([A-E])\s*\}"  # \text{C}
    r"|\(\s*([A-E])\s*\))"  # (C)
    r"(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))*(.*)",
    re.DOTALL,
)
_LONE_LETTER = re.compile(r"\s*([A-E])\s*")
_CHOICE_LETTER = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(?\s*([A-E])\s*\)?\s*\}|\(\s*([A-E])\s*\)")
_DECIMAL = re.compile(r"\s*[+-]?\d*\.(\d+)\s*")
_UNKNOWN_IS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*=")
_EMPTY_SET = re.compile(r"\\varnothing(?![A-Za-z])|\\O(?![A-Za-z])")
# The names latex2sympy gives to what it reads (letters, Greek letters, subscripts): anything else in a symbol's
# name is text it took in whole.
_SYMBOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_{}]*'*")


def read(text: str) -> list[Value]:
    """The distinct values ``text`` (a box's content, or a gold answer) states; ``Unreadable`` when some of it
    cannot be placed."""
    values = _read(text)
    if not values:
        raise Unreadable("it states no value")
    return distinct(values)


def read_all(texts: list[str]) -> list[Value]:
    """The distinct values of several boxes, as one collection."""
    values = [value for text in texts for value in _read(text)]
    if not values:
        raise Unreadable("no box states a value")
    return distinct(values)


class _Choices(Exception):  # noqa: N818 - a signal inside _choice, not an error
    def __init__(self, letters: list[str]) -> None:
        super().__init__(letters)
        self.letters = letters


def _read(text: str) -> list[Value]:
    text = _EMPTY_SET.sub(r"\\emptyset", text.strip())
    try:
        choice = _choice(text)
    except _Choices as several:
        return [Value(choice=letter) for letter in several.letters]
    if choice is not None:
        return [choice]
    values: list[Value] = []
    for piece in _pieces(text):
        values.extend(_piece_values(piece))
    return _union_of_inequalities(_unwrap_equations(values))


def _choice(text: str) -> Value | None:
    """A multiple-choice letter, alone or with its value after it; None when ``text`` is not one."""
    lone = _LONE_LETTER.fullmatch(text)
    if lone:
        return Value(choice=lone.group(1))
    found = _CHOICE.fullmatch(text)
    if not found:
        return None
    letter = next(group for group in found.groups()[:3] if group)
    rest = found.group(4).strip()
    if not rest:
        return Value(choice=letter)
    others = _CHOICE_LETTER.findall(rest)
    if others:  # "(C) or (D)": several choices
        raise _Choices([letter, *(next(group for group in other if group) for other in others)])
    values = _read(rest)
    if len(distinct(values)) != 1:
        raise Unreadable(f"choice {letter} is followed by {len(values)} values: {rest[:80]!r}")
    return Value(values[0].expr, choice=letter, decimals=values[0].decimals)


_SPLIT = "\x00"  # where a piece ends, in the text _pieces rewrites


def _pieces(text: str) -> list[str]:
    """``text`` split where it lists values, at the top level only; text groups resolved (see the module)."""
    out: list[str] = []
    depth, position = 0, 0
    while position < len(text):
        character = text[position]
        if depth == 0:
            begin = _BEGIN.match(text, position)
            if begin:
                closing = f"\\end{{{begin.group(1)}}}"
                end = text.find(closing, begin.end())
                if end < 0:
                    raise Unreadable(f"\\begin{{{begin.group(1)}}} without its \\end")
                out.append(text[position:end + len(closing)])
                position = end + len(closing)
                continue
            group = _TEXT.match(text, position)
            if group:
                content, after = _group(text, group.end() - 1)
                out.append(_SPLIT if _CONNECTIVE.fullmatch(content) else _text_group(text[position:after], content,
                                                                                     text))
                position = after
                continue
            separator = _SEPARATOR.match(text, position)
            if separator:
                out.append(_SPLIT)
                position = separator.end()
                continue
        if character == "\\" and position + 1 < len(text) and not text[position + 1].isalpha():
            out.append(text[position:position + 2])  # an escaped character: \{ \} \, (no nesting)
            position += 2
            continue
        if character in "{[(":
            depth += 1
        elif character in "}])":
            depth = max(0, depth - 1)
        out.append(character)
        position += 1
    # a space between two numbers, once the text groups are gone: "5 \text{ or } 7" and "7 \quad 5" alike
    rewritten = _NUMBER_GAP.sub(lambda number: number.group(1) + _SPLIT, "".join(out))
    return [piece for piece in (piece.strip() for piece in rewritten.split(_SPLIT)) if piece]


def _group(text: str, opening: int) -> tuple[str, int]:
    """The content of the brace group opening at ``opening`` and the position after it."""
    depth = 0
    for position in range(opening, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[opening + 1:position], position + 1
    raise Unreadable("a brace that never closes")


def _text_group(whole: str, content: str, text: str) -> str:
    """What a top-level ``\\text{...}`` stands for: itself when it is the answer's only content (a word answer,
    a letter), nothing when it holds only words beside a value (a unit, a label); anything else cannot be
    placed."""
    if not _WORDS.fullmatch(content.strip()):
        raise Unreadable(f"text the reader cannot place: {content.strip()[:80]!r}")
    if text.strip() == whole.strip():
        return whole
    return " "


def _piece_values(piece: str) -> list[Value]:
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
    from math_verify.parser import should_treat_as_complex

    # math-verify's normalization of a box, without its removal of units and text (which drops what it cannot
    # read: "5 \text{ (or 7)}" would become "5")
    config = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all",
                                 equations=False)
    normalized = normalize_latex(piece, config).strip()
    if not normalized:
        return []
    try:
        expr = latex2sympy(normalized, is_real=not should_treat_as_complex(normalized), convert_degrees=False,
                           normalization_config=None)
    except Exception as error:  # latex2sympy raises plain Exceptions for text it cannot parse
        raise Unreadable(f"{normalized[:80]!r} does not parse whole: {str(error).splitlines()[0][:80]}") from None
    _no_stray_text(expr, normalized)
    decimals = _decimals(normalized)
    return [Value(_exact(value), decimals=decimals.get(_float_key(value)), unknown=unknown)
            for value, unknown in _stated(expr)]


def _no_stray_text(expr: Any, normalized: str) -> None:
    for symbol in getattr(expr, "free_symbols", ()):
        if not _SYMBOL_NAME.fullmatch(str(symbol)):
            raise Unreadable(f"{normalized[:80]!r} holds text the reader cannot place: {str(symbol)[:40]!r}")


def _stated(expr: Any) -> list[tuple[Any, Any]]:
    """The values one parsed piece states, each with the unknown of the inequality it solves (or None)."""
    import sympy

    if isinstance(expr, sympy.FiniteSet):
        return [stated for element in expr.args for stated in _stated(element)]
    if isinstance(expr, sympy.Eq) and isinstance(expr.rhs, sympy.FiniteSet):
        return [(sympy.Eq(expr.lhs, element, evaluate=False), None) for element in expr.rhs.args]
    inequality = (sympy.core.relational.Relational, sympy.And, sympy.Or)
    if isinstance(expr, inequality) and not isinstance(expr, (sympy.Eq, sympy.Ne)) and len(expr.free_symbols) == 1:
        try:
            return [(expr.as_set(), next(iter(expr.free_symbols)))]
        except (NotImplementedError, TypeError, ValueError):  # sympy cannot solve it: the inequality as written
            return [(expr, None)]
    return [(expr, None)]


def _union_of_inequalities(values: list[Value]) -> list[Value]:
    """Inequalities about one unknown, listed (``x < 1 \\text{ or } x > 2``): one value, the union of their
    solution sets."""
    import sympy

    unknowns = {value.unknown for value in values}
    if len(values) < 2 or None in unknowns or len(unknowns) != 1:
        return values
    return [Value(sympy.Union(*(value.expr for value in values)))]


def _unwrap_equations(values: list[Value]) -> list[Value]:
    """``x = v`` states v when every equation among the values is about the same one unknown (``x = 2`` and
    ``x = 3``: two values of x); equations about different unknowns stay equations (a labelled solution)."""
    import sympy

    equations = [value.expr for value in values if isinstance(value.expr, sympy.Eq)]
    sides = {equation.lhs for equation in equations}
    if not equations or len(sides) != 1 or not isinstance(next(iter(sides)), sympy.Symbol):
        return values
    return [Value(value.expr.rhs, value.choice, value.decimals) if isinstance(value.expr, sympy.Eq) else value
            for value in values]


def _decimals(normalized: str) -> dict[float, int]:
    """Places after the point of each decimal literal of a piece that is a decimal or a comma list of them (each
    perhaps written ``x = 0.5``)."""
    found = {}
    for part in normalized.split(","):
        part = _UNKNOWN_IS.sub("", part)
        literal = _DECIMAL.fullmatch(part)
        if literal is None:
            if not re.fullmatch(r"\s*[+-]?\d+\s*", part):
                return {}
            continue
        found[float(part)] = len(literal.group(1))
    return found


def _float_key(value: Any) -> float | None:
    import sympy

    return float(value) if isinstance(value, sympy.Float) else None


def _exact(value: Any) -> Any:
    """An arithmetic expression of integers (``2^{2^{11}}``, which sympy keeps unevaluated) evaluated exactly, so
    that equal numbers compare equal; anything else as read. The answer guards bound its size."""
    import sympy

    if not isinstance(value, sympy.Expr) or value.free_symbols:
        return value
    kinds = (sympy.Pow, sympy.Mul, sympy.Add, sympy.Integer, sympy.Rational)
    if all(isinstance(node, kinds) for node in sympy.preorder_traversal(value)):
        return value.doit()
    return value


def distinct(values: list[Value]) -> list[Value]:
    """``values`` with each value equal to an earlier one left out."""
    kept: list[Value] = []
    for value in values:
        if not any(same(earlier, value) and same(value, earlier) for earlier in kept):
            kept.append(value)
    return kept


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
    if gold.choice is not None:
        if answer.choice != gold.choice:
            return False
        return gold.expr is None or answer.expr is None or _same_expr(gold, answer)
    if answer.expr is None:
        return False
    return _same_expr(gold, answer)


def _same_expr(gold: Value, answer: Value) -> bool:
    from math_verify import verify

    if _is_number(gold.expr) and _is_number(answer.expr):
        return _same_number(gold.expr, answer.expr, gold.decimals)
    return bool(verify(gold.expr, answer.expr, timeout_seconds=None))


def _is_number(expr: Any) -> bool:
    import sympy

    return (isinstance(expr, sympy.Expr) and not expr.free_symbols and bool(expr.is_number)
            and expr.is_finite is not False)


def _same_number(gold: Any, answer: Any, decimals: int | None) -> bool:
    """Exactly equal when both are exact; within 1e-6 relative, or the gold's own rounding when it is written as
    a decimal with ``decimals`` places, when either is a decimal. In sympy's floats, whose exponents do not
    overflow (a 20,000-digit integer is a number too)."""
    import sympy

    gold, answer = gold.doit(), answer.doit()
    if isinstance(gold, sympy.Rational) and isinstance(answer, sympy.Rational):
        return gold == answer
    difference = abs(sympy.N(gold - answer, 60))
    scale = max(abs(sympy.N(gold, 60)), abs(sympy.N(answer, 60)), key=lambda size: size if size.is_Number else 0)
    if not (difference.is_Number and scale.is_Number):  # sympy could not evaluate it as a number
        from math_verify import verify

        return bool(verify(gold, answer, timeout_seconds=None))
    if not (gold.has(sympy.Float) or answer.has(sympy.Float)):
        return bool(difference <= sympy.Float("1e-40") * max(1, scale))
    tolerance = sympy.Float("1e-6") * scale
    if decimals is not None:
        tolerance = max(tolerance, sympy.Float(0.5 * 10.0 ** -decimals * (1 + 1e-9)))
    return bool(difference <= tolerance)
