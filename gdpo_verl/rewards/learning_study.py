"""The task of the GRPO-vs-GDPO learning study (``scripts/learning_study.sh``, ``docs/learning-study.md``).

A tiny model reads a prompt such as ``so x = 4`` and is rewarded on three binary components:

    correct   the last ``\\boxed{}`` of the response holds the prompt's number
    short     the response has at most ``max_length`` tokens (the end token included)
    format    the response opens with ``</think>``

All three can hold at once (``</think> \\boxed{4} <|im_end|>``). Under a freshly initialised model ``correct`` and
``short`` hold in about a quarter of the responses and ``format`` in one of 21, mostly independently, so a group of 8 rollouts usually holds several
combinations with equal sums, which GRPO's summed-reward normalization merges. The vocabulary, prompts and
answers live here too, so that the model, the data and the reward cannot disagree.

Use with the "gdpo_verl" reward manager (it passes the response's token count as
``extra_info["response_length"]``):
``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.learning_study``.
"""

from __future__ import annotations

import numbers
from typing import Any

from gdpo_verl.core.checks import whole_number

TASK = "copy the prompt's number into \\boxed{}, open with </think>, use at most 6 tokens (rewards: correct, short, format)"
ANSWERS = ("2", "4", "9")
BOXED = tuple(f"\\boxed{{{answer}}}" for answer in ANSWERS)
THINK = "</think>"
# Word-level vocabulary of the study's model (after <pad>, <unk> and the end token).
WORDS = (*BOXED, THINK, *ANSWERS, "x", "=", "so", "we", "get", "the", "answer", "is", "user", "assistant", ":")
TEMPLATES = ("x = {}", "so x = {}", "we get x = {}", "the answer is {}")
REWARD_KEYS = ("correct", "short", "format")
DEFAULT_MAX_LENGTH = 6


def prompts() -> list[tuple[str, str]]:
    """Every (prompt, answer) of the task: 4 phrasings x 3 answers."""
    return [(template.format(answer), answer) for template in TEMPLATES for answer in ANSWERS]


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response; ``score`` is the sum of the three components (what GRPO trains on)."""
    if kwargs.keys() - {"reward_router_address", "reward_model_tokenizer"}:
        raise ValueError(f"unknown reward_kwargs {sorted(kwargs)}; the learning study's reward takes max_length only.")
    whole_number(max_length, "reward_kwargs.max_length (tokens)", minimum=1)
    response_length = (extra_info or {}).get("response_length")
    if not isinstance(response_length, numbers.Integral):
        raise ValueError(
            "extra_info['response_length'] is missing: set reward.reward_manager.name=gdpo_verl, which passes it."
        )
    words = solution_str.split()
    boxed = [position for position, word in enumerate(words) if word in BOXED]
    last = boxed[-1] if boxed else None
    correct = last is not None and words[last] == f"\\boxed{{{ground_truth}}}"
    components = {
        "correct": float(correct),
        "short": float(response_length <= max_length),
        "format": float(words[:1] == [THINK]),
    }
    return {"score": sum(components.values()), **components}
