"""What the rewards with a length budget share: verl's own keyword arguments and a response's token count. (Where
the answer part of a response begins is gdpo_verl/answers/where.py's, for every reward.)"""

from __future__ import annotations

import numbers

# What verl's reward managers themselves pass besides the reward_kwargs; anything else is a misspelled option.
VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def response_length(extra_info: dict | None) -> int:
    """The response's true token count, which the "gdpo_verl" reward manager passes in ``extra_info``."""
    length = (extra_info or {}).get("response_length")
    if not isinstance(length, numbers.Integral):
        raise ValueError(
            "extra_info['response_length'] is missing: the length reward needs the true token count, which "
            "verl's own reward managers do not pass. Set reward.reward_manager.name=gdpo_verl."
        )
    return int(length)
