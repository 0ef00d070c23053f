"""What a math answer may hold: every character, command and environment the reader accounts for, and where a
subscript, a percent sign or the bare digits of a fraction may stand; and the parser that reads it.

The reader (gdpo_verl/answers/parsing.py) parses a box with latex2sympy, which is lenient: it drops what it does
not know (``5 \\phantom{7}`` read as 12, ``(5 \\text{ or } 7)`` as the interval (5, 7), a subscript after a
superscript, anything after ``\\approx``) and lexes unknown commands as pieces of known ones (``\\leftarrow`` as
``\\le ftarrow``). So before a piece is parsed, ``check(piece)`` reads it token by token and lets through only
what this module names, each with the meaning the parser gives it. Anything else makes the answer not read
(``Unreadable``: ``verify_failed``, never credited, never called wrong). A new spelling is read only once it is
added here, with a row in the table of answers (docs/math-length.md). The words an answer may hold (units, labels)
are in gdpo_verl/answers/words.py.
"""

from __future__ import annotations

import functools
import re
import types
from importlib import metadata
from typing import Any

from gdpo_verl.answers.value import Unreadable




# Characters outside ASCII, as the reader reads them; any other one makes the answer not read (zero-width spaces,
# look-alike letters, superscript digits, circled numbers).
UNICODE = {
    "\u2212": "-", "\u00d7": "\\times ", "\u00b7": "\\cdot ", "\u22c5": "\\cdot ", "\u00f7": "\\div ",
    "\u2264": "\\le ", "\u2265": "\\ge ", "\u2260": "\\ne ", "\u03c0": "\\pi ", "\u221e": "\\infty ",
    "\u00b1": "\\pm ", "\u2213": "\\mp ", "\u222a": "\\cup ", "\u2229": "\\cap ", "\u2205": "\\emptyset ",
    "\u2208": "\\in ", "\u2248": "\\approx ", "\u2228": "\\lor ", "\u2227": "\\land ", "\u2192": "\\to ",
    "\u21d2": "\\Rightarrow ", "\u00b0": "^\\circ ",
    # spaces: no-break, en, em, thin, narrow no-break... (digit groups they separate are joined before:
    # guard.plain_number)
    **{space: " " for space in "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f"},
}

# Commands the parser reads for what they mean. Spacing, text, boxes, separators (\\to, \\quad, \\lor...),
# \\pm, \\approx, \\pmod and a degree sign after a value (\\circ: answers._sign_unit) are read before a piece
# gets here.
COMMANDS = frozenset(
    "frac dfrac tfrac sqrt binom dbinom tbinom cdot times div pi infty "
    "le leq ge geq lt gt leqslant geqslant ne neq in cup cap emptyset mathbb "
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sum prod "
    "left right big Big bigg Bigg bigl bigr Bigl Bigr lfloor rfloor lceil rceil lvert rvert vert "
    "begin end text "
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho sigma "
    "tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Sigma Phi Psi Omega".split()  # not \Pi: the
    # parser reads it as the number pi
)
# Commands a subscript may follow (a letter may too): \\log_2 8, \\sum_{k=1}, \\alpha_1.
SUBSCRIPTED = frozenset({"log", "sum", "prod"}) | {name for name in COMMANDS if name in {  # small Greek letters
    # only: the parser drops a capital one's subscript (\\Gamma_7(5) is Gamma(5))
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
    "kappa", "lambda", "mu", "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
    "omega"}}
ENVIRONMENTS = frozenset({"matrix", "pmatrix", "bmatrix"})
# Escaped characters: braces of a set, percent, spaces (a line break \\\\ splits pieces before; a dollar sign
# before a value is its unit, answers._sign_unit: anywhere else, normalization would drop it, 5\\$7 being 57).
ESCAPED = frozenset("{}% ,;:!")
CHARACTERS = frozenset("0123456789.+-*/^_=<>()[]{}|,!& \t\n%")  # not ' (the parser drops primes)

# Spacing commands, read as spaces (a line break, \\\\, is kept: it lists values)
SPACING = re.compile(r"(\\\\)|\\[ ,;:!>]|~|\\(?:quad|qquad|thinspace|medspace|thickspace|displaystyle|textstyle)"
                     r"(?![A-Za-z])")
TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[A-Za-z]|.", re.DOTALL)  # one TeX token: a command, an escaped character, one more
_ENVIRONMENT = re.compile(r"\s*\{\s*([A-Za-z*]*)\s*\}")
_WORD_ANSWER = re.compile(r"\s*\\text\{[A-Za-z' -]*\}\s*")  # a word answer, as parsing._pieces writes it
_DOUBLE_FACTORIAL = re.compile(r"!\s*!")
_DOUBLE_SCRIPT = re.compile(r"([\^_])\s*(?:\{[^{}]*\}|\\[A-Za-z]+|[^\s{])\s*\1")
_SCIENTIFIC = re.compile(r"(?<![A-Za-z\\])\d*\.?\d+[eE][+-]?\d")
_PLUS_MINUS_TYPED = re.compile(r"\+\s*-|-\s*\+")  # 5 +- 2: plus or minus, or 5 + (-2)?
_CONNECTIVE_WORD = re.compile(r"(?<![A-Za-z\\])(?:or|and)(?![A-Za-z])")
_AFTER_PERCENT = re.compile(r"\s*(?:$|[,)\]]|\\\}|\\right)")


def check(piece: str) -> None:
    """``Unreadable`` naming the first thing in ``piece`` (a box's piece, its spacing read as spaces) that this
    module does not account for: an unknown command, environment or character, words inside a value
    (``(5 \\text{ or } 7)``, which the parser reads as an interval; a piece that is words alone is a word
    answer), a subscript on anything but a letter (``5^{1}_{7}``; a number in a base, ``1011_2``, is read
    before), a percent sign with a value after it (``5 % 7``: in LaTeX, the start of a comment), a ``&`` or a
    line break outside a matrix, a double factorial (``3!!``). (A fraction's arguments are in braces by then:
    parse._braced_arguments.)"""
    connective = _CONNECTIVE_WORD.search(piece)
    if connective:  # "(5 or 7)": math-verify's normalization would make the word a comma
        raise Unreadable(f"{piece[:80]!r}: {connective.group()!r} inside a value")
    if "==" in piece or _PLUS_MINUS_TYPED.search(piece):
        raise Unreadable(f"{piece[:80]!r}: '==', '+-' or '-+'")
    if _SCIENTIFIC.search(piece):  # a whole box in scientific notation is written out before (guard.plain_number)
        raise Unreadable(f"{piece[:80]!r}: scientific notation inside a value (2e3: 2000, or 2 * e * 3?)")
    if _DOUBLE_SCRIPT.search(piece):  # 5^{1}^{2}: an error in TeX, which the parser reads as (5^1)^2
        raise Unreadable(f"{piece[:80]!r}: a double superscript or subscript")
    if _DOUBLE_FACTORIAL.search(piece):  # 3!!: a double factorial (3), which the parser reads as (3!)! (720)
        raise Unreadable(f"{piece[:80]!r}: '!!', a double factorial, which the reader does not model")
    previous = ""
    for token in TOKEN.finditer(piece):
        text, position = token.group(), token.end()
        if text.startswith("\\") and text[1:].isalpha():
            name = text[1:]
            if name not in COMMANDS:
                raise Unreadable(f"{text} is not a command the reader reads")
            if name == "text" and not _WORD_ANSWER.fullmatch(piece):
                raise Unreadable(f"{piece[:80]!r}: words inside a value")
            if name in ("begin", "end"):
                environment = _ENVIRONMENT.match(piece, position)
                if environment is None or environment.group(1) not in ENVIRONMENTS:
                    raise Unreadable(f"{piece[token.start():token.start() + 30]!r}: only the matrix environments "
                                     f"{sorted(ENVIRONMENTS)} are read")
        elif text == "\\\\":
            if "\\begin" not in piece:
                raise Unreadable(f"{piece[:80]!r}: a line break inside a value")
        elif text.startswith("\\"):
            if len(text) < 2 or text[1] not in ESCAPED:  # (a lone backslash at the end)
                raise Unreadable(f"{text!r} is not a character the reader reads")
            if text[1] == "%" and not _AFTER_PERCENT.match(piece, position):
                raise Unreadable(f"{piece[:80]!r}: a percent sign with something after it")
        elif text == "_":
            if not (previous.isalpha() or previous[1:] in SUBSCRIPTED):
                raise Unreadable(f"{piece[:80]!r} has a subscript on {previous or 'nothing'!r}, not on a letter")
        elif text == "%":
            if not _AFTER_PERCENT.match(piece, position):
                raise Unreadable(f"{piece[:80]!r}: a percent sign with something after it (in LaTeX, a comment)")
        elif text == "&":
            if "\\begin" not in piece:
                raise Unreadable(f"{piece[:80]!r}: '&' outside a matrix")
        elif text == "I":  # the parser reads it as the imaginary unit and drops its scripts (I^2 is i)
            raise Unreadable(f"{piece[:80]!r}: a capital I, which the parser reads as i whatever follows it")
        elif not (text.isascii() and (text.isalpha() or text in CHARACTERS)):
            raise Unreadable(f"{text!r} (U+{ord(text[0]):04X}) is not a character the reader reads")
        if not text.isspace():
            previous = text


def ascii_spelled(text: str) -> str:
    """``text`` with each character of ``UNICODE`` spelled as the reader reads it; ``Unreadable`` naming any other
    character outside ASCII."""
    if any(character < " " and character not in "\t\n\r" for character in text):
        raise Unreadable("a control character")
    if text.isascii():
        return text
    out = []
    for character in text:
        if character.isascii():
            out.append(character)
        elif character in UNICODE:
            out.append(UNICODE[character])
        else:
            raise Unreadable(f"{character!r} (U+{ord(character):04X}) is not a character the reader reads")
    return "".join(out)


# ------------------------------------------------------------------------------------------------ the parser

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
def latex2sympy() -> Any:
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


def parse_tree(text: str, is_real: bool) -> Any:
    """latex2sympy's parse tree of ``text``, parsed in ANTLR's two stages: first with SLL prediction, which decides
    each choice of the grammar from the rule's own lookahead (about fifteen times faster on answers); where that
    meets a syntax error, again with the full-context LL prediction latex2sympy parses with. ANTLR's SLL mode
    returns the tree LL returns, or reports a syntax error (``PredictionMode.SLL``; latex2sympy's error listener
    raises on every syntax error, so none is recovered from): the tree is LL's either way, and an error out of the
    LL stage is latex2sympy's own. ``test_the_fast_parse_builds_the_full_parse_s_tree`` holds the two trees equal
    on every text the table of answers and the adversarial passes brought to the parser."""
    from antlr4.atn.PredictionMode import PredictionMode
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    parser = _Latex2Sympy(is_real=is_real).create_parser(text)
    parser._interp.predictionMode = PredictionMode.SLL
    try:
        return parser.math()
    except Exception:  # a syntax error for SLL: LL decides (latex2sympy raises plain Exceptions)
        return _Latex2Sympy(is_real=is_real).create_parser(text).math()


def parse_twice(text: str, is_real: bool) -> tuple[Any, Any]:
    """``text`` parsed once (``parse_tree``) and converted twice: as latex2sympy converts it, and with sympy's
    evaluation off, which keeps what sympy would evaluate away as it builds the expression (``e^{\\ln 0}`` is
    exp(log(0)), not 0), for gdpo_verl/answers/meaning.py to look at. Some
    expressions latex2sympy cannot build unevaluated (a union of sets, a mixed number: it compares or adds their
    parts as it builds them); their second conversion is None, and what meaning.py checks on the evaluated one
    stands alone (docs/math-length.md, "Comparing exactly gives up")."""
    latex2sympy()  # checked, and its gap filled
    import sympy
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    tree = parse_tree(text, is_real)

    class _Converter(_Latex2Sympy):
        def create_parser(self, latex_str: str) -> Any:  # the tree parsed above, converted again (a part that
            if latex_str is text:  # latex2sympy parses on its own, a function's name, is parsed as it asks)
                return types.SimpleNamespace(math=lambda: tree)
            return super().create_parser(latex_str)

    evaluated = _Converter(is_real=is_real).parse(text)
    try:
        with sympy.core.parameters.evaluate(False):
            unevaluated = _Converter(is_real=is_real).parse(text)
    except (TypeError, ValueError):  # it compared or added parts it had not evaluated
        unevaluated = None
    except RecursionError:  # sympy asked an undefined part (log 0, left unevaluated) for its value, without end
        raise Unreadable(f"{text[:80]!r}: a part sympy cannot build without evaluating it (an undefined value?)")
    return evaluated, unevaluated
