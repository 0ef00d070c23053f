"""The task of the GRPO-vs-GDPO learning study (``scripts/learning_study.sh``, ``docs/learning-study.md``).

A tiny model reads a prompt such as ``so x = 4`` and is rewarded on three binary components:

    correct   the last ``\\boxed{}`` of the response holds the prompt's number
    short     the response has at most ``max_length`` tokens (the end token included)
    format    the response opens with ``</think>``

All three can hold at once (``</think> \\boxed{4} <|im_end|>``). Under a freshly initialised model ``correct`` and
``short`` hold in about a quarter of the responses and ``format`` in one of 21, mostly independently, so a group of 8 rollouts usually holds several
combinations with equal sums, which GRPO's summed-reward normalization merges. The vocabulary, prompts and
answers live here too, so that the model, the data and the reward cannot disagree.

The second task (``conditioned``, ``compute_conditioned_score``) keeps the prompts and the vocabulary and changes
what is rewarded, in the paper's spirit (section 4.2.1): ``correct`` as above, ``length`` that pays only for a
correct answer within ``max_length`` tokens (the conditioned length reward; the score GRPO trains on holds the
same conditioned component), and ``format`` as above. Its model starts from a short supervised warm start
(``warm_start_examples``, trained by ``gdpo_verl.cpu_run.tiny_model.warm_start``) in which 70% of the answers are
the prompt's number, so ``correct`` starts between one half and two thirds and can be learned, as an SFT model
starts RL in the paper.

Use with the "gdpo_verl" reward manager (it passes the response's token count as
``extra_info["response_length"]``):
``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.learning_study`` (and
``reward.custom_reward_function.name=compute_conditioned_score`` for the second task).
"""

from __future__ import annotations

import numbers
import random
from dataclasses import dataclass
from typing import Any

from gdpo_verl.rewards.common import VERL_KWARGS
from gdpo_verl.rewards.needs import RewardNeeds

TASK = "copy the prompt's number into \\boxed{}, open with </think>, use at most 6 tokens (rewards: correct, short, format)"
CONDITIONED_TASK = ("copy the prompt's number into \\boxed{}, within 4 tokens when correct, open with </think>, "
                    "from a warm start whose answers are right 70% of the time (rewards: correct, length if correct, "
                    "format)")
ANSWERS = ("2", "4", "9")
BOXED = tuple(f"\\boxed{{{answer}}}" for answer in ANSWERS)
THINK = "</think>"
# Word-level vocabulary of the study's model (after <pad>, <unk> and the end token).
WORDS = (*BOXED, THINK, *ANSWERS, "x", "=", "so", "we", "get", "the", "answer", "is", "user", "assistant", ":")
TEMPLATES = ("x = {}", "so x = {}", "we get x = {}", "the answer is {}")
REWARD_KEYS = ("correct", "short", "format")
CONDITIONED_REWARD_KEYS = ("correct", "length", "format")
DEFAULT_MAX_LENGTH = 6
CONDITIONED_MAX_LENGTH = 4
# Filler words a warm-start response may carry after its answer (0 to WARM_FILLER_MAX of them).
FILLER = ("so", "we", "get", "the", "answer", "is", "x", "=")
WARM_FILLER_MAX = 6
WARM_RIGHT = 0.7  # the share of warm-start answers that are the prompt's number (the others: another number)
WARM_THINK = 0.5  # the share of warm-start responses that open with </think>


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
    """Score one response of the first task; ``score`` is the sum of the three components (what GRPO trains on)."""
    correct, short, opens = _read(solution_str, ground_truth, extra_info, max_length, kwargs)
    components = {"correct": float(correct), "short": float(short), "format": float(opens)}
    return {"score": sum(components.values()), **components}


def compute_conditioned_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    max_length: int = CONDITIONED_MAX_LENGTH,
    **kwargs: Any,
) -> dict[str, float]:
    """Score one response of the second task: ``length`` is 1 only for a correct answer within ``max_length``
    tokens; ``score`` is the sum of the three components (what GRPO trains on, conditioned as GDPO sees it)."""
    correct, short, opens = _read(solution_str, ground_truth, extra_info, max_length, kwargs)
    components = {"correct": float(correct), "length": float(correct and short), "format": float(opens)}
    return {"score": sum(components.values()), **components}


compute_score.needs = RewardNeeds(returns=REWARD_KEYS)
compute_conditioned_score.needs = RewardNeeds(returns=CONDITIONED_REWARD_KEYS)


def _read(solution_str: str, ground_truth: Any, extra_info: dict | None, max_length: int,
          kwargs: dict) -> tuple[bool, bool, bool]:
    """(the last ``\\boxed{}`` holds ``ground_truth``, at most ``max_length`` tokens, opens with ``</think>``)."""
    from gdpo_verl.core.checks import whole_number  # here: the study's request check runs without numpy

    if kwargs.keys() - set(VERL_KWARGS):
        raise ValueError(f"unknown reward_kwargs {sorted(kwargs)}; the learning study's reward takes max_length only.")
    whole_number(max_length, "reward_kwargs.max_length (tokens)", minimum=1)
    response_length = (extra_info or {}).get("response_length")
    if not isinstance(response_length, numbers.Integral):
        raise ValueError(
            "extra_info['response_length'] is missing: set reward.reward_manager.name=gdpo_verl, which passes it."
        )
    words = solution_str.split()
    boxed = [position for position, word in enumerate(words) if word in BOXED]
    correct = bool(boxed) and words[boxed[-1]] == f"\\boxed{{{ground_truth}}}"
    return correct, response_length <= max_length, words[:1] == [THINK]


def warm_start_examples(count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (prompt, response) pairs for the second task's supervised warm start, drawn with ``seed``: a
    prompt of the task; ``</think>`` first in ``WARM_THINK`` of them; then ``\\boxed{}`` holding the prompt's
    number in ``WARM_RIGHT`` of them and another number otherwise; then 0 to ``WARM_FILLER_MAX`` filler words."""
    draw = random.Random(seed)
    pairs = prompts()
    examples = []
    for _ in range(count):
        prompt, answer = draw.choice(pairs)
        if draw.random() >= WARM_RIGHT:
            answer = draw.choice([other for other in ANSWERS if other != answer])
        words = [THINK] if draw.random() < WARM_THINK else []
        words.append(f"\\boxed{{{answer}}}")
        words += [draw.choice(FILLER) for _ in range(draw.randint(0, WARM_FILLER_MAX))]
        examples.append((prompt, " ".join(words)))
    return examples


@dataclass(frozen=True)
class Task:
    """One task of the study: its reward (a function of this module), components, model start, the learning rate
    and the default number of steps its study was designed with (docs/learning-study.md), and its description."""

    name: str
    description: str
    reward_function: str
    reward_keys: tuple[str, ...]
    warm_start: bool
    lr: float
    steps: int


TASKS = {
    "copy": Task("copy", TASK, "compute_score", REWARD_KEYS, warm_start=False, lr=5e-3, steps=40),
    "conditioned": Task("conditioned", CONDITIONED_TASK, "compute_conditioned_score", CONDITIONED_REWARD_KEYS,
                        warm_start=True, lr=1e-3, steps=20),
}
