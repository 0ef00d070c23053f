"""Two numbers written side by side, with no operator between them: what the parser would join, and how.

latex2sympy reads a number followed by another numeric atom as a mixed number and adds them: ``2(3)``, ``(2)(3)``,
``5{7}``, ``[5][7]`` and ``4(\\frac{1}{2})`` are 5, 5, 12, 12 and 4.5, where a reader sees a
product or two values. With a letter on either side it multiplies (``2x``, ``2(x+1)``, ``(x+1)(x+2)``), as a
reader does, and a function applies to what follows it (``\\sin 30``, ``\\log_{2} 3``). So ``check`` reads the
normalized piece as a row of atoms (numbers, letters, commands with their arguments, bracket groups, each with its
postfixes: ``^{...}``, ``_{...}``, ``!``) and refuses two numeric atoms side by side (``Unreadable``) where the
parser's reading is not the reader's (``_a_reading_all_share``): kept are a mixed number (``3\\frac{1}{2}`` is
3.5) and products (``2\\sqrt{3}``, ``2(\\sqrt{2}+1)``); a factor next to a mixed number (``2\\frac{1}{2}\\pi``:
2 * 1/2 * pi to the parser), a product side by side after a slash (``1/2\\sqrt{3}``: 1/(2 sqrt 3) to the parser)
and a letter run into a digit (``0x1F``: 0 * x * 1 * F) are refused too.
"""

from __future__ import annotations

import re

from gdpo_verl.answers.value import Unreadable

# Commands that apply to the atom after them (not atoms of their own).
_FUNCTIONS = frozenset("sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sum prod".split())
# Commands that are numbers, or build a number from their numeric arguments.
_NUMERIC_COMMANDS = frozenset(
    "frac dfrac tfrac sqrt binom dbinom tbinom lfloor rfloor lceil rceil lvert rvert vert".split())
# Commands and characters between atoms: operators, relations, separators, sizing.
_OPERATORS = frozenset("cdot times div pm mp le leq ge geq lt gt leqslant geqslant ne neq in cup cap to left right "
                       "big Big bigg Bigg bigl bigr Bigl Bigr".split())
_ARGUMENTS = {"frac": 2, "dfrac": 2, "tfrac": 2, "binom": 2, "dbinom": 2, "tbinom": 2, "sqrt": 1, "text": 1,
              "mathbb": 1, "begin": 1, "end": 1}
_CLOSING = {"(": ")", "[": "]", "{": "}", "\\{": "\\}", "\\lfloor": "\\rfloor", "\\lceil": "\\rceil",
            "\\lvert": "\\rvert"}
_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d*)?|\.\d+|[A-Za-z]|\S")
_MIXED_FRACTION = re.compile(r"\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_FRACTIONS = frozenset({"frac", "dfrac", "tfrac"})
_BINOMIALS = frozenset({"binom", "dbinom", "tbinom"})
# What ends a function's argument written without parentheses, as a reader reads it; a product sign before one of
# these is the parser's (it reads \sin x \cdot \cos x as sin(x cos x), \log 2 \cdot 3 as log 6)
_ARGUMENT_ENDS = frozenset({"+", "-", "=", "<", ">", ",", "\\le", "\\leq", "\\ge", "\\geq", "\\lt", "\\gt", "\\ne",
                            "\\neq", "\\pm", "\\mp", "\\to"})
_PRODUCT_SIGNS = frozenset({"\\cdot", "\\times", "\\div", "*", "/"})
_SLASHES = frozenset({"/", "\\div"})  # a/bc: the parser divides by bc
_BARS = frozenset({"|", "\\vert"})  # a bar opens a group that the next bar closes
# A letter (not a command's) run into a digit: the parser multiplies (0x1F is 0 * x * 1 * F), where a reader sees a
# name or a number in another notation. Words (text, names of units) are read by words.py.
_LETTER_THEN_DIGIT = re.compile(r"(?<![\\A-Za-z])[A-Za-z]\d")
_WORDS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{[^{}]*\}")
# A bracket holding one number, which the parser adds to the number before it: (3), {7}, (\frac{1}{2}).
_SINGLE = re.compile(r"\s*(?:\d+(?:\.\d*)?|\.\d+|\\[dt]?frac\{[^{}]*\}\{[^{}]*\})\s*")


def check(normalized: str) -> None:
    """``Unreadable`` when ``normalized`` (a piece as the parser gets it) has two numeric atoms side by side at any
    depth, other than a whole number and a fraction of whole numbers (a mixed number); a factor next to a mixed
    number; or a letter run into a digit."""
    run = _LETTER_THEN_DIGIT.search(_WORDS.sub(" ", normalized))
    if run is not None:
        raise Unreadable(f"{normalized[:80]!r}: {run.group()!r}, a letter run into a digit: a name, a number in "
                         "another notation (0x1F, 0b101) or a product?")
    tokens = _TOKEN.findall(normalized)
    _row(tokens, 0, len(tokens), normalized)
    _function_arguments(tokens, normalized)


def _function_arguments(tokens: list[str], text: str) -> None:
    """``Unreadable`` when a function written without parentheses (``\\sin x``, ``\\log 2``) is followed, before
    its argument ends (a sum, a relation, a comma, another function, its group's end), by a product sign: the
    parser takes the product as the argument (``\\sin x \\cdot \\cos x`` is sin(x cos x) to it)."""
    for position, token in enumerate(tokens):
        if not (token.startswith("\\") and token[1:] in _FUNCTIONS):
            continue
        at = _postfixes(tokens, position + 1, len(tokens), text)
        if at < len(tokens) and tokens[at] in ("(", "\\left"):
            continue  # its argument is in parentheses
        depth = 0
        for later in tokens[at:]:
            if later in ("(", "[", "{", "\\{"):
                depth += 1
            elif later in (")", "]", "}", "\\}"):
                depth -= 1
                if depth < 0:
                    break
            elif depth == 0 and (later in _ARGUMENT_ENDS or later.startswith("\\") and later[1:] in _FUNCTIONS):
                break
            elif depth == 0 and later in _PRODUCT_SIGNS:
                raise Unreadable(f"{text[:80]!r}: {token} without parentheses before {later}: is the product its "
                                 "argument?")


def _row(tokens: list[str], start: int, end: int, text: str) -> None:
    """Check the atoms of ``tokens[start:end]`` (one bracket level), and inside each of their groups."""
    # (numeric, kind, written, after an atom, a mixed number's fraction) of the atom just before, if adjacent
    previous: tuple[bool, str, str, bool, bool] | None = None
    after_slash = False  # the next atom is a slash's right side
    denominator = False  # the atom just read is a slash's right side
    position = start
    while position < end:
        token = tokens[position]
        kind = "other"
        if token in _CLOSING or token in _BARS:
            close = _matching(tokens, position, end, token, _CLOSING.get(token, token))
            _row(tokens, position + 1, close, text)
            atom_end = close + 1
            kind = "single" if _SINGLE.fullmatch("".join(tokens[position + 1:close])) else "group"
        elif token.startswith("\\") and token[1:] in _FUNCTIONS:
            if previous is not None and previous[4]:
                _after_a_mixed_number(previous, token, text)
            position = _postfixes(tokens, position + 1, end, text)
            previous = None  # a function applies to what follows: no juxtaposition
            after_slash = denominator = False
            continue
        elif token.startswith("\\") and token[1:].isalpha() and token[1:] not in _OPERATORS:
            atom_end = position + 1
            kind = "frac" if token[1:] in _FRACTIONS else "binom" if token[1:] in _BINOMIALS else "other"
            for _ in range(_ARGUMENTS.get(token[1:], 0)):
                if atom_end < end and tokens[atom_end] == "[":  # \sqrt[3]{x}
                    atom_end = _matching(tokens, atom_end, end, "[", "]") + 1
                if atom_end < end and tokens[atom_end] == "{":
                    close = _matching(tokens, atom_end, end, "{", "}")
                    _row(tokens, atom_end + 1, close, text)
                    atom_end = close + 1
        elif token[0].isdigit() or token[0] == "." and len(token) > 1 or token.isalpha():
            atom_end = position + 1
            kind = "other" if token.isalpha() else "number"
        else:  # an operator, a relation, a comma, a separator
            previous = None
            after_slash, denominator = token in _SLASHES, False
            position += 1
            continue
        atom_end = _postfixes(tokens, atom_end, end, text)
        written = "".join(tokens[position:atom_end])
        numeric = _numeric(written)
        if previous is not None and previous[4]:
            _after_a_mixed_number(previous, written, text)
        if previous is not None and denominator:
            raise Unreadable(f"{text[:80]!r}: {previous[2]}{written} right after a slash: the parser divides by "
                             "the product, a reader may divide by the first alone (1/2\\sqrt{3})")
        denominator, after_slash = after_slash, False
        if previous is not None and previous[0] and numeric and not _a_reading_all_share(previous, kind, written):
            raise Unreadable(f"{text[:80]!r}: {previous[2]} and {written} side by side: a product, a sum (the "
                             "parser's reading of some), or two values?")
        mixed = previous is not None and previous[0] and kind == "frac"  # kept above: a mixed number
        if mixed and previous[3]:
            raise Unreadable(f"{text[:80]!r}: the mixed number {previous[2]}{written} after another factor: the "
                             "parser multiplies its whole part, a reader adds it")
        previous = (numeric, kind, written, previous is not None, mixed)
        position = atom_end


def _after_a_mixed_number(fraction: tuple[bool, str, str, bool, bool], written: str, text: str) -> None:
    """``Unreadable``: a factor right after a mixed number (``2\\frac{1}{2}\\pi``), which the parser reads as a product
    of all three (2 * 1/2 * pi), a reader as (2 + 1/2) * pi."""
    raise Unreadable(f"{text[:80]!r}: {written} right after the mixed number ending in {fraction[2]}: the parser "
                     "multiplies its whole part, a reader adds it")


def _matching(tokens: list[str], opening: int, end: int, open_token: str, close_token: str) -> int:
    """The position of the token closing the group opened at ``opening`` (``end`` when it never closes: the parser
    then reports the piece)."""
    depth = 0
    for position in range(opening, end):
        token = tokens[position]
        if open_token == close_token:  # |x|: the next bar closes
            if position > opening and token == close_token:
                return position
            continue
        if token == open_token:
            depth += 1
        elif token == close_token:
            depth -= 1
            if depth == 0:
                return position
    return end


def _postfixes(tokens: list[str], position: int, end: int, text: str) -> int:
    """The position after the powers, subscripts and factorials that follow an atom."""
    while position < end and tokens[position] in ("^", "_", "!", "'"):
        if tokens[position] == "!":
            position += 1
            continue
        position += 1
        if position < end and tokens[position] == "{":
            close = _matching(tokens, position, end, "{", "}")
            _row(tokens, position + 1, close, text)
            position = close + 1
        elif position < end:
            position += 1
    return position


def _numeric(written: str) -> bool:
    """Whether an atom holds numbers only: no letter, and no command but those that build numbers."""
    commands = re.findall(r"\\([A-Za-z]+)", written)
    if any(command not in _NUMERIC_COMMANDS and command not in _OPERATORS for command in commands):
        return False
    return not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", written))


def _a_reading_all_share(first: tuple[bool, str, str], kind: str, second: str) -> bool:
    """Whether two numeric atoms side by side have one reading, the parser's and a reader's. The parser adds a
    number, or a bracket holding one number, to a bracket holding one number or to a fraction (``2(3)``, ``5{7}``,
    ``(3)\\frac{1}{2}``): refused, as is a bare number after anything (``{3}4``, ``5! 7``) and a fraction after
    anything but a whole number. Kept: a whole number and a proper fraction of whole numbers, a mixed number
    (``3\\frac{1}{2}``, a sum); anything else side by side is a product to both (``2\\sqrt{3}``,
    ``2(\\sqrt{2}+1)``, ``(1+2)(3+4)``)."""
    if kind in ("number", "single", "binom"):  # 2\\binom{4}{2}: the parser adds, 2 + 6
        return False
    if kind == "frac":
        mixed = _MIXED_FRACTION.fullmatch(second)
        return (first[1] == "number" and first[2].isdigit() and mixed is not None
                and int(mixed.group(1)) < int(mixed.group(2)))
    return True
