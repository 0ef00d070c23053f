"""Cheap guards that refuse answers sympy would spend seconds on, before any answer reaches math-verify.

A policy under RL writes whatever earns reward or costs nothing, and some short answers cost a checker
seconds or minutes: ``10^{10^{10^{10}}}`` (sympy builds the integer), ``\\frac{10000000!}{9999999!}``,
``\\binom{1000000}{500000}``, or brackets nested a dozen deep (math-verify's LaTeX parser is exponential in the
depth: 10 nested parentheses took 1.4 s, 30 took 7.5 s). ``refusal(answer)`` finds these by reading the text
only (microseconds, no sympy), and names the reason; the caller scores the answer "not checked"
(``verify_failed``), never "wrong", so a correct answer refused here stays visible.

The limits sit far above any answer of a math benchmark (they are integers of at most a few hundred digits and
nest a few brackets deep) and far below what takes a checker a second (docs/math-length.md has the
measurements):
- ``MAX_NESTING``: brackets ``{} () []`` (``\\left( ... \\right)`` included) nested deeper than this;
- ``MAX_DIGITS``: a power, factorial, Gamma value or binomial coefficient of numbers whose value has more digits
  than this (``2^{2023}``: 610 digits, passes; ``2^{100000}``: 30,103, refused);
- ``MAX_TERMS``: a ``\\sum`` or ``\\prod`` whose upper limit is a number above this (sympy evaluates it term by
  term: ``\\prod_{k=1}^{10^{7}} k`` ran past any timeout).

``admission(texts)`` applies them, after ``MAX_ANSWER_CHARS``, to every text the reader reads (parsing.py, and
the checker's parent before a text goes to a checker process). ``plain_number`` writes a number written as ``5e-05``
or ``1\\,000\\,000``, which math-verify misreads, in plain digits; the reader reads every text through it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

MAX_ANSWER_CHARS = 1000  # the boxes of one answer together (sympy can take minutes on longer input)
MAX_NESTING = 6
MAX_DIGITS = 20_000
MAX_TERMS = 100

_OPEN, _CLOSE = "{([", "})]"
_OPENERS, _CLOSERS = set(_OPEN), set(_CLOSE)
_TOKEN = re.compile(r"\d+(?:\.\d+)?|\\[A-Za-z]+|\*\*|\S", re.ASCII)  # digits 0-9 only: float() reads no others
# Spacing and sizing that math-verify ignores; \left( and \right) are plain brackets here.
_IGNORED = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])|\\[,;:! ]")
_SUMS = {"+", "-", ",", "=", "<", ">", "\\pm", "\\mp"}
_PRODUCTS = {"*", "/", "\\cdot", "\\times", "\\div"}
_BINOMIALS = {"\\binom", "\\dbinom", "\\tbinom", "\\choose"}
_BIG_OPERATORS = {"\\sum", "\\prod"}
_CONSTANTS = {"e": math.log10(math.e), "\\pi": math.log10(math.pi)}  # log10 of each
_EXPONENTIALS = {"\\exp", "\\sinh", "\\cosh"}  # about e to the power of their argument
_MAX_DEPTH = 64


def admission(texts: list[str]) -> str | None:
    """Why the texts of one answer (its boxes, or a gold) are not read (one line), or None when they may be: over
    ``MAX_ANSWER_CHARS`` in all (first: nothing else reads a text of any length), or one of them refused by
    ``refusal``."""
    if sum(map(len, texts)) > MAX_ANSWER_CHARS:
        return f"over {MAX_ANSWER_CHARS} characters"
    for text in texts:
        refused = refusal(plain_number(text))
        if refused is not None:
            return refused
    return None


def refusal(answer: str) -> str | None:
    """Why ``answer`` is not given to math-verify (one line), or None when it may be checked."""
    depth = nesting(answer)
    if depth > MAX_NESTING:
        return f"brackets nested {depth} deep (more than {MAX_NESTING})"
    estimate = _Estimate(answer)
    digits = estimate.largest()
    if estimate.terms > math.log10(MAX_TERMS):
        return f"a sum or product of about 10^{_shown(estimate.terms)} terms (more than {MAX_TERMS:,})"
    if digits > MAX_DIGITS:
        return f"a number of about {_shown(digits)} digits (more than {MAX_DIGITS:,})"
    return None


def _shown(value: float) -> str:
    return f"{value:,.0f}" if value < 1e15 else "more than 10^15"


def nesting(text: str) -> int:
    """The deepest nesting of ``{} () []`` in ``text`` (unbalanced closers are ignored)."""
    depth = deepest = 0
    for char in text:
        if char in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif char in _CLOSE and depth:
            depth -= 1
    return deepest


class _Estimate:
    """Upper bounds on log10 |value| of the numeric parts of a LaTeX answer, read by a small total parser.

    Every method consumes at least one token or returns, so the parser ends on any text; recursion is bounded
    by the nesting, which ``refusal`` has already limited. A value is a float (a bound on |log10| of its
    magnitude, so 0.5 counts as 2) or None for anything with a symbol in it, which sympy keeps symbolic (e and pi
    count as the numbers they are; a letter past a sum's or a product's numeric limits as its upper limit).
    """

    def __init__(self, text: str) -> None:
        self.tokens = _TOKEN.findall(_IGNORED.sub(" ", text))
        self.position = 0
        self.worst = 0.0
        self.terms = 0.0  # log10 of the most terms sympy evaluates: the upper limits of nested \\sum and \\prod
        self.outer = 0.0  # log10 of the terms of the sums and products the atom being read is inside
        self.limit: float | None = None  # log10 of the upper limit of the \\sum or \\prod just read
        self.index: float | None = None  # the same, once one is met: what a letter in its body counts as
        self.depth = 0  # atoms inside atoms: bounded by the nesting, and by _MAX_DEPTH for \\Gamma\\Gamma... chains

    def largest(self) -> float:
        """The digit count of the largest power, factorial or binomial coefficient met (0 if none)."""
        while self.position < len(self.tokens):
            self.expression()
            self.position += 1  # a stray closer at the top level
        return self.worst

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def note(self, digits: float | None) -> float | None:
        if digits is not None:
            self.worst = max(self.worst, digits)
        return digits

    def expression(self) -> float | None:
        """Terms joined by operators or side by side, up to a closing bracket or the end."""
        total: float | None = 0.0
        operator = "*"
        outer, nested = self.outer, 0.0  # the terms of the sums and products this one is inside, and here
        while (token := self.peek()) is not None and token not in _CLOSE:
            if token in _SUMS or token in _PRODUCTS:
                if token in _SUMS:
                    nested = 0.0  # a big operator's body ends at a sum
                operator = token
                self.position += 1
                continue
            self.outer = outer + nested
            value = self.postfix()
            if self.limit is not None:  # a \sum or \prod: what follows is its body, evaluated at every index
                nested += self.limit
                self.terms = max(self.terms, outer + nested)
                self.limit = None
            if total is None or value is None:
                total = None
            elif operator in _SUMS:
                total = max(total, value) + math.log10(2)
            else:  # a product or a quotient (whose numerator and denominator sympy both holds)
                total = total + value
            operator = "*"  # side by side multiplies
        self.outer = outer
        return total

    def postfix(self) -> float | None:
        value = self.atom()
        while (token := self.peek()) in ("^", "**", "!", "_"):
            self.position += 1
            if token == "!":
                value = self.note(_factorial_digits(value))
            elif token == "_":
                self.atom()
            else:  # a tower a^b^c is read as a^(b^c), the larger reading
                chain = [self.atom()]
                while self.peek() in ("^", "**"):
                    self.position += 1
                    chain.append(self.atom())
                exponent = chain.pop()
                while chain:
                    exponent = self.note(_power_digits(chain.pop(), exponent))
                value = self.note(_power_digits(value, exponent))
        return value

    def atom(self) -> float | None:
        if self.depth >= _MAX_DEPTH:  # a chain of commands that read atoms (\\Gamma\\Gamma...): read no deeper
            self.position += 1
            return None
        self.depth += 1
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> float | None:
        token = self.peek()
        if token is None:
            return 0.0
        self.position += 1
        if token[0] in "0123456789":
            return _literal_log10(token)
        if token in _OPENERS:
            value = self.expression()
            if self.peek() in _CLOSERS:
                self.position += 1
            return value
        if token in _BIG_OPERATORS:  # its limits follow; the upper one bounds the terms sympy evaluates
            while self.peek() in ("_", "^"):
                upper = self.tokens[self.position] == "^"
                self.position += 1
                limit = self.atom()
                if upper and limit is not None:  # a symbolic limit (n) keeps the sum symbolic
                    self.limit = limit
                    self.index = max(self.index or 0.0, limit)  # sympy evaluates the body at each index
            return 0.0
        if token in _CONSTANTS:  # numbers sympy evaluates to any precision asked (e^{10^{6}})
            return _CONSTANTS[token]
        if token in _EXPONENTIALS:  # e to its argument's power, about
            return self.note(_power_digits(_CONSTANTS["e"], self.postfix()))
        if token == "\\Gamma":  # Gamma(n) = (n-1)!, which sympy computes as soon as it reads it
            return self.note(_factorial_digits(self.atom()))
        if token.startswith("\\"):
            # a command applied to the groups that follow it (\frac, \sqrt, \dfrac...): bounded by their sum
            arguments = []
            while self.peek() in ("{", "["):
                arguments.append(self.atom())
            if None in arguments:
                return None
            if token in _BINOMIALS and arguments:
                return self.note(_binomial_digits(*arguments[:2]))
            return sum(arguments)
        if token.isalpha() and len(token) == 1 and self.index is not None:  # past a sum's or a product's limits,
            return self.index  # a letter may be its index: at most the upper limit
        return None  # a letter or a symbol


def _literal_log10(token: str) -> float:
    """|log10| of a decimal literal's value, from its text (a 5000-digit literal overflows a float)."""
    whole, _, fraction = token.partition(".")
    whole = whole.lstrip("0")
    if whole:
        return len(whole) - 1 + math.log10(float(f"{whole[0]}.{whole[1:16] or 0}"))
    significant = fraction.lstrip("0")
    if not significant:
        return 0.0  # zero
    return len(fraction) - len(significant) + 1 - math.log10(float(f"{significant[0]}.{significant[1:16] or 0}"))


def _magnitude(digits: float) -> float:
    """The value bounded by ``digits`` (infinite when too large for a float)."""
    return math.inf if digits > 300 else 10.0**digits


def _power_digits(base: float | None, exponent: float | None) -> float | None:
    if base is None or exponent is None:
        return None
    return 0.0 if base == 0 else _magnitude(exponent) * base


def _binomial_digits(n: float, k: float = math.inf) -> float:
    """C(n, k) < 2^n, and C(n, k) <= n^k."""
    return min(_magnitude(n) * math.log10(2), _magnitude(k) * n)


def _factorial_digits(n: float | None) -> float | None:
    if n is None:
        return None
    value = _magnitude(n)
    return value * math.log10(value + 1) if math.isfinite(value) else math.inf


# ------------------------------------------------------------------------------------------- reading answers

# one way to read each digit (no \d+\.?\d*, which backtracks quadratically on a long run of digits)
_SCIENTIFIC = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)[eE][+-]?\d{1,3}", re.ASCII)
# A thin space (or another spacing; a comma with \, or \! as MATH writes thousands) between groups of three digits:
# 1\,000\,000, 10,\!000; not after the digits of an exponent or a subscript (2^2\,000).
_DIGIT_GROUPING = re.compile(r"(?<![\^_]\d)(?<![\^_]\d\d)(?<![\^_]\d\d\d)(?<=\d)"
                             r"(?:,?\\[,!]|\\[ ;:>]|\{,\}|~|\\thinspace\s*|[\u00a0\u2007\u2009\u202f])(?=\d{3}(?!\d))")
# A decimal comma, as LaTeX writes it: {,} before a group of other than three digits (3{,}14; 1{,}000 is a thousand).
_DECIMAL_COMMA = re.compile(r"(?<=\d)\{,\}(?=(?:\d{1,2}|\d{4,})(?!\d))", re.ASCII)
# A comma between digit groups, outside brackets: one number when a group of one to three digits is followed by
# groups of exactly three with no space after their commas (1,000 and 12,345,678.5); a comma followed by a space
# or by a group of another length lists values (1, 000 and 1,2 and 0,5 are two values each).
_THOUSANDS = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?!\d|,\d)", re.ASCII)


# Digit groups separated by plain spaces, the whole text: 1 000 000.
_SPACE_GROUPED = re.compile(r"\d{1,3}(?: \d{3})+", re.ASCII)


def plain_number(text: str) -> str:
    """``text`` with a number in scientific notation (``5e-05``, as Python prints floats; math-verify reads it as
    5e - 5) written out in decimal digits, and digit groups joined (``1\\,000\\,000`` -> ``1000000``, which
    math-verify reads as 1 * 0 * 0; a thin space; commas between thousands outside brackets: ``1,000``); any other
    text as it is."""
    stripped = text.strip()
    if _SCIENTIFIC.fullmatch(stripped):
        return format(Decimal(stripped), "f")
    if _SPACE_GROUPED.fullmatch(stripped):
        return stripped.replace(" ", "")
    return _thousands_joined(_DIGIT_GROUPING.sub("", _DECIMAL_COMMA.sub(".", text)))


def _thousands_joined(text: str) -> str:
    """``text`` with the commas of each number written in groups of thousands (``_THOUSANDS``) outside brackets
    taken out: ``1,000, 7`` is 1000 and 7; ``(100,200)`` stays a pair."""
    if "," not in text:
        return text
    out, depth, last = [], 0, 0
    for number in _THOUSANDS.finditer(text):
        for character in text[last:number.start()]:
            depth += (character in "([{") - (character in ")]}")
        if depth <= 0:
            out.append(text[last:number.start()] + number.group().replace(",", ""))
        else:
            out.append(text[last:number.end()])
        for character in number.group():
            depth += (character in "([{") - (character in ")]}")
        last = number.end()
    return "".join(out) + text[last:]
