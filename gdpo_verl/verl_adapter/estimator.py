"""The "gdpo" and "corrgrpo" advantage estimators with the signature verl's ``compute_advantage`` calls.

verl passes ``non_tensor_batch`` and ``batch`` to the estimator registered as "gdpo" only; under the legacy trainer
the hook hands CorrGRPO the same on the ``Step`` (``Step.non_tensor_batch``, ``Step.tensors``). A trainer hook
(``trainer_hooks``) runs every advantage step inside ``running(Step(...))``: the settings parsed once for the
step, the trainer's global step and, under the V1 trainer, what the stage fetched from TransferQueue. The
estimator reads them there, computes (``gdpo_step``: one path, single- or multi-output sessions alike), and
leaves the step's ``gdpo/`` metrics on the same ``Step`` for the hook to log; ``observe`` does the same when
another estimator trains.

Where a reward's components enter GDPO, in order:

1. the reward's ``compute_score`` returns a dict, a number per component (``gdpo_verl/rewards/``, or yours);
2. the reward manager keeps every key of it in ``reward_extra_info`` (verl's, or ``reward_manager.py``'s, which
   also pads per-token components); in verl's reward loop ``components.require_components`` stops the run at the
   first response whose dict lacks a listed key (``trainer_hooks``);
3. verl stores them per response: in the batch's ``non_tensor_batch`` (legacy trainer), or per sample in
   TransferQueue (V1 trainer), which ``transfer_queue.fetch_step_inputs`` reads into the ``Step``;
4. ``gdpo_step`` here: ``gather_rewards`` finds each key of ``algorithm.gdpo_reward_keys`` (``components.find_reward``:
   per-token tensors first, then one number per response; None where a component does not apply);
5. ``gdpo_verl.core.advantage.gdpo_parts`` sums each component's scores over the response's tokens and computes GDPO
   (``gdpo_outcome_parts``: the three steps), or CorrGRPO (``core.corrgrpo``), with the ``GdpoOptions`` the settings
   read.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.advantage import GdpoParts, Sessions, gdpo_parts
from gdpo_verl.core.corrgrpo import corrgrpo_outcome_parts
from gdpo_verl.core.checks import is_number
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.steps import RecordWriter
from gdpo_verl.verl_adapter.names import CORRGRPO_NAMES, ESTIMATOR_NAME
from gdpo_verl.verl_adapter.components import TOKEN_LEVEL_PREFIX, find_reward, missing_component
from gdpo_verl.verl_adapter.settings import GdpoSettings, settings_from_config

logger = logging.getLogger("gdpo_verl")


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


@dataclass
class Step:
    """One advantage step, as the trainer hook hands it to the estimator and gets it back.

    Attributes:
        settings: parsed once for the step from ``algorithm``.
        global_step: the trainer's step (numbers the ``algorithm.gdpo.dump_dir`` records); None outside a trainer.
        inputs: what the V1 stage fetched; None under the legacy trainer (components are in ``non_tensor_batch``).
        records: appends the step's record (``algorithm.gdpo.dump_dir``); the trainer's own, kept for its run.
        metrics: the ``gdpo/`` metrics, filled in by the estimator (or ``observe``).
        non_tensor_batch, tensors: the legacy batch's per-response values and its ``token_level_scores_<key>``
            ``(B, T)`` tensors, for an estimator verl calls without them (CorrGRPO); None where verl passes them.
    """

    settings: GdpoSettings
    global_step: int | None = None
    inputs: StepInputs | None = None
    records: RecordWriter = field(default_factory=RecordWriter)
    metrics: dict[str, float] = field(default_factory=dict)
    non_tensor_batch: Mapping[str, Any] | None = None
    tensors: Mapping[str, torch.Tensor] | None = None


_STEP: ContextVar[Step | None] = ContextVar("gdpo_verl_step", default=None)


@contextmanager
def running(step: Step) -> Iterator[Step]:
    """Make ``step`` the one the estimator calls inside the block belong to."""
    token = _STEP.set(step)
    try:
        yield step
    finally:
        _STEP.reset(token)


def current_step() -> Step | None:
    """The step being run (inside ``running``), else None."""
    return _STEP.get()


def _verl_estimator(estimator: str, name: str, doc: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The function verl's trainer calls for ``algorithm.adv_estimator`` (its registry's signature), computing
    ``estimator``; ``name``: the module attribute it is (its ``__qualname__``, so that Ray pickles it by
    reference and ``gdpo-verl check-cluster`` names it)."""

    def estimate(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray | None = None,
        config: Any = None,
        non_tensor_batch: Mapping[str, np.ndarray] | None = None,
        batch: Any = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _compute(estimator, response_mask, index, config, non_tensor_batch, batch)

    estimate.__name__ = estimate.__qualname__ = name
    estimate.__doc__ = doc
    return estimate


compute_gdpo_advantage = _verl_estimator(ESTIMATOR_NAME, "compute_gdpo_advantage", """\
GDPO advantages for verl.

Args:
    token_level_rewards: ``(B, T)`` verl's summed reward; GDPO does not use it (it reads the components).
    response_mask: ``(B, T)``.
    index: ``(B,)`` verl's ``uid`` array: the group of each response.
    config: verl's ``algorithm`` config; see ``gdpo_verl/config/gdpo/settings.yaml`` for the keys read.
    non_tensor_batch: per-response reward components, as verl stores what ``compute_score`` returns.
    batch: the tensor batch; ``token_level_scores_<key>`` ``(B, T)`` tensors take precedence there.

Returns:
    ``(advantages, returns)``, both the same ``(B, T)`` tensor.
""")

compute_corrgrpo_advantage = _verl_estimator(CORRGRPO_NAMES[0], "compute_corrgrpo_advantage", """\
CorrGRPO advantages for verl (``gdpo_verl.core.corrgrpo``), registered as "corrgrpo" and
"grpo_covariance_coefficient"; arguments and result as ``compute_gdpo_advantage``. verl passes no
``non_tensor_batch`` to these names: the trainer hook's ``Step`` carries the legacy batch's, the V1 stage's
fetched components (``Step.inputs``) stand in for them under the V1 trainer.
""")


def _compute(estimator: str, response_mask: torch.Tensor, index: Any, config: Any,
             non_tensor_batch: Mapping[str, Any] | None, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The estimators' shared step: settings (the ``Step``'s, else read from ``config``), the components, the
    computation ``estimator`` names (a ``Step`` whose settings name the other one is an error), metrics and
    records."""
    step = current_step() or Step(settings_from_config(config))
    settings = step.settings
    if settings.estimator != estimator:
        raise RuntimeError(
            f"verl called the {estimator!r} advantage estimator inside a step whose settings are "
            f"{settings.estimator!r}'s (algorithm.adv_estimator changed between the trainer hook and verl's call?); "
            "no advantage is computed from mixed settings."
        )
    tensors = {key: batch[key] for key in (batch.keys() if batch is not None else [])
               if str(key).startswith(TOKEN_LEVEL_PREFIX)}
    if non_tensor_batch is None and step.non_tensor_batch is not None:
        non_tensor_batch = step.non_tensor_batch
    if not tensors and step.tensors:
        tensors = dict(step.tensors)
    advantages, parts, uids = gdpo_step(settings, response_mask, index, non_tensor_batch, tensors, step.inputs,
                                        step.global_step)
    step.metrics = advantage_metrics(parts)
    warn_unapplied(parts, step.global_step)
    if settings.dump_dir is not None:
        if step.global_step is None:
            raise ValueError(
                "algorithm.gdpo.dump_dir numbers its records by the trainer's global step, and this advantage step "
                "ran outside verl's trainer (no global step). Unset algorithm.gdpo.dump_dir for such calls."
            )
        step.records.append(settings.dump_dir, parts, uids, step.global_step)
    return advantages, advantages


def observe(step: Step, response_mask: torch.Tensor, index: Any, non_tensor_batch: Mapping[str, Any] | None) -> None:
    """Another estimator trains on this batch: leave on ``step`` the ``gdpo/`` metrics of what GDPO would compute
    on it. Its advantages are not touched."""
    _, parts, _ = gdpo_step(step.settings, response_mask, index, non_tensor_batch, {}, step.inputs, step.global_step)
    step.metrics = advantage_metrics(parts)
    warn_unapplied(parts, step.global_step)


def warn_unapplied(parts: GdpoParts, global_step: int | None) -> None:
    """Name, in a warning, each component that applies to no response of the step (it gave GDPO nothing); when none
    applies to any response, there is nothing to train on: an error naming the keys."""
    if parts.applies is None:
        return
    responses = parts.valid_tokens > 0
    unapplied = [name for k, name in enumerate(parts.names) if not bool((parts.applies[:, k] & responses).any())]
    if unapplied == list(parts.names) and bool(responses.any()):
        raise ValueError(
            f"none of the GDPO reward components {unapplied} applies to any response of "
            f"{'the batch' if global_step is None else f'step {global_step}'}: "
            "compute_score returned None for each, every time, so every advantage would be 0. Make compute_score "
            "return a number for the components that algorithm.gdpo_reward_keys lists, for the responses they apply "
            "to."
        )
    for k, name in enumerate(parts.names):
        if name in unapplied:
            logger.warning(
                "GDPO reward component %r applies to none of the %d responses of step %s (compute_score returned None "
                "for it every time): it gave this step's advantages nothing. If that is not meant, "
                "check compute_score and the data_source of the batch's prompts.",
                name, int(responses.sum()), global_step if global_step is not None else "(outside a trainer)",
            )


def gdpo_step(
    settings: GdpoSettings,
    response_mask: torch.Tensor,
    index: Any,
    non_tensor_batch: Mapping[str, Any] | None,
    tensors: Mapping[str, torch.Tensor],
    inputs: StepInputs | None,
    global_step: int | None = None,
) -> tuple[torch.Tensor, GdpoParts, np.ndarray]:
    """(advantages ``(B, T)``, the computation's parts, the uid of each of their rows). ``global_step``: the
    trainer's, where scheduled weights are read.

    In multi-output agent sessions (V1), like verl's GRPO path, only the last output of each session takes part
    in the group statistics, and its advantage is given to every output of the session.
    """
    if index is None:
        raise ValueError(
            "the gdpo estimator needs the group id of every response (verl's non_tensor_batch['uid']); none was given."
        )
    per_response = dict(non_tensor_batch or {})
    tensors = dict(tensors)
    sessions = None
    if inputs is not None:
        sessions = session_layout(inputs.keys, index)
        per_response.update(inputs.components)
        tensors.update(inputs.tensors)
    rewards, applies = gather_rewards(settings.reward_keys, response_mask, per_response, tensors)
    outcome = None if settings.estimator == ESTIMATOR_NAME else corrgrpo_outcome_parts
    parts = gdpo_parts(rewards, response_mask, index, settings.weights_at(global_step), sessions=sessions,
                       applies=applies, outcome=outcome, options=settings.options)
    uids = np.asarray(index) if sessions is None else np.asarray(index)[list(sessions.final_rows)]
    return parts.advantages, parts, uids


def session_layout(keys: Sequence[str], index: Any) -> Sessions | None:
    """Check that row i of the batch is TransferQueue key i, and find multi-output sessions, in one pass.

    Keys are ``{uid}_{session_id}_{output_index}``; each row's uid must match its key's.

    Returns:
        The sessions (the row of each session's last output and, for every row, the position of its session's
        last output in that list); None when every session has exactly one output.
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
        return None
    final_rows = [row for _, row in last.values()]
    position = {session: i for i, session in enumerate(last)}
    return Sessions(final_rows, torch.tensor([position[session] for session in sessions], dtype=torch.long))


def gather_rewards(
    keys: Sequence[str],
    response_mask: torch.Tensor,
    per_response: Mapping[str, Any],
    tensors: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(reward key -> ``(B, T)`` token-level scores or ``(B,)`` outcome scores, reward key -> ``(B,)`` bool where
    it applies, for each key that is None for some response: a reward that does not apply to it).

    Looked up in the order of ``reward_fields``: ``token_level_scores_<key>`` (a ``(B, T)`` tensor, or per-token
    lists in ``per_response``), then ``per_response[key]`` (one number per response).
    """
    rewards, applies = {}, {}
    for key in keys:
        found, token_level = find_reward(key, tensors, per_response)
        if found in tensors:
            rewards[key] = tensors[found]
        elif found is not None:
            convert = _token_level if token_level else _per_response
            rewards[key], present = convert(found, per_response[found], response_mask)
            if present is not None:
                applies[key] = present
        else:
            available = sorted(per_response) + sorted(tensors)
            if set(available) <= {"uid"}:
                raise ValueError(
                    f"GDPO reward key {key!r}: no reward component reached the advantage stage at all. Under verl's "
                    "V1 trainer (trainer.use_v1=True) gdpo-verl fetches them from TransferQueue in the trainer "
                    "process: check that the gdpo_verl plugin is installed on every node and allowed by "
                    "VERL_USE_EXTERNAL_PLUGINS, and that the verl version is supported."
                )
            raise ValueError(missing_component(key, available, keys, held="the batch reached the advantage step "
                                                                           "holding the per-response keys"))
    return rewards, applies


def _token_level(key: str, values: Any, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token lists (or the rows of a 2-D array), one per response, placed from the first response
    position on; None for a response the reward does not apply to. Returns the scores and, when some response
    has None, where the reward applies.

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
    present = torch.ones(batch_size, dtype=torch.bool)
    for row, (value, length) in enumerate(zip(rows, lengths, strict=True)):
        if value is None:
            present[row] = False
            continue
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
    return scores.to(response_mask.device), None if bool(present.all()) else present.to(response_mask.device)


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)):
        return f"{type(value).__name__} of length {len(value)}"
    return repr(value)[:80]


def _per_response(key: str, values: Any, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One number per response, or None where the reward does not apply: the scores (0 there) and, when some
    value is None, where the reward applies."""
    array = np.asarray(values)
    present = None
    if array.dtype == object and array.shape == (response_mask.shape[0],):
        missing = np.fromiter((value is None for value in array.tolist()), dtype=bool, count=array.shape[0])
        if missing.any():
            present = torch.from_numpy(~missing).to(response_mask.device)
            array = np.where(missing, 0.0, array)
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
            f"reward {key!r} must hold one number per response (or None where it does not apply); got values of "
            f"type {kinds}. Make compute_score return a number for it, or None, in every response."
        )
    return torch.from_numpy(array.astype(np.float64)).to(response_mask.device), present


_is_number = np.vectorize(is_number, otypes=[bool])
