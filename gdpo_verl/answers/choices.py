"""Multiple-choice letters, in whatever dress a box gives them (gdpo_verl/answers/parsing.py reads the rest of a
box): one letter (``letter_alone``: ``{C}``, ``\\text{C.}``, ``\\text{Answer: } C``, ``\\text{Option B}``, ``(c)``,
``\\left(B\\right)``, ``[C]``), or letters listed, several values (``letters_alone``: ``C D``, ``\\text{B/C}``);
letters side by side (``CD``) are a word, not letters."""

from __future__ import annotations

import re

from gdpo_verl.answers import lexicon

_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|textsf|textnormal|mathrm|mathbf|mathit|mathsf|mbox)"
                      r"(?![A-Za-z])")
_CHOICE_LABEL = r"(?i:(?:the )?(?:final |correct )?(?:answer|option|choice)(?: is)?) ?[:=]? ?"
_SIZING = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])")
# one letter: a capital, or a small one in parentheses or after a label
_LETTER_ALONE = re.compile(rf"(?:{_CHOICE_LABEL})?(?:\( ?([A-Ea-e]) ?\)|\[ ?([A-Ea-e]) ?\]|([A-E]))\.?"
                           rf"|{_CHOICE_LABEL}([a-e])\.?")
# letters only, two or more, with what lists them between: several choices
_LETTERS = re.compile(rf"(?:{_CHOICE_LABEL})?((?:\(? ?[A-E] ?\)?|[ ,;/.&]|(?<![A-Za-z])(?:and|or)(?![A-Za-z]))+)")


def letter_alone(text: str) -> str | None:
    """The choice letter a box states alone, in any dress: ``{C}``, ``\\text{C.}``, ``\\text{Answer: } C``,
    ``\\text{Option B}``, ``\\textbf{(C)}``: the box's text without its text commands, braces and spacing is one
    capital letter A to E, perhaps in parentheses or brackets or followed by a point, perhaps after "answer",
    "option" or "choice" (with "the", "final" or "correct" before and "is" or a colon after); None otherwise."""
    letter = _LETTER_ALONE.fullmatch(_undressed(text))
    return next(group for group in letter.groups() if group).upper() if letter else None


def letters_alone(text: str) -> list[str] | None:
    """The choice letters a box states when it holds letters only, two or more, and what lists them (``C D``,
    ``{C}{D}``, ``\\text{B/C}``, ``\\text{Answer: } (B)(C)``): several values, a hedge; None otherwise."""
    letters = _LETTERS.fullmatch(_undressed(text))
    if letters is None or re.search(r"[A-E][A-E]", letters.group(1)):  # CD, ABC: a word, not letters listed
        return None
    found = re.findall(r"[A-E]", letters.group(1))
    return found if len(found) > 1 else None


def _undressed(text: str) -> str:
    """``text`` without its text commands, braces and spacing, its words one space apart."""
    text = _SIZING.sub(" ", _WRAPPER.sub(" ", text)).replace("{", " ").replace("}", " ")
    return " ".join(lexicon.SPACING.sub(" ", text).split())
