"""What a final answer states: the collection of values in its boxes, each read whole, fail-closed.

math-verify, asked for the value of a box, reads the box whole when it can and otherwise falls back to the last
number or equation it finds in it: ``\\boxed{x=7 \\land x=5}`` reads as 5, ``\\boxed{5 \\text{ (or 7)}}`` as 5.
Its parser, latex2sympy, drops what it does not know. This reader never falls back and credits only what a model
of the answer accounts for. A box's content is placed whole, or the answer is not read (``Unreadable``, with the
reason; the reward then never credits it):

- the boxes (gdpo_verl/answers/where.py); a box inside a box is read in place, with whatever surrounds
  it;
- a box is split into pieces at the places an answer lists values, at the top level only (inside braces,
  brackets and environments nothing splits): a line break (``\\\\``, ``\\newline``, ``\\cr``), a semicolon,
  ``\\quad``, a new math segment (``$``), an arrow (``\\to``, ``\\leftarrow``, ``\\Rightarrow``...) and a space
  between two numbers (``7 5``, which the parser would read as the mixed number 7 + 5) list values; ``\\lor``,
  ``\\vee`` and "or" join alternatives; ``\\land``, ``\\wedge`` and "and" join conditions, in ``\\text{}`` or not;
- a ``\\text{}`` (or ``\\mbox``, ``\\textbf``, ``\\mathrm``...) holding no words is read as math
  (``\\textbf{5}`` is 5); words and numbers in one (``\\text{5 cm}``) are not read. Words are a value of their
  own when they are a whole piece (``\\text{odd}``; a number in words is not read), a unit after a value
  (``5 \\text{ cm}``, ``5 \\mathrm{~cm}^2``: a power of 2 or 3 belongs to the unit), or a label before one when
  ``=`` or ``:`` follows (``\\text{Area} = 5``), as gdpo_verl/answers/words.py reads them; any other words
  (``5 \\text{ thousands}``, ``\\text{Wrong:} 5``) are not read;
- a dollar sign before a value and a degree sign after it are its unit (``\\$5``, ``90^\\circ``);
- each piece holds only what lexicon.py accounts for (its commands, characters and environments; a subscript
  only on a letter: ``5^{1}_{7}`` is not read), holds no two numeric atoms side by side (``2(3)``, which the
  parser would add: juxtaposed.py), and must parse whole (latex2sympy, with math-verify's normalization but
  not its removal of text); one ``\\pm`` or ``\\mp`` gives two readings, two are not read; a percent sign
  belongs to a number alone; a number with a subscript of digits is a number in that base (``1011_2``); what the
  reading means is made exact and defined by gdpo_verl/answers/meaning.py (decimals as rationals, i, odd roots;
  infinity, 0^0 and poles not read); a plain number is read without the parser (meaning.plain_number_value);
- a piece states values: a set (a union of sets of values included; a set of sets is not read) or a comma list
  states each of its elements; ``x = v`` states v when every equation of the answer is about the same one
  unknown; equations about different unknowns joined by commas or "and" (``x = 1, y = 2``) state one point, its
  coordinates in the order of the unknowns' names (joined by "or", several values; listed apart, not read); an
  equation between numbers must hold (``2 + 3 = 5`` states 5); an equation that is itself an answer (a line
  ``y = 2x - 1``, a relation between several unknowns) is one value; an equation to solve (``7y = 5``,
  ``|x| = 5``) is not read. ``a \\approx b`` states its most exact member when every decimal member is that one
  rounded (``5 \\approx 7`` is not read); ``v \\pmod{m}`` and ``x \\equiv v \\pmod{m}`` state the residue v with
  its modulus, when v is from 0 to m - 1. An inequality in one unknown states its solution set (``x \\geq 3`` is
  ``[3, \\infty)``), and such sets joined by "or" make their union, by "and" (or a comma) their intersection
  (listed apart, several values); a tuple, an interval or a union of intervals, a matrix and any expression is
  one value; a multiple-choice letter (``\\textbf{(C)}\\ 5``, ``(C)``, ``C``, and any dress of one letter:
  gdpo_verl/answers/choices.py) is one value, with the value written right after it (after a separator, a second
  value; between two letters, not read); letters listed are several values;
- values equal to one another and written alike count once (grading.distinct).

The gold is read by the same reader; gdpo_verl/answers/grading.py judges the two collections.

Everything here imports sympy, latex2sympy2_extended and math-verify when first used; it runs in the checker
processes of ``gdpo_verl.answers.checker`` (under their deadline) and in ``scripts/prepare_data.py``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gdpo_verl.answers import choices, juxtaposed, lexicon, meaning, relations
from gdpo_verl.answers import words as words_of
from gdpo_verl.answers.grading import distinct, places_of
from gdpo_verl.answers.guard import admission, plain_number
from gdpo_verl.answers.value import Unreadable, Value
from gdpo_verl.answers.where import BOX, box_content, brace_group, skip_space, top_level_split

# ------------------------------------------------------------------------------------------------ reading

# Where an answer lists or joins values (only at the top level: see _pieces), and how.
_SEPARATOR = re.compile(
    r"(?P<list>\\\\(?:\[[^\]]*\])?|\\(?:newline|cr|quad|qquad|to|rightarrow|Rightarrow|longrightarrow"
    r"|Longrightarrow|implies|iff|Leftrightarrow|leftrightarrow|leftarrow|Leftarrow|longleftarrow"
    r"|Longleftarrow|mapsto|gets)(?![A-Za-z])|[;$])"
    r"|(?P<or>\\(?:lor|vee)(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z]))"
    r"|(?P<and>\\(?:land|wedge)(?![A-Za-z])|(?<![A-Za-z\\])and(?![A-Za-z]))"
)
# A space (or a spacing command) between two number literals: two values, not a mixed number. The first number
# stands alone (not a subscript, an exponent or part of a name: \log_2 8 is one value).
_NUMBER_GAP = re.compile(r"(?<![\w^_.\\])(\d+(?:\.\d*)?)(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))+(?=[+-]?\.?\d)")
_TEXT = re.compile(r"\\(?:text|textbf|textit|textrm|textsf|textnormal|mathrm|mathbf|mathit|mathsf|mbox"
                   r"|operatorname|boldsymbol)\s*(?=\{)")
_WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")
_CONNECTIVES = {"or": "or", "and": "and"}
_BEGIN = re.compile(r"\\begin\s*\{([^{}]*)\}")
_CHOICE = re.compile(
    r"(?:\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(\s*([A-E])\s*\)\s*\}"  # \textbf{(C)}
    r"|\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*([A-E])\s*\}"  # \text{C}
    r"|\(\s*([A-E])\s*\))"  # (C)
    r"(?:\s|~|\\[ ,;:!]|\\(?:quad|qquad)(?![A-Za-z]))*(.*)",
    re.DOTALL,
)
# What may stand between choice letters: separators and connectives.
_LISTING = re.compile(r"\\text\w*\s*\{[\s,;.]*(?:or|and)?[\s,;.]*\}|(?<![A-Za-z\\])(?:or|and)(?![A-Za-z])"
                      r"|\\(?:lor|vee|land|wedge|quad|qquad|to|Rightarrow|newline|cr)(?![A-Za-z])|\\\\|\\[ ,;:!]"
                      r"|[\s,;$~]")
_FUNCTION = re.compile(r"\\(?!(?:[dt]?frac|sqrt|pi)(?![A-Za-z]))[A-Za-z]+")
_DOLLARS = re.compile(r"\s*\\\$\s*(.+?)\s*")
_DEGREES = re.compile(r"\s*(.+?)\s*\^\s*(?:\\circ|\{\s*\\circ\s*\})\s*")
_TWO_ARGUMENTS = re.compile(r"\\[dt]?(?:frac|binom)(?![A-Za-z])")
_BARE_WORD = re.compile(r"\s*\{?\s*([A-Za-z]{2,})\s*\}?\s*")
_WORD_PIECE = re.compile(r"\s*\\text\{([A-Za-z' -]*)\}\s*")  # a word value, as _pieces writes it
_GOES_ON = re.compile(r"\.\.\.|\u2026")  # an ellipsis, typed or in one character
# Punctuation after the value (not a spacing command's: 5\, is 5 and a thin space)
_TRAILING = re.compile(r"(?<!\\)[\s.,;:]+$")
_CHOICE_LETTER = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textrm)\s*\{\s*\(?\s*([A-E])\s*\)?\s*\}|\(\s*([A-E])\s*\)"
                            r"|(?<![A-Za-z\\])([A-E])(?![A-Za-z])")
_BASE = re.compile(r"\s*([0-9A-Z]+|[0-9a-f]*[0-9][0-9a-f]*)\s*_\s*\{?\s*(\d+)\s*\}?\s*")
# A number with a percent sign, alone (perhaps named: x = 20\%): its places after the point, if any.
_PERCENT = re.compile(r"\s*(?:[A-Za-z]\s*=\s*)?[+-]?\d*(?:\.(\d+))?\s*\\?%\s*")
_EMPTY_SET = re.compile(r"\\varnothing(?![A-Za-z])|\\O(?![A-Za-z])")
_DELIMITERS = re.compile(r"(?<!\\)\\[\[\]()]|\\left\s*\.|\\right\s*\.")  # \[ \] \( \), not the line break \\[
_PLUS_MINUS = re.compile(r"\\(pm|mp)(?![A-Za-z])")
_TERM = re.compile(r"[+-]|\\[pm]m(?![A-Za-z])")  # where a sum's terms meet
# The names latex2sympy gives to what it reads (letters, Greek letters, subscripts): anything else in a symbol's
# name is text it took in whole.
_SYMBOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_{}]*'*")


def parse(text: str) -> list[Value]:
    """The distinct values ``text`` (a box's content, or a gold answer) states; ``Unreadable`` when some of it
    cannot be placed, or when the guards refuse it (gdpo_verl/answers/guard.py)."""
    return parse_all([text])


def parse_all(texts: list[str]) -> list[Value]:
    """The distinct values of several boxes, as one collection; ``Unreadable`` as ``parse``."""
    refused = admission(texts)
    if refused is not None:
        raise Unreadable(refused)
    values = [value for text in texts for value in _read(plain_number(text))]
    if not values:
        raise Unreadable("it states no value" if len(texts) == 1 else "no box states a value")
    return distinct(values)


def _read(text: str) -> list[Value]:
    text = _prepared(text)
    choice = _choice(text)
    if choice is not None:
        return choice
    values: list[Value] = []
    pieces = _pieces(text)
    for piece, join, unit in pieces:
        piece, unit = _sign_unit(piece, unit)
        if unit is not None and "%" in piece:
            raise Unreadable(f"{piece[:80]!r}: a percent sign beside a unit")
        stated = _piece_values(piece)
        values += [replace(value, join=join if index == 0 else "and", unit=unit) for index, value in enumerate(stated)]
    return relations.joined_sets(relations.labelled(values))


def _sign_unit(piece: str, unit: str | None) -> tuple[str, str | None]:
    """A dollar sign before a value or a degree sign after it, read as the value's unit (``\\$5``, ``90^\\circ``);
    a degree sign anywhere else is not read (``\\sin 30^\\circ``: the parser would read radians)."""
    for sign, name in ((_DOLLARS, "dollar"), (_DEGREES, "degree")):
        found = sign.fullmatch(piece)
        if found and not _FUNCTION.search(found.group(1)):  # \sin 30^\circ: the sign is not the value's
            if unit is not None:
                raise Unreadable(f"{piece[:80]!r}: a unit twice")
            if name == "degree" and len(top_level_split(found.group(1).strip().lstrip("+-"), _TERM)) > 1:
                raise Unreadable(f"{piece[:80]!r}: a degree sign after a sum: on its last term, or on all?")
            piece, unit = found.group(1), name
    return piece, unit


def _prepared(text: str) -> str:
    """``text`` with what only presents a value taken away: a box inside (read in place), display delimiters,
    ``\\left.``/``\\right.``, trailing punctuation; ``\\varnothing`` and the characters outside ASCII the reader
    knows spelled as LaTeX reads them (lexicon.UNICODE; any other is ``Unreadable``)."""
    for _ in range(8):  # boxes in boxes, from the outside in
        box = BOX.search(text)
        if box is None:
            break
        content, end = box_content(text, box)
        text = f"{text[:box.start()]}{{{content}}}{text[end:]}"
    else:
        raise Unreadable("boxes nested more than 8 deep")
    if _GOES_ON.search(text):  # 3.14159..., 0.333...: a value written as going on states no value
        raise Unreadable(f"{text[-40:]!r}: a value that goes on ('...')")
    text = _braced_arguments(lexicon.ascii_spelled(text))
    text = _EMPTY_SET.sub(r"\\emptyset", _DELIMITERS.sub(" ", text))
    return _TRAILING.sub("", text).strip()


def _braced_arguments(text: str) -> str:
    """``text`` with each fraction's and binomial's two arguments in braces, read as TeX reads an argument written
    without them, one token: ``\\frac 1 2``, ``\\frac12`` and ``\\frac\\pi 6`` are ``\\frac{1}{2}`` and
    ``\\frac{\\pi}{6}``; ``\\frac 123`` is ``\\frac{1}{2}3``, which juxtaposed.py then refuses."""
    out, position = [], 0
    while (command := _TWO_ARGUMENTS.search(text, position)) is not None:
        out.append(text[position:command.end()])
        position = command.end()
        for _ in range(2):
            start = skip_space(text, position)
            if start < len(text) and text[start] == "{":
                content, position = brace_group(text, start)
            elif (token := lexicon.TOKEN.match(text, start)) is not None:
                content, position = token.group(), token.end()
            else:
                break  # no argument: the parser reports the piece
            out.append("{" + _braced_arguments(content) + "}")
    return "".join(out) + text[position:]


def _choice(text: str) -> list[Value] | None:
    """A multiple-choice letter, alone or with its value after it (the rest of the box, one value, nothing
    between: ``\\textbf{(C)}\\ 5``); several letters for an answer that gives several; the letter and the values
    of the rest when something lists them (``(C) \\text{ or } 7``); None when ``text`` is not one."""
    lone = choices.letter_alone(text)
    if lone:
        return [Value(choice=lone)]
    several = choices.letters_alone(text)
    if several:
        return [Value(choice=letter) for letter in dict.fromkeys(several)]
    found = _CHOICE.fullmatch(text)
    if not found:
        return None
    letter = next(group for group in found.groups()[:3] if group)
    rest = found.group(4).strip()
    if not rest:
        return [Value(choice=letter)]
    others = [next(group for group in other.groups() if group) for other in _CHOICE_LETTER.finditer(rest)]
    if others:  # "(C) or (D)", "(C) D": several choices, and nothing else
        if _LISTING.sub("", _CHOICE_LETTER.sub("", rest)).strip():
            raise Unreadable(f"choice letters with something else between them: {rest[:80]!r}")
        return [Value(choice=choice) for choice in dict.fromkeys([letter, *others])]
    values = distinct(_read(rest))
    pieces = _pieces(rest)
    if len(pieces) != 1 or not rest.startswith(pieces[0][0]):  # "(C) or 7": a letter, then values
        return [Value(choice=letter), *values]
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
    depth, position, unit_at = 0, 0, 0  # unit_at: where in ``out`` the unit was read (nothing may follow it)

    def cut(next_join: str) -> None:
        nonlocal out, join, unit
        if unit is not None and "".join(out[unit_at:]).strip():  # 5 \text{ m} 7: a unit ends a value
            raise Unreadable(f"{''.join(out[unit_at:]).strip()[:40]!r} after the unit {unit!r}")
        piece = "".join(out).strip()
        if piece:
            pieces.append((piece, join, unit))
            join = next_join
        elif pieces:  # a separator after another: the stronger reading of the two
            if {join, next_join} == {"and", "or"}:  # "and/or", "and, or": which?
                raise Unreadable("\"and\" and \"or\" together between two values")
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
                content, after = brace_group(text, group.end())
                content = re.sub(r"~|\\[ ,;:!]", " ", content)  # \mathrm{~cm}: spacing is a space
                words = _WORD.findall(content)
                if _WORD.sub("", content).strip(" ,.;:'/-") or not words:  # not words only: read it as math
                    if any(len(word) > 1 for word in words):  # \text{5 cm}: words and numbers, not math
                        raise Unreadable(f"words and numbers in one text: {content.strip()[:80]!r}")
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
                    if len(set(lowered)) > 1:  # \text{ and/or }
                        raise Unreadable(f"\"and\" and \"or\" together: {content.strip()[:40]!r}")
                    cut(_CONNECTIVES[lowered[0]])
                    continue
                if any(word in _CONNECTIVES for word in lowered):  # \text{ or seven}: words and connectives
                    if words_of.has_number_word(words):
                        raise Unreadable(f"a number written in words: {content.strip()[:80]!r}")
                    phrase: list[str] = []
                    for word in words:
                        if word.lower() not in _CONNECTIVES:
                            phrase.append(word)
                            continue
                        if phrase:  # the words between two connectives: one word value
                            out.append(f"\\text{{{' '.join(phrase)}}}")
                            phrase = []
                        cut(_CONNECTIVES[word.lower()])
                    if phrase:
                        out.append(f"\\text{{{' '.join(phrase)}}}")
                    continue
                if not before and not rest:  # the whole piece: a word answer
                    if words_of.has_number_word(words):
                        raise Unreadable(f"a number written in words: {content.strip()[:80]!r}")
                    out.append(f"\\text{{{' '.join(words)}}}")
                    continue
                if before and not before.endswith(("=", "(", "[", "{")):  # after a value: a unit, or not read
                    if unit is not None:
                        raise Unreadable(f"a second unit: {content.strip()[:80]!r}")
                    power = None
                    if re.match(r"\s*\^", text[position:]):  # cm^2: the exponent is the unit's, a 2 or a 3
                        exponent = re.match(r"\s*\^\s*(?:\{\s*([23])\s*\}|([23])(?!\d))", text[position:])
                        if exponent is None:
                            raise Unreadable(f"{text[position:position + 30]!r}: a unit's power is 2 or 3")
                        power = exponent.group(1) or exponent.group(2)
                        position += exponent.end()
                    if re.match(r"\s*[_^]", text[position:]):  # 5 \text{ m}^3_{7}
                        raise Unreadable(f"{text[position:position + 30]!r}: a script after a unit")
                    unit = words_of.unit(content, power)
                    if unit is None:
                        raise Unreadable(f"{content.strip()[:80]!r} after a value is not a unit the reader knows")
                    unit_at = len(out)
                    continue
                label = re.match(r"\s*(?:=|:)", text[position:])
                if (content.rstrip().endswith(":") or label) and words_of.is_label(words):  # a label
                    if label:
                        position += label.end()
                    continue
                raise Unreadable(f"words before a value that are not a label the reader knows: "
                                 f"{content.strip()[:80]!r}")
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
    number = meaning.plain_number_value(piece)
    if number is not None:
        return [number]
    base = _BASE.fullmatch(piece)
    if base and (base.group(1).isdigit() or int(base.group(2)) > 10 and len(base.group(1)) > 1):  # 1011_2, FF_{16}
        digits, radix = base.group(1).upper().lstrip("0") or "0", int(base.group(2))
        if not 2 <= radix <= 36 or any(int(digit, 36) >= radix for digit in digits):
            raise Unreadable(f"{piece.strip()!r} is no number in base {radix}")
        import sympy

        return [Value(sympy.Integer(int(digits, radix)), literal=f"{digits}_{radix}")]
    word = _BARE_WORD.fullmatch(piece) or _WORD_PIECE.fullmatch(piece)
    if word:  # a word, in \\text{} or not (as a product of unknowns, "on" would be the word "no")
        if words_of.has_number_word(word.group(1).split()):
            raise Unreadable(f"a number written in words: {word.group(1)[:80]!r}")
        import sympy

        return [Value(sympy.Symbol(" ".join(word.group(1).lower().split()), real=True))]
    modulus, piece = relations.modulus(piece)
    congruence = top_level_split(piece, relations.CONGRUENT)
    if modulus is not None or len(congruence) > 1:
        return [relations.residue([_single(member, piece) for member in congruence], modulus, piece)]
    approximation = top_level_split(piece, relations.APPROXIMATELY)
    if len(approximation) > 1:
        return [relations.approximated([_single(member, piece) for member in approximation], piece)]
    readings = _plus_minus_readings(piece)
    return [value for reading in readings for value in _parsed_values(reading, piece)]


def _single(member: str, written: str) -> Value:
    """The one value a member of a relation states (a number, or a lone unknown)."""
    values = _parsed_values(member, member)
    if len(values) != 1 or values[0].unknown is not None:
        raise Unreadable(f"{written[:80]!r}: {member.strip()[:40]!r} is not one value")
    return values[0]


def _plus_minus_readings(piece: str) -> list[str]:
    """``piece`` with its ``\\pm`` (or ``\\mp``) read as + and as -; a piece with more than one is not read
    (``\\pm 2 \\pm 3``: are the signs tied or free?)."""
    signs = len(_PLUS_MINUS.findall(piece))
    if signs > 1:
        raise Unreadable(f"more than one \\pm in {piece[:80]!r}")
    return [_PLUS_MINUS.sub("+", piece), _PLUS_MINUS.sub("-", piece)] if signs else [piece]


def _parsed_values(text: str, written: str) -> list[Value]:
    import sympy
    from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
    from math_verify.parser import should_treat_as_complex

    # math-verify's normalization of a box, without its removal of units and text (which drops what it cannot
    # read: "5 \text{ (or 7)}" would become "5"); spacing commands are spaces
    config = NormalizationConfig(basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="none",
                                 equations=False)
    spaced = lexicon.SPACING.sub(lambda space: space.group(1) or " ", text)
    lexicon.check(spaced)  # only what the reader accounts for reaches the lenient parser
    normalized = normalize_latex(spaced, config).strip()
    if not normalized:
        return []
    juxtaposed.check(normalized)  # 2(3), {3}4, 5^\\circ 7: the parser would add them
    meaning.check_infinity(normalized)
    meaning.check_log_bases(normalized)
    try:
        expr, unevaluated = lexicon.parse_twice(normalized, is_real=not should_treat_as_complex(normalized))
    except (MemoryError, RecursionError):  # the machine's limits, not the text's: no verdict, nothing kept
        raise
    except Exception as error:  # latex2sympy raises plain Exceptions for text it cannot parse
        reason = (str(error).splitlines() or [type(error).__name__])[0][:80]
        raise Unreadable(f"{normalized[:80]!r} does not parse whole: {reason}") from None
    _no_stray_text(expr, normalized)
    try:  # sympy evaluating what the parser built: an error of its own is no reading (1/cot(0), a complex interval)
        expr = meaning.exact_reading(expr, unevaluated, normalized)
        stated = relations.stated(expr, normalized)
    except Unreadable:
        raise
    except (ArithmeticError, ValueError, TypeError, AttributeError, NotImplementedError) as error:
        reason = (str(error).splitlines() or [""])[0][:60]
        raise Unreadable(f"{normalized[:80]!r}: sympy cannot evaluate it ({type(error).__name__}: {reason})") from None
    literals = meaning.literals(written)
    percent, percent_places = "%" in written, None  # \\%, or % at the end (lexicon.check)
    if percent:  # a percent sign belongs to one number alone: "0.2, 30\\%" or "0.2 + 0\\%" would scale the rest
        number = _PERCENT.fullmatch(written)
        if number is None or len(stated) != 1:
            raise Unreadable(f"{written[:80]!r}: a percent sign is read on a number alone")
        value = sympy.sympify(stated[0][0]).doit()  # 14.2857 / 100, evaluated: 0.142857, with 6 places
        places = len(number.group(1) or "")
        stated, percent_places, literals = [(value, None)], (places + 2 if places else None), ()
    values = []
    for value, unknown in stated:
        value = meaning.evaluated(value)
        decimals = percent_places if percent else places_of(value, literals, [value])
        values.append(Value(value, decimals=decimals, places=literals, percent=percent, unknown=unknown))
    return values


def _no_stray_text(expr: Any, normalized: str) -> None:
    for symbol in getattr(expr, "free_symbols", ()):
        if not _SYMBOL_NAME.fullmatch(str(symbol)):
            raise Unreadable(f"{normalized[:80]!r} holds text the reader cannot place: {str(symbol)[:40]!r}")
