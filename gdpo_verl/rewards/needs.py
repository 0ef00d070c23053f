"""What a reward function needs of a training run, declared by the reward itself: ``compute_score.needs``, a
``RewardNeeds``. The config check (``gdpo_verl/verl_adapter/reward_config.py``) reads it from the function
``reward.custom_reward_function`` names (a ``pkg://<module>`` or a file, imported in the driver as verl's reward
workers import it), before Ray starts; a reward without it needs nothing of gdpo-verl's checks. No verl.

A reward of your own declares what its dict holds, so that a misspelled ``algorithm.gdpo_reward_keys`` entry stops
the run before Ray starts (without it, at the first response scored)::

    from gdpo_verl.rewards.needs import RewardNeeds

    compute_score.needs = RewardNeeds(returns=("correct", "length"))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RewardNeeds:
    """
    Attributes:
        returns: the keys of the dict it returns besides ``score``, each in every call (None for a response a
            component does not apply to). The config check refuses a reward key that is not among them, naming the
            closest; ``()``: not declared (such a key then stops the run at the first response scored).
        weights_in_score: its summed ``score`` (what GRPO and dynamic sampling train on) weighs each component by
            a ``<component>_weight`` reward_kwarg (1.0 when not given, unless ``options`` says otherwise), which must
            then equal the component's weight in ``algorithm.gdpo_reward_weights``: the config check refuses weights
            that differ.
        options: reads the reward_kwargs as a call reads them and returns every option's value, raising ValueError
            naming an unknown or bad one (gdpo-verl's rewards: ``rewards.kwargs.read`` on their declared
            ``KWARGS``). The config check runs it before Ray starts, so that a misspelled option stops the run
            there rather than at the first response scored, and reads the score's weights from what it returns.
        node_check: it runs model-written programs in gdpo-verl's sandbox. Called with the reward_kwargs (verl's
            ``reward.sandbox_fusion`` settings among them as ``sandbox_fusion``, the only way a reward learns
            them) on the driver's node before Ray starts and on every Ray node before training, it raises what
            keeps the reward from running there. The "gdpo_verl" reward manager passes the reward its
            ``sandbox_fusion`` where the function also names the class it makes (``compute_score.reward_class``,
            as ``gdpo_verl.rewards.coding`` does).
    """

    returns: tuple[str, ...] = ()
    weights_in_score: bool = False
    node_check: Callable[..., Any] | None = None
    options: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.returns, str) or not isinstance(self.returns, (tuple, list)) \
                or not all(isinstance(key, str) and key for key in self.returns):
            raise TypeError(f"RewardNeeds.returns must be a tuple of key names, such as ('correct', 'length'); got "
                            f"{self.returns!r}.")
        object.__setattr__(self, "returns", tuple(self.returns))
