"""The reward components GDPO normalizes and their weights, as a config gives them: the checks of the options
``reward_keys`` (``algorithm.gdpo_reward_keys``) and ``reward_weights`` (``algorithm.gdpo_reward_weights``) that
``options.OPTIONS`` declares, and ``weights_for``, which reads the weights against the keys."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gdpo_verl.core.inputs import weight_vector_for
from gdpo_verl.core.variants import WeightSchedule, read_weight, schedule_breakpoints, weights_at

# Names that are no reward component, and why: verl (or gdpo-verl) keeps something else under each for every
# sample, and GDPO would train on it (the dataset row's index and the summed reward are numbers).
NOT_COMPONENTS: dict[str, str] = {
    "score": "it is verl's summed reward (the 'score' that every dict from compute_score must hold, what GRPO trains "
             "on); as a GDPO component it would count the other components a second time, or alone turn GDPO into "
             "GRPO on the sum",
    "acc": "verl's reward managers store the summed reward under it when compute_score returns a plain number, so "
           "GDPO would train on the sum",
    "gdpo_signature": "it is gdpo-verl's hash of the reward components (for dynamic sampling), a number GDPO would "
                      "train on",
    "uid": "it is verl's group id of each prompt",
    "index": "verl stores the dataset row's index (extra_info.index) under it for every sample, a number GDPO would "
             "train on",
    "priority": "verl stores each sample's sampling priority under it, a number GDPO would train on",
    **dict.fromkeys(
        ("data_source", "reward_model", "extra_info", "ability", "prompt", "raw_prompt", "raw_prompt_ids",
         "tools_kwargs", "interaction_kwargs", "agent_name", "request_id", "multi_modal_data", "multi_modal_inputs",
         "__num_turns__", "__do_sample__", "tool_extra_fields", "reward_scores", "min_global_steps",
         "max_global_steps", "extras", "tool_call_counts", "processing_times", "tool_calls_times", "dummy_tensor"),
        "it is a per-sample field that verl's dataset or rollout fills",
    ),
}


def reward_keys(raw: Any, what: str) -> tuple[str, ...]:
    """The reward components, by name: a non-empty list of distinct names, none of them ``NOT_COMPONENTS``."""
    example = (
        f"for example {what}=[correct,length] with gdpo-verl's packaged config, "
        f"+{what}=[correct,length] with verl's ppo_trainer (which does not declare the key)"
    )
    if raw is None:
        raise ValueError(f"{what} is not set: list the reward components that compute_score returns, {example}.")
    if isinstance(raw, str):
        raise ValueError(f"{what} must be a list, not the string {raw!r}; {example}.")
    if not isinstance(raw, Sequence):
        raise ValueError(f"{what} must be a list; got {type(raw).__name__}; {example}.")
    keys = tuple(raw)
    if not keys:
        raise ValueError(f"{what} is empty; {example}.")
    bad = [key for key in keys if not isinstance(key, str) or not key]
    if bad:
        raise ValueError(f"{what} must hold non-empty strings; got {bad!r}.")
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ValueError(f"{what} lists {duplicates} more than once.")
    for key in keys:
        if key in NOT_COMPONENTS:
            rename = "" if key == "score" else (
                f" If compute_score returns a component of yours as {key!r}, rename it there (for example to "
                "'correct') and list the new name."
            )
            raise ValueError(
                f"{what} lists {key!r}, which is no reward component: {NOT_COMPONENTS[key]}. "
                f"List the components that compute_score returns next to 'score', {example}.{rename}"
            )
    return keys


def reward_weights(raw: Any, what: str) -> list[Any] | dict[str, Any] | None:
    """The weights as given: None (1.0 each), a list aligned with the keys, or a mapping key -> weight; each weight
    is read against the keys by ``weights_for``."""
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise ValueError(f"{what} must be a list aligned with gdpo_reward_keys or a mapping key -> weight; "
                         f"got {raw!r}.")
    return list(raw)


def weights_for(keys: tuple[str, ...], given: list[Any] | dict[str, Any] | None,
                what: str) -> dict[str, float | WeightSchedule]:
    """Each key's weight (a number, or a ``WeightSchedule``) from ``given`` (``reward_weights``): one per key, each
    a finite number or a schedule, not all 0 at any step."""
    if given is None:
        return dict.fromkeys(keys, 1.0)
    if isinstance(given, Mapping):
        weights = dict(given)
    else:
        if len(given) != len(keys):
            raise ValueError(
                f"{what} has {len(given)} value(s) {given} but gdpo_reward_keys has {len(keys)} {list(keys)}; give "
                "one weight per key, in the same order (a scheduled weight is one list of [step, weight] points)."
            )
        weights = dict(zip(keys, given, strict=True))
    try:
        weight_vector_for(keys, dict.fromkeys(weights, 1.0))  # exactly the keys
        read = {key: read_weight(weights[key], f"weight of reward {key!r}") for key in keys}
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from exc
    breakpoints = schedule_breakpoints(read)
    for step in breakpoints or [0]:  # and every step where a scheduled weight crosses 0
        try:
            weight_vector_for(keys, weights_at(read, step))
        except ValueError as exc:
            where = f" at step {step}, where the schedules give" if breakpoints else ""
            raise ValueError(f"{what}{where}: {exc}") from exc
    return {key: value if isinstance(value, WeightSchedule) else float(value) for key, value in read.items()}
