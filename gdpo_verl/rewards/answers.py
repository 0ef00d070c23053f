"""What a final answer states: the collection of values in its boxes, read whole with math-verify's LaTeX parser,
and the rule that credits it.

math-verify, asked for the value of a box, reads the box whole when it can and otherwise falls back to the last
number or equation it finds in it: ``\\boxed{x=7 \\land x=5}`` reads as 5, ``\\boxed{5 \\text{ (or 7)}}`` as 5.
A policy learns to list several values and collect the credit of whichever is right. This reader never falls
back. A box's content is placed whole, or the answer is not read (``Unreadable``, with the reason; the reward
then never credits it):

- the boxes: every box command (``\\boxed``, ``\\fbox``, ``\\framebox``, ``\\colorbox``, ``\\fcolorbox``,
  ``\\bbox``), with its content in braces or a single token after it (``\\boxed 5``); a box inside a box is read
  in place, with whatever surrounds it;
- a box is split into pieces at the places an answer lists values, at the top level only (inside braces,
  brackets and environments nothing splits): a line break (``\\\\``, ``\\newline``, ``\\cr``), a semicolon,
  ``\\quad``, a new math segment (``$``), an arrow (``\\to``, ``\\Rightarrow``...) and a space between two numbers
  (``7 5``, which the parser would read as the mixed number 7 + 5) list values; ``\\lor``, ``\\vee`` and "or"
  join alternatives; ``\\land``, ``\\wedge`` and "and" join conditions. The words count in ``\\text{}`` or not;
- a ``\\text{}`` (or ``\\mbox``, ``\\textbf``, ``\\mathrm``...) holding anything but words is read as math
  (``\\textbf{5}`` is 5; ``\\text{(or 7)}`` cannot be placed). Words are a value of their own when they are a
  whole piece (``\\text{seven}``), a unit after a value (``5 \\text{ cm}``, ``5 \\text{ cm}^2``: the exponent
  belongs to the unit), or a label before one (``\\text{Area} = 5``, ``\\text{Answer: } 5``). Words that change
  what a value means (``\\text{not } 5``, ``5 \\text{ at most}``), or words before a value that are not a label,
  cannot be placed;
- each piece must parse whole (latex2sympy, math-verify's LaTeX parser, with math-verify's normalization but not
  its removal of text); ``\\pm`` and ``\\mp`` anywhere give two readings (``\\frac{1 \\pm \\sqrt{5}}{2}`` states
  two values); a number with a subscript is a number in that base (``1011_2``), compared as written, and any
  other subscript on a number cannot be placed;
- a piece states values: a set or a comma list states each of its elements (``2, 3``, ``\\{1, 2\\}``,
  ``x = 2, 3``); ``x = v`` states v when every equation of the answer is about the same one unknown; equations
  about different unknowns (``x = 1, y = 2``) state one point, its coordinates in the order of the unknowns'
  names; an equation between numbers must hold (``7 = 5`` cannot be placed; ``2 + 3 = 5`` states 5); an
  inequality in one unknown states its solution set (``x \\geq 3`` is ``[3, \\infty)``), and such sets joined by
  "or" make their union, by "and" (or a comma) their intersection; a tuple, an interval or a union of intervals,
  a matrix and any expression is one value; a multiple-choice letter (``\\textbf{(C)}\\ 5``, ``(C)``, ``C``) is
  one value, with the value written after it;
- values equal to one another count once.

The gold is read by the same reader. ``judge`` credits an answer when its values and the gold's are the same
collection: each answer value equal to a different gold value, order-free (a list or set of solutions; an
ordered object, a tuple or a point, is one value and compares in order). More distinct values than the gold is
a hedge (never credited, whichever is right); fewer is wrong.

Numbers compare by value: exactly when both are exact. A decimal states its value to half a unit of its last
written place: it answers an exact gold when the gold lies within that and it has at least six significant
digits (``1.414214`` is ``\\sqrt{2}``, ``1.414`` is not); a gold written as a decimal is answered by what rounds
to it at its places (a gold of ``0.33`` takes ``\\frac{1}{3}``; ``0.0000004`` is not ``0.0000001``; ``2.55``
answers ``2.6``, not ``2.5``). A decimal whose written places are not known (``1.5 \\times 10^{3}``) must equal
the gold. A percent answers the number and its hundredth (``20\\%`` for a gold of 20 or of 0.2). Two values with
units compare their units too. Anything else (sets, intervals, matrices, expressions with unknowns, equations)
compares with math-verify's ``verify``.

Everything here imports sympy, latex2sympy2_extended and math-verify when first used; it runs in the checker
processes of ``gdpo_verl.rewards.verifier`` (under their deadline) and in ``scripts/prepare_data.py``.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import re
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

# latex2sympy2_extended ships one parser per ANTLR runtime, generated from different versions of its grammar, and
# picks the one of the runtime installed: they read answers differently (``2\\Gamma``, ``\\gamma``). verl's
# hydra-core pins the runtime to 4.9, so that is the parser a training run's reward reads with, and the one the
# table of answers in docs/math-length.md is checked on. gdpo-verl pins it too (pyproject.toml).
ANTLR_RUNTIME = "4.9.3"


def check_parser() -> None:
    """RuntimeError naming the fix when the installed ANTLR runtime is not the one the reader is checked on (read
    from the package metadata: nothing heavy is imported)."""
    try:
        installed = metadata.version("antlr4-python3-runtime")
    except metadata.PackageNotFoundError:
        installed = "none"
    if installed != ANTLR_RUNTIME:
        raise RuntimeError(
            f"the math answer reader reads with latex2sympy's parser for ANTLR runtime {ANTLR_RUNTIME} (the "
            f"version verl's hydra-core pins), and this environment has antlr4-python3-runtime {installed}, whose "
            f"parser reads some answers differently; pip install antlr4-python3-runtime=={ANTLR_RUNTIME}."
        )


@functools.cache
def _latex2sympy() -> Any:
    """latex2sympy, after ``check_parser()``, with the one gap of its parser for ANTLR 4.9.3 filled.

    latex2sympy2_extended 1.11's converter asks every atom past a variable whether it is a ``FUNC_GAMMA``, an
    alternative its 4.9.3 parser's atom rule does not have: every percentage (``20\\%``) raised AttributeError,
    and was "not read". The accessor added is the one ANTLR generates for a token the rule can hold; in this rule
    it always answers None, as the rule never holds one.
    """
    check_parser()
    from latex2sympy2_extended import latex2sympy
    from latex2sympy2_extended.antlr_parser import PSParser

    atom = PSParser.AtomContext
    if not hasattr(atom, "FUNC_GAMMA"):
        atom.FUNC_GAMMA = lambda self: self.getToken(PSParser.FUNC_GAMMA, 0)
    return latex2sympy


class Unreadable(ValueError):
    """The text holds something the reader cannot place as values; the message says what."""


@dataclass(frozen=True)
class Value:
    """One stated value: a sympy object (``expr``), a multiple-choice letter (``choice``), or both (a letter with
    the value written after it); how it was written (``decimals``: places after the point of a decimal literal;
    ``literal``: a number in another base, as written; ``percent``; ``unit``; ``labels``: the unknowns of a
    labelled point, in the order of ``expr``'s coordinates)."""

    expr: Any = None
    choice: str | None = None
    decimals: int | None = None
    literal: str | None = None
    percent: bool = False
    unit: str | None = None
    labels: tuple[str, ...] | None = None
    unknown: Any = None  # while reading: the one unknown of the inequality whose solution set ``expr`` is
    join: str = "list"  # while reading: how it joins the value before it ("or", "and" or "list")


# ------------------------------------------------------------------------------------------------ boxes

_BOX = re.compile(r"\\(boxed|fbox|framebox|colorbox|fcolorbox|bbox)(?![A-Za-z])")
_GROUP_ARGUMENTS = {"colorbox": 1, "fcolorbox": 2}  # brace groups before the content: colours


def boxes(text: str) -> list[str]:
    """The content of every box command in ``text``, in order (a box inside a box is part of the outer one's
    content); ``Unreadable`` when a box never closes."""
    found = []
    position = 0
    while (box := _BOX.search(text, position)) is not None:
        content, position = _box_content(text, box)
        found.append(content)
    return found


def _box_content(text: str, box: re.Match) -> tuple[str, int]:
    """The content of the box command ``box`` and the position after it: a brace group, or one token (a digit,
    a letter or a command) after optional spaces."""
    position = _skip_space(text, box.end())
    if position < len(text) and text[position] == "[":  # \framebox[width], \bbox[style]
        closing = text.find("]", position)
        if closing < 0:
            raise Unreadable(f"\\{box.group(1)}[ never closes")
        position = _skip_space(text, closing + 1)
    for _ in range(_GROUP_ARGUMENTS.get(box.group(1), 0)):
        _, position = _group(text, position)
        position = _skip_space(text, position)
    if position < len(text) and text[position] == "{":
        content, position = _group(text, position)
        return content.strip(), position
    token = re.match(r"\\[A-Za-z]+|\\.|\S", text[position:])
    if token is None:
        raise Unreadable(f"\\{box.group(1)} with nothing after it")
    return token.group(), position + token.end()


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _group(text: str, opening: int) -> tuple[str, int]:
    """The content of the brace group opening at ``opening`` and the position after it."""
    if opening >= len(text) or text[opening] != "{":
        raise Unreadable("a brace group was expected")
    depth = 0
    position = opening
    while position < len(text):
        character = text[position]
        if character == "\\":
            position += 2
            continue
        if character == "{":
            depth += 1
        elif character == "}":
            depth -= 1
            if depth == 0:
                return text[opening + 1:position], position + 1
        position += 1
    raise Unreadable("a brace that never closes")


# ------------------------------------------------------------------------------------------------ reading

# Where an answer lists or joins values (only at the top level: see _pieces), and how.
_SEPARATOR = re.compile(
    r"(?P<list>\\\\(?:\[[^\]]*\])?|\\(?:newline|cr|quad|qquad|to|rightarrow|Rightarrow|longrightarrow"
    r"|Longrightarrow|implies|iff|Leftrightarrow|leftrightarrow)(?![A-Za-z])|[;$])"
    r"|(?P<or>\\(?:lor|vee)(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z]))"
    r"|(?P<and>\\(?:land|wedge)(?![A-Za-z])|(?<![A-Za-z\\])and(?![A-Za-z]))"
)
# A space (or a spacing command) between two number literals: two values, not a mixed number. The first number
# stands alone (not a subscript, an exponent or part of a name: \log_2 8 is one value).
_NUMBER_GAP = re.compile(r"(?<![\w^_.\\])(\d+(?:\.\d*)?)(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))+(?=[+-]?\.?\d)")
_SPACING = re.compile(r"(\\\\)|\\[ ,;:!>]|~|\\(?:quad|qquad|thinspace|medspace|thickspace|displaystyle|textstyle)"
                      r"(?![A-Za-z])")  # (a line break, \\\\, is kept)
_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|textsf|textnormal|mathrm|mathbf|mathit|mathsf|mbox"
                   r"|operatorname|boldsymbol)\s*(?=\{)")
_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")
# Words that change what a value means: a unit or a label holding one cannot be left out.
_QUALIFIERS = {"not", "no", "nor", "never", "except", "unless", "either", "neither", "maybe", "possibly", "perhaps",
               "or", "and", "at", "most", "least", "less", "more", "than", "about", "approximately", "around",
               "nearly", "almost", "over", "under", "above", "below", "only", "if", "else", "otherwise", "both",
               "none", "all", "any", "some", "every", "each", "plus", "minus", "times", "negative", "positive",
               "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred",
               "thousand", "million", "half", "third", "quarter", "twice", "double", "triple"}
_CONNECTIVES = {"or": "or", "and": "and"}
_BEGIN = re.compile(r"\\begin\s*\{([^{}]*)\}")
_CHOICE = re.compile(
    r"(?:\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(\s*([A-E])\s*\)\s*\}"  # \textbf{(C)}
    r"|\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*([A-E])\s*\}"  # \text{C}
    r"|\(\s*([A-E])\s*\))"  # (C)
    r"(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))*(.*)",
    re.DOTALL,
)
_LONE_LETTER = re.compile(r"\s*([A-E])\s*")
_CHOICE_LETTER = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(?\s*([A-E])\s*\)?\s*\}|\(\s*([A-E])\s*\)"
                            r"|(?<![A-Za-z\\])([A-E])(?![A-Za-z])")
_DECIMAL = re.compile(r"\s*[+-]?\d*\.(\d+)\s*")
_UNKNOWN_IS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*=")
_BASE = re.compile(r"\s*(\d+)\s*_\s*\{?\s*(\d+)\s*\}?\s*")
_SUBSCRIPTED_NUMBER = re.compile(r"(?<![A-Za-z\\])\d\s*_")
_EMPTY_SET = re.compile(r"\\varnothing(?![A-Za-z])|\\O(?![A-Za-z])")
_DELIMITERS = re.compile(r"(?<!\\)\\[\[\]()]|\\left\s*\.|\\right\s*\.")  # \[ \] \( \), not the line break \\[
_PLUS_MINUS = re.compile(r"\\(pm|mp)(?![A-Za-z])")
# The names latex2sympy gives to what it reads (letters, Greek letters, subscripts): anything else in a symbol's
# name is text it took in whole.
_SYMBOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_{}]*'*")
_MAX_PLUS_MINUS = 3


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


def _read(text: str) -> list[Value]:
    text = _prepared(text)
    choice = _choice(text)
    if choice is not None:
        return choice
    values: list[Value] = []
    for piece, join, unit in _pieces(text):
        stated = _piece_values(piece)
        values += [replace(value, join=join if index == 0 else "and", unit=unit) for index, value in enumerate(stated)]
    return _joined_sets(_labelled(values))


def _prepared(text: str) -> str:
    """``text`` with what only presents a value taken away: a box inside (read in place), display delimiters,
    ``\\left.``/``\\right.``, trailing punctuation; the degree sign and ``\\varnothing`` spelled as LaTeX reads them."""
    for _ in range(8):  # boxes in boxes, from the outside in
        box = _BOX.search(text)
        if box is None:
            break
        content, end = _box_content(text, box)
        text = f"{text[:box.start()]}{{{content}}}{text[end:]}"
    else:
        raise Unreadable("boxes nested more than 8 deep")
    text = text.replace("\u00b0", "^\\circ")
    text = _EMPTY_SET.sub(r"\\emptyset", _DELIMITERS.sub(" ", text))
    return re.sub(r"[\s.,;:]+$", "", text).strip()


def _choice(text: str) -> list[Value] | None:
    """A multiple-choice letter, alone or with its value after it; several letters for an answer that gives
    several; None when ``text`` is not one."""
    lone = _LONE_LETTER.fullmatch(text)
    if lone:
        return [Value(choice=lone.group(1))]
    found = _CHOICE.fullmatch(text)
    if not found:
        return None
    letter = next(group for group in found.groups()[:3] if group)
    rest = found.group(4).strip()
    if not rest:
        return [Value(choice=letter)]
    others = [next(group for group in other.groups() if group) for other in _CHOICE_LETTER.finditer(rest)]
    if others:  # "(C) or (D)", "(C) D": several choices
        return [Value(choice=choice) for choice in dict.fromkeys([letter, *others])]
    values = distinct(_read(rest))
    if len(values) != 1:
        raise Unreadable(f"choice {letter} is followed by {len(values)} values: {rest[:80]!r}")
    value = values[0]
    if value.choice is not None or getattr(value.expr, "free_symbols", None):
        raise Unreadable(f"choice {letter} is followed by {rest[:80]!r}, which is not a value")
    return [replace(value, choice=letter)]


def _pieces(text: str) -> list[tuple[str, str, str | None]]:
    """``text`` split where it lists or joins values, at the top level only: (piece, how it joins the piece
    before it, the unit written after its value)."""
    pieces: list[tuple[str, str, str | None]] = []
    out: list[str] = []
    join, unit = "list", None
    depth, position = 0, 0

    def cut(next_join: str) -> None:
        nonlocal out, join, unit
        piece = "".join(out).strip()
        if piece:
            pieces.append((piece, join, unit))
            join = next_join
        elif pieces:  # a separator after another: the stronger reading of the two
            join = next_join if next_join != "list" else join
        out, unit = [], None

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
                content, after = _group(text, group.end())
                words = _WORD.findall(content)
                if _WORD.sub("", content).strip(" ,.;:'/-") or not words:  # not words only: read it as math
                    if not content.strip(" ,.;:"):
                        cut("list")  # \text{, }: a comma between values
                    else:
                        out.append("{" + content + "}")
                    position = after
                    continue
                position = after
                before = "".join(out).strip()
                rest = text[position:].lstrip()
                lowered = [word.lower() for word in words]
                if set(lowered) <= set(_CONNECTIVES):  # \text{ or }
                    cut(_CONNECTIVES[lowered[0]])
                    continue
                if any(word in _CONNECTIVES for word in lowered):  # \text{ or seven}: words and connectives
                    for word in words:
                        if word.lower() in _CONNECTIVES:
                            cut(_CONNECTIVES[word.lower()])
                        else:
                            out.append(f"\\text{{{word}}}")
                    continue
                if not before and not rest:  # the whole piece: a word answer
                    out.append(f"\\text{{{' '.join(words)}}}")
                    continue
                if set(lowered) & _QUALIFIERS:
                    raise Unreadable(f"words that change the value: {content.strip()[:80]!r}")
                if before and not before.endswith(("=", "(", "[", "{")):  # after a value: a unit
                    if unit is not None:
                        raise Unreadable(f"a second unit: {content.strip()[:80]!r}")
                    unit = " ".join(lowered)
                    exponent = re.match(r"\s*\^\s*(\{[^{}]*\}|\S)", text[position:])
                    if exponent:  # cm^2: the exponent is the unit's
                        unit += "^" + exponent.group(1).strip("{}")
                        position += exponent.end()
                    continue
                label = re.match(r"\s*(?:=|:)", text[position:])
                if content.rstrip().endswith(":") or label:  # before a value: a label
                    if label:
                        position += label.end()
                    continue
                raise Unreadable(f"words before a value: {content.strip()[:80]!r}")
            separator = _SEPARATOR.match(text, position)
            if separator:
                cut(separator.lastgroup)
                position = separator.end()
                continue
        if character == "\\" and position + 1 < len(text) and not text[position + 1].isalpha():
            escaped = text[position:position + 2]  # an escaped character: \{ \} (no nesting), or a space
            out.append(" " if escaped[1] in " ,;:!>" else escaped)
            position += 2
            continue
        if character in "{[(":
            depth += 1
        elif character in "}])":
            depth = max(0, depth - 1)
        out.append(character)
        position += 1
    cut("list")
    # a space between two numbers: two values ("7 \quad 5", and "5 \text{ unless } 7" once its words are gone)
    split: list[tuple[str, str, str | None]] = []
    for piece, join, unit in pieces:
        parts = _NUMBER_GAP.sub(lambda number: number.group(1) + "\x00", piece).split("\x00")
        split += [(part.strip(), join if index == 0 else "list", unit) for index, part in enumerate(parts)
                  if part.strip()]
    return split


def _piece_values(piece: str) -> list[Value]:
    """The values one piece states."""
    base = _BASE.fullmatch(piece)
    if base:
        digits, radix = base.group(1).lstrip("0") or "0", int(base.group(2))
        if not 2 <= radix <= 36 or any(int(digit, 36) >= radix for digit in digits):
            raise Unreadable(f"{piece.strip()!r} is no number in base {radix}")
        return [Value(literal=f"{digits}_{radix}")]
    if _SUBSCRIPTED_NUMBER.search(piece):
        raise Unreadable(f"{piece[:80]!r} has a subscript on a number")
    readings = _plus_minus_readings(piece)
    return [value for reading in readings for value in _parsed_values(reading, piece)]


def _plus_minus_readings(piece: str) -> list[str]:
    """``piece`` with each ``\\pm`` / ``\\mp`` read as + and as - (the signs of \\mp opposite)."""
    signs = _PLUS_MINUS.findall(piece)
    if not signs:
        return [piece]
    if len(signs) > _MAX_PLUS_MINUS:
        raise Unreadable(f"more than {_MAX_PLUS_MINUS} \\pm in {piece[:80]!r}")
    readings = []
    for choice in ("+", "-"):
        flipped = "-" if choice == "+" else "+"
        readings.append(_PLUS_MINUS.sub(lambda sign: choice if sign.group(1) == "pm" else flipped, piece))
    return readings


def _parsed_values(text: str, written: str) -> list[Value]:
    latex2sympy = _latex2sympy()
    from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
    from math_verify.parser import should_treat_as_complex

    # math-verify's normalization of a box, without its removal of units and text (which drops what it cannot
    # read: "5 \text{ (or 7)}" would become "5"); spacing commands are spaces
    config = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="none",
                                 equations=False)
    normalized = normalize_latex(_SPACING.sub(lambda space: space.group(1) or " ", text), config).strip()
    if not normalized:
        return []
    try:
        expr = latex2sympy(normalized, is_real=not should_treat_as_complex(normalized), convert_degrees=False,
                           normalization_config=None)
    except Exception as error:  # latex2sympy raises plain Exceptions for text it cannot parse
        raise Unreadable(f"{normalized[:80]!r} does not parse whole: {str(error).splitlines()[0][:80]}") from None
    _no_stray_text(expr, normalized)
    decimals = _decimals(written)
    percent = "\\%" in written
    return [Value(_exact(value), decimals=decimals.get(_float_key(value)), percent=percent, unknown=unknown)
            for value, unknown in _stated(expr, normalized)]


def _no_stray_text(expr: Any, normalized: str) -> None:
    for symbol in getattr(expr, "free_symbols", ()):
        if not _SYMBOL_NAME.fullmatch(str(symbol)):
            raise Unreadable(f"{normalized[:80]!r} holds text the reader cannot place: {str(symbol)[:40]!r}")


def _stated(expr: Any, written: str) -> list[tuple[Any, Any]]:
    """The values one parsed piece states, each with the unknown of the inequality it solves (or None)."""
    import sympy

    if isinstance(expr, sympy.FiniteSet):
        return [stated for element in expr.args for stated in _stated(element, written)]
    equations = _equations(expr)
    if equations is not None:
        return [_equation_value(equations, written)]
    if isinstance(expr, sympy.Eq) and isinstance(expr.rhs, sympy.FiniteSet):  # x = 2, 3 or x \in \{2, 3\}
        return [(sympy.Eq(expr.lhs, element, evaluate=False), None) for element in expr.rhs.args]
    if isinstance(expr, sympy.Ne) and not expr.free_symbols:
        raise Unreadable(f"{written[:80]!r}: an inequation between values states none")
    inequality = (sympy.core.relational.Relational, sympy.And, sympy.Or)
    if isinstance(expr, inequality) and len(expr.free_symbols) == 1:
        try:
            return [(expr.as_set(), next(iter(expr.free_symbols)))]
        except (NotImplementedError, TypeError, ValueError):  # sympy cannot solve it: the inequality as written
            return [(expr, None)]
    return [(expr, None)]


def _equations(expr: Any) -> list[Any] | None:
    """The equations of an equation or an equation chain (``a = b = c`` parses as ``Eq(b, c) & Eq(a, b)``); None
    for anything else."""
    import sympy

    if isinstance(expr, sympy.Eq) and not isinstance(expr.rhs, sympy.FiniteSet):
        return [expr]
    if isinstance(expr, sympy.And) and all(isinstance(arg, sympy.Eq) for arg in expr.args):
        return list(expr.args)
    if isinstance(expr, sympy.logic.boolalg.BooleanAtom):  # sympy decided an equation between numbers
        raise Unreadable("an equation between numbers that does not hold")
    return None


def _equation_value(equations: list[Any], written: str) -> tuple[Any, Any]:
    """What an equation (chain) states: its one value, whatever the members that name it. Every member without
    an unknown must be the same number (``7 = 5`` is a false claim, not a value); one unknown alone on a side
    labels it (``x = 5``); members with unknowns otherwise make the equation itself the value."""
    import sympy

    members = list(dict.fromkeys(side for equation in equations for side in (equation.lhs, equation.rhs)))
    numbers = [member for member in members if not member.free_symbols]
    for number in numbers[1:]:
        if not _same_number(numbers[0], number, None, None, None):
            raise Unreadable(f"{written[:80]!r} claims that {numbers[0]} equals {number}")
    unknowns = [member for member in members if isinstance(member, sympy.Symbol)]
    others = [member for member in members if member.free_symbols and not isinstance(member, sympy.Symbol)]
    if numbers and len(unknowns) <= 1 and not others:
        value = numbers[0]
        return (sympy.Eq(unknowns[0], value, evaluate=False) if unknowns else value), None
    if len(equations) == 1:
        return equations[0], None
    raise Unreadable(f"{written[:80]!r}: an equation chain with unknowns on several sides")


def _labelled(values: list[Value]) -> list[Value]:
    """``x = v`` states v when every equation among the values is about the same one unknown (``x = 2`` and
    ``x = 3``: two values of x). Equations about different unknowns, each with a number, are one labelled point
    (``x = 1, y = 2``), its coordinates in the order of the unknowns' names."""
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
    ordered = sorted(equations, key=lambda value: str(value.expr.lhs))
    return [Value(sympy.Tuple(*(value.expr.rhs for value in ordered)),
                  labels=tuple(str(value.expr.lhs) for value in ordered))]


def _joined_sets(values: list[Value]) -> list[Value]:
    """Inequalities about one unknown, listed: one value, the union of their solution sets when "or" joins them
    (``x < 1 \\text{ or } x > 2``), else their intersection (``x > 1, x < 3``)."""
    import sympy

    unknowns = {value.unknown for value in values}
    if len(values) < 2 or None in unknowns or len(unknowns) != 1:
        return values
    sets = [value.expr for value in values]
    joined = sympy.Union(*sets) if all(value.join == "or" for value in values[1:]) else sympy.Intersection(*sets)
    return [Value(joined)]


def _decimals(written: str) -> dict[float, int]:
    """Places after the point of each decimal literal of a piece that is a decimal or a comma list of them (each
    perhaps written ``x = 0.5``), read from the text as written (math-verify's normalization writes 0.5 as
    \\frac{1}{2})."""
    found = {}
    for part in written.replace("\\%", "").split(","):
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

    if isinstance(value, sympy.Number) and not isinstance(value, sympy.Integer):
        try:
            return float(value)
        except (TypeError, OverflowError):
            return None
    return None


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
    if gold.choice is not None and answer.choice is not None:
        return answer.choice == gold.choice and (gold.expr is None or answer.expr is None or _same_expr(gold, answer))
    if gold.choice is not None:  # a letter with its value: a plain value answers it by its value
        return gold.expr is not None and answer.expr is not None and _same_expr(gold, answer)
    if gold.literal is not None or answer.literal is not None:
        return gold.literal == answer.literal
    if answer.expr is None:
        return False
    if gold.unit is not None and answer.unit is not None and _unit(gold.unit) != _unit(answer.unit):
        return False
    return _same_expr(gold, answer)


def _unit(unit: str) -> str:
    """A unit as compared: lower case, one space, a plural s dropped (``Hours`` is ``hour``)."""
    return " ".join(word[:-1] if word.endswith("s") and len(word) > 2 else word for word in unit.lower().split())


def _same_expr(gold: Value, answer: Value) -> bool:
    from math_verify import verify

    if _is_number(gold.expr) and _is_number(answer.expr):
        # a percent is its hundredth, or the number written before the sign: 20\% answers 0.2 and 20
        scales = [(1, 1)] + [(1, 100)] * answer.percent + [(100, 1)] * gold.percent
        return any(_same_number(gold.expr * gold_scale, answer.expr * answer_scale, gold.decimals, answer.decimals,
                                gold.expr) for gold_scale, answer_scale in scales)
    return bool(verify(gold.expr, answer.expr, timeout_seconds=None))


def _is_number(expr: Any) -> bool:
    import sympy

    return (isinstance(expr, sympy.Expr) and not expr.free_symbols and bool(expr.is_number)
            and expr.is_finite is not False)


# Significant digits a decimal needs to answer an exact gold: half a unit of its last place, relative.
_PRECISION = decimal.Decimal("5e-6")


def _same_number(gold: Any, answer: Any, gold_decimals: int | None, answer_decimals: int | None,
                 written_gold: Any) -> bool:
    """Whether the number ``answer`` answers ``gold``: exactly equal when both are exact; a decimal gold with
    ``gold_decimals`` places is answered by what rounds to it there; an exact gold by a decimal of
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
        quantum = decimal.Decimal(1).scaleb(-gold_decimals)
        rounded = given.quantize(quantum, rounding=decimal.ROUND_HALF_UP, context=_NUMBERS)
        return rounded == expected.quantize(quantum, context=_NUMBERS)
    if not (gold.has(sympy.Float) or answer.has(sympy.Float)):
        return abs(expected - given) <= decimal.Decimal("1e-40") * max(1, abs(expected))
    if answer_decimals is not None and not gold.has(sympy.Float):
        half = decimal.Decimal(1).scaleb(-answer_decimals) / 2
        return expected == given or (abs(expected - given) <= half and half <= _PRECISION * abs(expected))
    return abs(expected - given) <= decimal.Decimal("1e-12") * max(abs(expected), abs(given))


_NUMBERS = decimal.Context(prec=80, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _decimal(number: Any) -> decimal.Decimal | None:
    """A real sympy number as a Decimal: a float as its decimal digits (2.55 is 2.55, not the binary float
    nearest it), anything else to 60 significant digits; None when it is not a real number."""
    import sympy

    value = number if isinstance(number, sympy.Float) else sympy.N(number, 15 if number.has(sympy.Float) else 60)
    if not (isinstance(value, sympy.Number) and value.is_real and value.is_finite):
        return None
    return _NUMBERS.create_decimal(str(value) if not isinstance(value, sympy.Integer) else int(value))
