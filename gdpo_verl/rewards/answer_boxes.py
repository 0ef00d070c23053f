"""Where a response's answer is: the content of each box command (``\\boxed``, ``\\fbox``, ``\\framebox``,
``\\colorbox``, ``\\fcolorbox``, ``\\bbox``), in braces or one token after it (``\\boxed 5``). A box that never
closes, or one with an optional argument (``\\boxed[7]{5}``: what the argument says would go unread), is
``Unreadable``."""

from __future__ import annotations

import re

from gdpo_verl.rewards.answer_lexicon import Unreadable

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
