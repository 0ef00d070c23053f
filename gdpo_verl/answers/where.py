"""Where a response's answer is, for every reward that reads one (the math reward, the coding reward):

- the answer part (``answer_part``): what follows the *first* ``</think>`` of a response (a reasoning model's), or
  the whole response (``think="none"``); a response without ``</think>`` was cut off inside its reasoning and has
  no answer. The first, because everything a model writes after it closed its reasoning is its answer: a second
  ``</think>`` hides nothing written before it (two boxes around it are two values, a hedge; the last of two code
  blocks is the program run).
- the boxes of the answer part (``final_answers``): the content of each box command (``\\boxed``, ``\\fbox``,
  ``\\framebox``, ``\\colorbox``, ``\\fcolorbox``, ``\\bbox``), in braces or one token after it
  (``\\boxed 5``). A box that never closes, or one with an optional argument (``\\boxed[7]{5}``: what the
  argument says would go unread), is ``Unreadable``.
- the parts of a multi-part answer (``answer_parts``), and the text helpers the reader splits with
  (``brace_group``, ``top_level_split``).
"""

from __future__ import annotations

import re

from gdpo_verl.answers.guard import plain_number
from gdpo_verl.answers.value import Unreadable

THINK_MODES = ("required", "none")

BOX = re.compile(r"\\(boxed|fbox|framebox|colorbox|fcolorbox|bbox)(?![A-Za-z])")
_GROUP_ARGUMENTS = {"colorbox": 1, "fcolorbox": 2}  # brace groups before the content: colours
# xcolor's base colour names, the only colour arguments read.
COLOURS = frozenset("red green blue cyan magenta yellow black white gray grey darkgray lightgray brown lime olive "
                    "orange pink purple teal violet".split())


def boxes(text: str) -> list[str]:
    """The content of every box command in ``text``, in order (a box inside a box is part of the outer one's
    content); ``Unreadable`` when a box never closes."""
    found = []
    position = 0
    while (box := BOX.search(text, position)) is not None:
        content, position = box_content(text, box)
        found.append(content)
    return found


def box_content(text: str, box: re.Match) -> tuple[str, int]:
    """The content of the box command ``box`` and the position after it: a brace group, or one token (a digit,
    a letter or a command) after optional spaces."""
    position = skip_space(text, box.end())
    if position < len(text) and text[position] == "[":  # \boxed[7]{5}: what the optional argument says is not read
        raise Unreadable(f"\\{box.group(1)} with an optional argument")
    for _ in range(_GROUP_ARGUMENTS.get(box.group(1), 0)):
        colour, position = brace_group(text, position)
        if colour.strip() not in COLOURS:  # \colorbox{or 9}{4}: what a colour argument says is not read
            raise Unreadable(f"\\{box.group(1)} with the colour {colour.strip()[:40]!r}, not one of xcolor's names")
        position = skip_space(text, position)
    if position < len(text) and text[position] == "{":
        content, position = brace_group(text, position)
        return content.strip(), position
    token = re.match(r"\\[A-Za-z]+|\\.|\S", text[position:])
    if token is None:
        raise Unreadable(f"\\{box.group(1)} with nothing after it")
    return token.group(), position + token.end()


def skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def brace_group(text: str, opening: int) -> tuple[str, int]:
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


COMMA = re.compile(",")


def top_level_split(text: str, sign: re.Pattern = COMMA) -> list[str]:
    """``text`` split at each ``sign`` outside brackets, braces and a set's ``\\{ \\}`` (the one splitter of the
    reader: a multi-part answer's commas, a relation's sign)."""
    members, depth, start, position = [], 0, 0, 0
    while position < len(text):
        found = sign.match(text, position) if depth == 0 else None
        if found:
            members.append(text[start:position])
            position = start = found.end()
            continue
        character = text[position]
        if character == "\\" and text[position + 1:position + 2] not in ("{", "}"):
            position += 2  # a command or an escaped character other than a set's brace
            continue
        if character == "\\":
            position += 1
            character = text[position]
        if character in "{[(":
            depth += 1
        elif character in "}])":
            depth = max(0, depth - 1)
        position += 1
    return [*members, text[start:]]


def answer_part(text: str, think: str = "required") -> str | None:
    """What follows the reasoning: after the first ``</think>`` (``think="required"``; None when there is none: the
    response was cut off inside its reasoning), or the whole response (``think="none"``)."""
    if think != "required":
        return text
    if "</think>" not in text:
        return None
    return text.split("</think>", 1)[1]


def final_answers(text: str, think: str = "required") -> list[str]:
    """The content of every non-empty box in the answer part of ``text``, in order: together, the values the answer
    states (none without an answer part). ``Unreadable`` when a box never closes."""
    answer = answer_part(text, think)
    return [box for box in boxes(answer) if box] if answer is not None else []


def answer_parts(text: str, think: str = "required") -> list[str]:
    """The parts of a multi-part answer: the contents of every box of the answer part when there are several, else
    the one box's content split at top-level commas (not those between thousands, ``guard.plain_number``);
    ``Unreadable`` for a box that never closes."""
    found = final_answers(text, think)
    if len(found) > 1:
        return found
    return [part.strip() for part in top_level_split(plain_number(found[0])) if part.strip()] if found else []


def last_boxed(text: str) -> str | None:
    """The content of the last non-empty box in ``text``; None if none, or if a box never closes
    (scripts/prepare_data.py reads a gold answer from a worked solution so)."""
    try:
        found = [box for box in boxes(text) if box]
    except Unreadable:
        return None
    return found[-1] if found else None
