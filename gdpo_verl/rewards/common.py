"""What the rewards with a length budget share: verl's own keyword arguments, the reasoning modes, the answer part
of a response and its token count."""

from __future__ import annotations

import numbers
from typing import Any

THINK_MODES = ("required", "none")

# What verl's reward managers themselves pass besides the reward_kwargs; anything else is a misspelled option.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def answer_part(text: str, think: str = "required") -> str | None:
    """What follows the reasoning: after the last ``</think>`` (``think="required"``; None when there is none: the
    response was cut off inside its reasoning), or the whole response (``think="none"``)."""
    if think != "required":
        return text
    if "</think>" not in text:
        return None
    return text.rsplit("</think>", 1)[1]


def response_length(extra_info: dict | None) -> int:
    """The response's true token count, which the "gdpo_verl" reward manager passes in ``extra_info``."""
    length = (extra_info or {}).get("response_length")
    if not isinstance(length, numbers.Integral):
        raise ValueError(
            "extra_info['response_length'] is missing: the length reward needs the true token count, which "
            "verl's own reward managers do not pass. Set reward.reward_manager.name=gdpo_verl."
        )
    return int(length)
