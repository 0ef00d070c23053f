"""What the parser's reading of a piece means, made exact and defined (gdpo_verl/answers/parsing.py reads the
pieces; this module holds what it checks and changes in their readings):

- before the parse: ``\\infty`` only alone, as a list's member, an interval's end or a relation's side
  (``check_infinity``); a logarithm's base a whole number above 1 or a letter (``check_log_bases``);
- the parse itself skipped for a plain number, with the value the parse would give (``plain_number_value``);
- after it (``exact_reading``): each decimal literal the rational it writes, every unknown one real symbol, the
  letter i the imaginary unit, an odd root of a negative number the real root; ``Unreadable`` for what sympy
  evaluated into a value the text does not state (0^0, a pole, arithmetic on infinity, a division by zero);
- the decimal literals a piece writes, with their places (``literals``), and arithmetic of integers evaluated
  exactly (``evaluated``).
"""

from __future__ import annotations

import re
from typing import Any

from gdpo_verl.answers.grading import places_of
from gdpo_verl.answers.value import Unreadable, Value
from gdpo_verl.answers.where import top_level_split

# A bracket closing an end at infinity: [3, \infty], [-\infty, 0)
_CLOSED_AT_INFINITY = re.compile(r"\[\s*[-+]?\s*\\infty(?![A-Za-z])|\\infty\s*\]")
# Where \infty may stand: as a whole member of a list, an interval or a relation, perhaps signed
_INFINITY = re.compile(r"\\infty(?![A-Za-z])")
_BEFORE_INFINITY = re.compile(r"(?:^|[(\[,=<>]|\\(?:le|leq|ge|geq|lt|gt|ne|neq|left\s*[(\[]))\s*[+-]?\s*$")
_AFTER_INFINITY = re.compile(r"\s*(?:$|[)\],=<>]|\\(?:right|le|leq|ge|geq|lt|gt|ne|neq)(?![A-Za-z]))")
# What may not open a group around \infty: a script, or a command other than a set operation or a relation (its
# group is an expression's)
_SCRIPTED_GROUP = re.compile(r"(?:[\^_]|\\(?!(?:left|cup|cap|in|setminus|le|leq|ge|geq|lt|gt|ne|neq|leqslant|geqslant)"
                             r"(?![A-Za-z]))[A-Za-z]+)\s*$")
# A logarithm's base: a whole number above 1, or a letter
_LOG_BASE = re.compile(r"\\log\s*_\s*(?:\{\s*([^{}]*?)\s*\}|(\S))")
# A decimal literal: its whole part and its places.
_LITERAL = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?![\d.])")
# A plain number: a whole number or a decimal, or a fraction of whole numbers, perhaps signed (no more than 300
# digits: the guards bound what a parse may build, not what this reads)
_PLAIN_NUMBER = re.compile(r"\s*(?P<sign>[+-]?)\s*(?:(?P<decimal>\d{1,300}(?:\.\d{1,300})?|\.\d{1,300})"
                           r"|\\[dt]?frac\{\s*(?P<numerator>\d{1,300})\s*\}\{\s*(?P<denominator>\d{1,300})\s*\}"
                           r"|(?P<over>\d{1,300})\s*/\s*(?P<under>\d{1,300}))\s*")


def plain_number_value(piece: str) -> Value | None:
    """The value of a piece that is a plain number: a whole number, a decimal or a fraction of whole numbers
    (``-12``, ``0.25``, ``\\frac{3}{4}``, ``-\\dfrac{3}{4}``, ``3/4``), read without the parser (nearly all of a
    check's time is its parse and sympy's building, and most answers are such numbers); the very value the
    parser's reading gives (``test_a_plain_number_is_read_as_the_parser_reads_it``). None for anything else."""
    found = _PLAIN_NUMBER.fullmatch(piece)
    if found is None:
        return None
    import sympy

    sign = -1 if found.group("sign") == "-" else 1
    if found.group("decimal") is not None:
        literal = found.group("decimal")
        value = sign * sympy.Rational(literal)
        places = ((sympy.Rational(literal), len(literal.partition(".")[2])),) if "." in literal else ()
        return Value(value, decimals=places_of(value, places, [value]), places=places)
    numerator = int(found.group("numerator") or found.group("over"))
    denominator = int(found.group("denominator") or found.group("under"))
    if denominator == 0:
        return None  # the parser's reading says why it is not read
    return Value(sign * sympy.Rational(numerator, denominator))


def check_infinity(normalized: str) -> None:
    """``Unreadable`` for an interval closed at infinity (``[3, \\infty]``), and for a ``\\infty`` anywhere but alone
    (perhaps signed) as a value, a member of a list, an interval's open end or a side of a relation: inside an
    expression sympy evaluates it into a number the text does not state (``e^{-\\infty}`` is 0, ``\\infty^0`` 1).
    So it must stand whole between separators, and every group around it must be a list's, a tuple's or an
    interval's (a comma at its top level), opened by no script or command (``e^{(-\\infty)}``,
    ``e^{[-\\infty, 1]}``)."""
    closed = _CLOSED_AT_INFINITY.search(normalized)
    if closed is not None:
        raise Unreadable(f"{normalized[:80]!r}: an interval closed at infinity ({closed.group()!r}), which holds no "
                         "real number there (sympy would open it)")
    for infinity in _INFINITY.finditer(normalized):
        if not (_BEFORE_INFINITY.search(normalized[:infinity.start()])
                and _AFTER_INFINITY.match(normalized, infinity.end())):
            raise Unreadable(f"{normalized[:80]!r}: \\infty inside an expression, which the reader does not model")
        for opening in _groups_around(normalized, infinity.start()):
            if _SCRIPTED_GROUP.search(normalized[:opening]) or len(top_level_split(_content(normalized, opening))) < 2:
                raise Unreadable(f"{normalized[:80]!r}: \\infty inside a group that is no list, tuple or interval")


def _groups_around(text: str, position: int) -> list[int]:
    """Where each bracket, brace or parenthesis open at ``position`` opens."""
    opened: list[int] = []
    at = 0
    while at < position:
        if text[at] == "\\" and text[at + 1:at + 2].isalpha():  # a command: its letters are no brackets
            at += 2
            while at < position and text[at].isalpha():
                at += 1
            continue
        if text[at] in "([{":
            opened.append(at)
        elif text[at] in ")]}" and opened:
            opened.pop()
        at += 1
    return opened


def _content(text: str, opening: int) -> str:
    """What the group opening at ``opening`` holds, up to the bracket that closes it (or the end)."""
    depth = 0
    for at in range(opening, len(text)):
        if text[at] in "([{":
            depth += 1
        elif text[at] in ")]}":
            depth -= 1
            if depth == 0:
                return text[opening + 1:at]
    return text[opening + 1:]


def check_log_bases(normalized: str) -> None:
    """``Unreadable`` for a logarithm whose base is not a whole number above 1 or a letter (``\\log_0 7``, which
    sympy makes 0; ``\\log_1 5``)."""
    for base in _LOG_BASE.finditer(normalized):
        written = (base.group(1) or base.group(2) or "").strip()
        if not (re.fullmatch(r"[A-Za-z]", written) or written.isdigit() and int(written) >= 2):
            raise Unreadable(f"{normalized[:80]!r}: a logarithm to the base {written[:20]!r}, which the reader reads "
                             "only for a whole number above 1 or a letter")


def _exact_literals(expr: Any) -> Any:
    """``expr`` with each decimal literal (a Float, as the parser reads ``0.1``) the rational it writes: numbers
    are compared exactly (a Float made from a literal keeps every digit written)."""
    import sympy

    floats = expr.atoms(sympy.Float) if hasattr(expr, "atoms") else set()
    return _replaced(expr, {number: sympy.Rational(str(number)) for number in floats}) if floats else expr


def _replaced(expr: Any, mapping: dict) -> Any:
    """``expr`` with the atoms of ``mapping`` replaced, nothing evaluated (``x \\in \\{5, 7\\}``, which the
    parser gives as an unevaluated equation, would become False)."""
    import sympy

    with sympy.core.parameters.evaluate(False):
        return expr.xreplace(mapping)


def _canonical(expr: Any) -> Any:
    """``expr`` with its unknowns as one kind of symbol (real; the parser makes them real or not by how the piece
    looks, and a gold and an answer read apart must meet), and the letter i as the imaginary unit: no answer of a
    math test names an unknown i, and ``2 i``, ``0.8i`` and ``e^{i\\pi}`` are numbers."""
    import sympy

    symbols = getattr(expr, "free_symbols", None)
    if not symbols:
        return _real_roots(expr)
    return _real_roots(_replaced(expr, {symbol: sympy.I if symbol.name == "i" else sympy.Symbol(symbol.name, real=True)
                            for symbol in symbols if isinstance(symbol, sympy.Symbol)}))


def _real_roots(expr: Any) -> Any:
    """``expr`` with an odd root of a negative number the real root (``\\sqrt[3]{-8}`` is -2, as a math test
    means it; sympy's principal root is 1 + sqrt(3) i)."""
    import sympy

    def odd_root_of_a_negative(node: Any) -> bool:
        return (isinstance(node, sympy.Pow) and node.base.is_number and node.base.is_negative is True
                and isinstance(node.exp, sympy.Rational) and not isinstance(node.exp, sympy.Integer)
                and node.exp.q % 2 == 1)

    if not hasattr(expr, "replace") or not any(odd_root_of_a_negative(node) for node in _nodes(expr)):
        return expr
    with sympy.core.parameters.evaluate(False):
        return expr.replace(odd_root_of_a_negative, lambda node: (-1) ** node.exp.p * (-node.base) ** node.exp)


def _nodes(expr: Any) -> list[Any]:
    """Every node of ``expr`` (of each entry, for a matrix)."""
    import sympy

    if not isinstance(expr, sympy.Basic):
        return [node for entry in getattr(expr, "flat", lambda: [])() for node in sympy.preorder_traversal(entry)]
    return list(sympy.preorder_traversal(expr))


def _no_undefined_operation(expr: Any, written: str) -> None:
    """``Unreadable`` for what sympy evaluates into a value that the text does not state: arithmetic on infinity
    (``\\infty^0``, which sympy makes 1; ``\\infty - \\infty``), ``0^0``, a division by zero."""
    import sympy

    infinite = (sympy.S.Infinity, sympy.S.NegativeInfinity, sympy.S.ComplexInfinity)
    for node in _nodes(expr):
        if node in (sympy.S.NaN, sympy.S.ComplexInfinity):
            raise Unreadable(f"{written[:80]!r}: an undefined value (a division by zero)")
        if isinstance(node, (sympy.Add, sympy.Mul, sympy.Pow, sympy.Function)) and any(
                arg in infinite for arg in node.args):
            raise Unreadable(f"{written[:80]!r}: arithmetic on infinity, which the reader does not model")
        if isinstance(node, sympy.Pow) and node.args[0].doit() == 0 and node.args[1].doit().is_positive is not True:
            raise Unreadable(f"{written[:80]!r}: 0^0, 0 to a power not positive, or a division by zero")
        if isinstance(node, sympy.Function) and node.is_number and node.doit().has(
                sympy.S.ComplexInfinity, sympy.S.NaN):  # \cot 0, \csc 0: a pole
            raise Unreadable(f"{written[:80]!r}: a function at a pole, which the reader does not model")


def evaluated(value: Any) -> Any:
    """An arithmetic expression of integers (``2^{2^{11}}``, which sympy keeps unevaluated) evaluated exactly, so
    that equal numbers compare equal; anything else as read. The answer guards bound its size."""
    import sympy

    if not isinstance(value, sympy.Expr) or value.free_symbols:
        return value
    kinds = (sympy.Pow, sympy.Mul, sympy.Add, sympy.Integer, sympy.Rational)
    if all(isinstance(node, kinds) for node in sympy.preorder_traversal(value)):
        return value.doit()
    return value


def _matrix_written_out(expr: Any, written: str) -> Any:
    """A matrix as its entries (a mutable one, as the parser builds a matrix written out); ``Unreadable`` for a
    matrix anywhere but alone or named (``x = M``): arithmetic on matrices (``2A``, ``AB``, ``A^{-1}``, ``A + B``),
    which sympy leaves unevaluated, or a matrix in a set or an expression."""
    import sympy

    if isinstance(expr, sympy.MatrixBase):
        return sympy.Matrix(expr)
    named = isinstance(expr, sympy.Equality) and any(isinstance(side, sympy.Symbol) for side in expr.args)
    parts = [side for side in expr.args if not isinstance(side, sympy.MatrixBase)] if named else [expr]  # x = M
    if any(isinstance(part, sympy.Basic) and any(isinstance(node, (sympy.MatrixBase, sympy.MatrixExpr))
                                                 for node in sympy.preorder_traversal(part)) for part in parts):
        raise Unreadable(f"{written[:80]!r}: arithmetic on a matrix, or a matrix inside another value: the reader "
                         "compares a matrix written out, entry by entry")
    return expr


def _no_unknown_function_of_numbers(expr: Any, written: str) -> None:
    """``Unreadable`` for a name applied to numbers (``C(5,2)``, ``P(5,2)``, ``f(3)``): a function the reader does
    not know, which sympy keeps as a symbol of its own (so it would equal only itself). A name applied to unknowns
    (``f(x) = x^2``) is notation, and kept."""
    from sympy.core.function import AppliedUndef

    for node in _nodes(expr):
        if isinstance(node, AppliedUndef) and not node.free_symbols:
            raise Unreadable(f"{written[:80]!r}: {node.func} applied to numbers, a function the reader does not know")


def exact_reading(expr: Any, unevaluated: Any, written: str) -> Any:
    """The parser's reading ``expr`` of ``written`` made exact (decimals, unknowns, i, odd roots); ``Unreadable``
    for an operation the reader does not model, in the reading or in ``unevaluated``, the same reading built with
    sympy's evaluation off (``e^{\\ln 0}``, which sympy makes 0 as it builds it), where latex2sympy could build
    it (None otherwise: lexicon.parse_twice)."""
    if unevaluated is not None:
        _no_undefined_operation(unevaluated, written)
    expr = _matrix_written_out(expr, written)
    _no_unknown_function_of_numbers(expr, written)
    expr = _canonical(_exact_literals(expr))
    _no_undefined_operation(expr, written)
    return expr


def literals(written: str) -> tuple[tuple[Any, int], ...]:
    """Each decimal literal of ``written``: its value, unsigned, and its places."""
    import sympy

    return tuple((sympy.Rational(literal.group()), len(literal.group(2))) for literal in _LITERAL.finditer(written))
