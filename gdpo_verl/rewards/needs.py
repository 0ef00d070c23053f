"""What a reward function needs of a training run, declared by the reward itself: ``compute_score.needs``, a
``RewardNeeds``. The config check (``gdpo_verl/verl_adapter/reward_config.py``) reads it from the function
``reward.custom_reward_function`` names, for a reward loaded as ``pkg://<module>``, before Ray starts; a reward
without it needs nothing of gdpo-verl's checks. No verl.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RewardNeeds:
    """
    Attributes:
        weights_in_score: its summed ``score`` (what GRPO and dynamic sampling train on) weighs each component by
            a ``<component>_weight`` reward_kwarg, which must then equal the component's weight in
            ``algorithm.gdpo_reward_weights``: the config check refuses weights that differ.
        node_check: it runs model-written programs in gdpo-verl's sandbox. Called with the reward_kwargs (verl's
            ``reward.sandbox_fusion`` settings among them as ``sandbox_fusion``, the only way a reward learns
            them) on the driver's node before Ray starts and on every Ray node before training, it raises what
            keeps the reward from running there. The "gdpo_verl" reward manager passes the reward its
            ``sandbox_fusion`` where the function also names the class it makes (``compute_score.reward_class``,
            as ``gdpo_verl.rewards.coding`` does).

    Read only for a reward loaded as ``pkg://<module>``: the driver imports that module before Ray starts.
    """

    weights_in_score: bool = False
    node_check: Callable[..., Any] | None = None
