"""The "gdpo" advantage estimator with the signature verl's ``compute_advantage`` calls.

verl passes ``non_tensor_batch`` and ``batch`` to the estimator registered as "gdpo" only; this module
gathers each reward's scores from them (and, under the V1 trainer, from what ``integration`` fetched from
TransferQueue for the step), hands them to ``gdpo_parts`` and leaves the step's ``gdpo/`` metrics for
the trainer hook to log. ``observe_step`` leaves the same metrics when another estimator trains.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gdpo_verl.advantage import GdpoParts, gdpo_parts, outcome_scores
from gdpo_verl.diagnostics import advantage_metrics
from gdpo_verl.records import append_record
from gdpo_verl.verl_adapter.settings import Condition, GdpoSettings, settings_from_config

TOKEN_LEVEL_PREFIX = "token_level_scores_"


@dataclass(frozen=True)
class StepInputs:
    """What the V1 advantage stage fetched besides verl's own fields, one entry per row of its batch.

    Attributes:
        keys: TransferQueue keys, ``{uid}_{session_id}_{output_index}``, in the batch's row order.
        components: per-response values by name, like ``non_tensor_batch`` (numbers, or per-token lists
            under ``token_level_scores_<key>``).
        tensors: ``token_level_scores_<key>`` ``(B, T)`` tensors.
    """

    keys: Sequence[str]
    components: Mapping[str, np.ndarray] = field(default_factory=dict)
    tensors: Mapping[str, torch.Tensor] = field(default_factory=dict)
    global_step: int | None = None


_STEP_INPUTS: ContextVar[StepInputs | None] = ContextVar("gdpo_verl_step_inputs", default=None)
_last_metrics: dict[str, float] = {}
_calls = 0


@contextmanager
def step_inputs(inputs: StepInputs) -> Iterator[None]:
    """Make ``inputs`` visible to the estimator calls made inside the block."""
    token = _STEP_INPUTS.set(inputs)
    try:
        yield
    finally:
        _STEP_INPUTS.reset(token)


def current_step_inputs() -> StepInputs | None:
    """What the V1 advantage stage fetched, inside its ``step_inputs`` block; None elsewhere."""
    return _STEP_INPUTS.get()


def pop_step_metrics() -> dict[str, float]:
    """The ``gdpo/`` metrics of the last estimator call, once; empty if none since the last pop."""
    global _last_metrics
    metrics, _last_metrics = _last_metrics, {}
    return metrics


def compute_gdpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    non_tensor_batch: Mapping[str, np.ndarray] | None = None,
    batch: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GDPO advantages for verl.

    Args:
        token_level_rewards: ``(B, T)`` verl's summed reward; GDPO does not use it (it reads the components).
        response_mask: ``(B, T)``.
        index: ``(B,)`` verl's ``uid`` array: the group of each response.
        config: verl's ``algorithm`` config; see ``gdpo_verl/config/gdpo_trainer.yaml`` for the keys read.
        non_tensor_batch: per-response reward components, as verl stores what ``compute_score`` returns.
        batch: the tensor batch; ``token_level_scores_<key>`` ``(B, T)`` tensors take precedence there.

    Returns:
        ``(advantages, returns)``, both the same ``(B, T)`` tensor.
    """
    global _last_metrics, _calls
    _calls += 1
    settings = settings_from_config(config)
    advantages, parts, uids, raw_means = _gdpo_step(settings, response_mask, index, non_tensor_batch, batch)
    _last_metrics = advantage_metrics(parts) | raw_means
    if settings.dump_dir is not None:
        # The trainer's global step under V1; the legacy trainer does not hand it over, so there it is the
        # call count of this process (the same unless the run resumed from a checkpoint).
        inputs = _STEP_INPUTS.get()
        step = inputs.global_step if inputs is not None and inputs.global_step is not None else _calls
        options = dict(norm_by_std=settings.norm_by_std, batch_norm=settings.batch_norm, eps=settings.eps)
        append_record(settings.dump_dir, parts, uids, step, **options)
    return advantages, advantages


def observe_step(
    config: Any,
    response_mask: torch.Tensor,
    index: np.ndarray,
    non_tensor_batch: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Another estimator trains on this batch: leave the ``gdpo/`` metrics of what GDPO would compute on it.

    The same metrics as under "gdpo" (per-reward means, collapse under GRPO and GDPO, ...), for the trainer
    hook to log next to the other estimator's; its advantages are not touched.
    """
    global _last_metrics
    settings = settings_from_config(config, training=False)
    _, parts, _, raw_means = _gdpo_step(settings, response_mask, index, non_tensor_batch, None)
    _last_metrics = advantage_metrics(parts) | raw_means


def _gdpo_step(
    settings: GdpoSettings,
    response_mask: torch.Tensor,
    index: Any,
    non_tensor_batch: Mapping[str, np.ndarray] | None,
    batch: Any,
) -> tuple[torch.Tensor, GdpoParts, np.ndarray, dict[str, float]]:
    """(advantages ``(B, T)``, the computation's parts, the uid of each of their rows, raw means of conditioned
    rewards) from verl's inputs and, under the V1 trainer, what the advantage stage fetched."""
    if index is None:
        raise ValueError(
            "the gdpo estimator needs the group id of every response (verl's non_tensor_batch['uid']); none was given."
        )
    per_response = dict(non_tensor_batch) if non_tensor_batch is not None else {}
    tensor_keys = list(batch.keys()) if batch is not None else []
    tensors = {key: batch[key] for key in tensor_keys if str(key).startswith(TOKEN_LEVEL_PREFIX)}
    inputs = _STEP_INPUTS.get()
    final_rows = None
    if inputs is not None:
        final_rows, row_to_final = session_layout(inputs.keys, index)
        per_response.update(inputs.components)
        tensors.update(inputs.tensors)
    rewards = gather_rewards(settings.reward_keys, response_mask, per_response, tensors)
    raw_means = {}
    if settings.conditions:
        # Logged next to gdpo/<reward>/mean (the conditioned value), over the responses the metrics count.
        counted = response_mask.any(dim=-1)
        if final_rows is not None:
            counted &= torch.zeros_like(counted).index_fill_(0, torch.as_tensor(final_rows, device=counted.device), True)
        for condition in settings.conditions:
            raw = outcome_scores(rewards, [condition.reward], response_mask)[counted, 0]
            raw_means[f"gdpo/{condition.reward}/raw_mean"] = raw.to(torch.float64).mean().item()
        rewards = apply_conditions(rewards, settings.conditions, response_mask)
    options = dict(norm_by_std=settings.norm_by_std, batch_norm=settings.batch_norm, eps=settings.eps)

    uids = np.asarray(index)
    if final_rows is None:
        parts = gdpo_parts(rewards, response_mask, index, settings.weights, **options)
        return parts.advantages, parts, uids, raw_means
    # Several outputs per session (multi-output agent loops): like verl's GRPO path, only the last output of
    # each session takes part in the group statistics, and its advantage is given to every output.
    rows = torch.as_tensor(final_rows, device=response_mask.device)
    parts = gdpo_parts(
        {name: value[rows] for name, value in rewards.items()},
        response_mask[rows],
        uids[final_rows],
        settings.weights,
        **options,
    )
    per_row = parts.final.to(torch.float32)[row_to_final.to(response_mask.device)]
    advantages = response_mask.to(torch.float32, copy=True).mul_(per_row.unsqueeze(-1))
    return advantages, parts, uids[final_rows], raw_means


def apply_conditions(
    rewards: Mapping[str, torch.Tensor], conditions: Sequence[Condition], response_mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Zero each conditioned reward where its ``given`` reward (raw outcome value) is below ``at_least``."""
    gated = dict(rewards)
    for condition in conditions:
        keep = outcome_scores(rewards, [condition.given], response_mask)[:, 0] >= condition.at_least
        reward = gated[condition.reward]
        gated[condition.reward] = reward * (keep.unsqueeze(-1) if reward.dim() == 2 else keep).to(reward.dtype)
    return gated


def session_layout(keys: Sequence[str], index: Any) -> tuple[list[int] | None, torch.Tensor | None]:
    """Check that row i of the batch is TransferQueue key i, and find multi-output sessions, in one pass.

    Keys are ``{uid}_{session_id}_{output_index}``; each row's uid must match its key's.

    Returns:
        The row of each session's last output and, for every row, the position of its session's last
        output in that list; ``(None, None)`` when every session has exactly one output.
    """
    uids = np.asarray(index).tolist()
    if len(keys) != len(uids):
        raise RuntimeError(
            f"gdpo-verl: the V1 advantage stage fetched {len(keys)} samples but the estimator got {len(uids)} rows; "
            "the rewards cannot be matched to responses. Please report this with your verl version."
        )
    last: dict[tuple[str, str], tuple[int, int]] = {}
    sessions = []
    for row, (key, uid) in enumerate(zip(keys, uids, strict=True)):
        parts = str(key).rsplit("_", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"TransferQueue key {key!r} is not of the form {{uid}}_{{session_id}}_{{output_index}}.")
        if parts[0] != str(uid):
            raise RuntimeError(
                f"gdpo-verl: row {row} of the advantage batch has uid {uid!r} but TransferQueue key {key!r}; "
                "rewards and responses would be mixed up. Please report this with your verl version."
            )
        session, output_index = (parts[0], parts[1]), int(parts[2])
        sessions.append(session)
        if session not in last or last[session][0] < output_index:
            last[session] = (output_index, row)
    if len(last) == len(keys):
        return None, None
    final_rows = [row for _, row in last.values()]
    position = {session: i for i, session in enumerate(last)}
    return final_rows, torch.tensor([position[session] for session in sessions], dtype=torch.long)


def gather_rewards(
    keys: Sequence[str],
    response_mask: torch.Tensor,
    per_response: Mapping[str, Any],
    tensors: Mapping[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """reward key -> ``(B, T)`` token-level scores or ``(B,)`` outcome scores.

    Looked up in this order: a ``token_level_scores_<key>`` tensor, a ``token_level_scores_<key>`` entry of
    per-token lists in ``per_response``, then ``per_response[key]`` (one number per response).
    """
    rewards = {}
    for key in keys:
        token_level_key = TOKEN_LEVEL_PREFIX + key
        if token_level_key in tensors:
            rewards[key] = tensors[token_level_key]
        elif token_level_key in per_response:
            rewards[key] = _token_level(token_level_key, per_response[token_level_key], response_mask)
        elif key in per_response:
            rewards[key] = _per_response(key, per_response[key], response_mask)
        else:
            available = sorted(per_response) + sorted(tensors)
            hint = (
                f"Make compute_score return a dict containing {key!r} (or {token_level_key!r} with one value per "
                "response token), or fix algorithm.gdpo_reward_keys."
            )
            if set(available) <= {"uid"}:
                hint = (
                    "No reward component reached the advantage stage at all. Under verl's V1 trainer "
                    "(trainer.use_v1=True) gdpo-verl fetches them from TransferQueue in the trainer process: "
                    "check that the gdpo_verl plugin is installed on every node and allowed by "
                    "VERL_USE_EXTERNAL_PLUGINS, and that the verl version is supported."
                )
            raise ValueError(
                f"GDPO reward key {key!r} not found. Available per-response keys: {available or 'none'}. {hint}"
            )
    return rewards


def _token_level(key: str, values: Any, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token lists (or the rows of a 2-D array), one per response, placed from the first response
    position on.

    A list must cover every position up to the response's last valid token; values past the response
    (padding) are ignored. Responses without a valid token (verl's padding samples) are skipped.
    """
    batch_size, width = response_mask.shape
    rows = list(values)
    if len(rows) != batch_size:
        raise ValueError(f"{key!r} has {len(rows)} entries; expected one per response ({batch_size}).")
    valid = response_mask.bool()
    lengths = torch.where(valid.any(dim=1), width - valid.flip(1).int().argmax(dim=1), 0).tolist()
    scores = torch.zeros(batch_size, width, dtype=torch.float64)
    for row, (value, length) in enumerate(zip(rows, lengths, strict=True)):
        if length == 0:
            continue
        array = np.asarray(value.tolist() if isinstance(value, torch.Tensor) else value)
        if array.ndim != 1 or array.dtype.kind not in "biuf" or array.shape[0] < length:
            raise ValueError(
                f"{key!r} of response {row} must be a list of at least {length} numbers (one per response "
                f"position up to the last valid token); got {_describe(value)}."
            )
        kept = min(array.shape[0], width)
        scores[row, :kept] = torch.from_numpy(array[:kept].astype(np.float64))
    return scores.to(response_mask.device)


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)):
        return f"{type(value).__name__} of length {len(value)}"
    return repr(value)[:80]


def _per_response(key: str, values: Any, response_mask: torch.Tensor) -> torch.Tensor:
    array = np.asarray(values)
    if array.shape != (response_mask.shape[0],):
        raise ValueError(
            f"reward {key!r} has shape {array.shape} in non_tensor_batch; expected one value per response "
            f"({response_mask.shape[0]},)."
        )
    # numpy would turn None into NaN and "0.5" into 0.5: only numbers are accepted.
    numeric = array.dtype.kind in "biuf" or (array.dtype == object and _is_number(array).all())
    if not numeric:
        kinds = sorted({type(v).__name__ for v in array.tolist() if not isinstance(v, numbers.Real)})
        raise ValueError(
            f"reward {key!r} must hold one number per response; got values of type {kinds}. "
            "Make compute_score return a number for it in every response."
        )
    return torch.from_numpy(array.astype(np.float64)).to(response_mask.device)


_is_number = np.vectorize(lambda value: isinstance(value, (numbers.Real, np.bool_)), otypes=[bool])
