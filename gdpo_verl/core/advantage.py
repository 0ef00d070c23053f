"""The GDPO advantage (arXiv 2601.05242), in plain torch.

For prompt i, rollout j and reward k:

    step 1  A_k(i,j)  = (r_k(i,j) - mean_j r_k(i,.)) / (std_j r_k(i,.) + eps)   per reward, per group
    step 2  A_sum(i,j) = sum_k w_k * A_k(i,j)                                    weights act on normalized values
    step 3  A(i,j)     = batch normalization of A_sum over the whole batch       (Eq. 6 of the paper)

Options beyond the paper (``GdpoOptions``; formulas and sources in docs/estimator.md): a reward that does not
apply to a response (``applies``) is left out of its group's statistics and adds 0; a leave-one-out baseline in
step 1; SAW's per-batch weights multiplying the configured ones in step 2; GD2PO's masking of rollouts whose
rewards disagree, with each group scaled by its kept fraction, before step 3 over the kept responses only.

``gdpo_outcome_parts`` is the formula, top to bottom; ``gdpo_parts`` (the one call a trainer's step makes, agent
sessions included) and ``gdpo_advantage`` take verl's ``(B,)`` or ``(B, T)`` rewards and a response mask around
it. This module imports torch and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from gdpo_verl.core.conditions import Condition, applies_under_conditions, apply_conditions, check_conditions
from gdpo_verl.core.inputs import check_rewards, outcome_inputs, outcome_scores, weight_vector_for
from gdpo_verl.core.options import OPTIONS, GdpoOptions, as_options, gdpo_options
from gdpo_verl.core.variants import conflict_keep, group_kept_fraction, saw_weights

# What algorithm.gdpo.batch_norm takes (declared in options.py).
BATCH_NORMS = OPTIONS["batch_norm"].choices

# verl's masked_whiten adds this to the variance before the inverse square root.
WHITEN_VAR_EPS = 1e-8
# Leave-one-out: the other responses of a group count as equal when the sum of their squared deviations is below
# this fraction of the group's (their std below ~1e-6 of the group's; round-off leaves ~1e-16 where they are equal).
OTHERS_EQUAL_RTOL = 1e-12


@dataclass(frozen=True)
class Sessions:
    """Multi-output agent sessions (verl's V1 trainer): only the last output of each session takes part in the
    group statistics, and its advantage is given to every output of the session (as verl's GRPO does).

    Attributes:
        final_rows: the batch row of each session's last output.
        row_session: ``(B,)`` long, for every row the position of its session in ``final_rows``.
    """

    final_rows: Sequence[int]
    row_session: torch.Tensor


@dataclass(frozen=True)
class GdpoParts:
    """Everything one GDPO computation produced; diagnostics and records read these instead of recomputing.

    Attributes:
        advantages: ``(B, T)`` float32, the result, zero outside the response mask (None when computed
            from outcome scores alone).
        names: the reward names, in column order.
        raw_scores: ``(B, K)`` float64 outcome score of each response and reward, before any condition (0 where
            the reward does not apply).
        scores: ``(B, K)`` float64 the scores normalized in step 1 (``raw_scores`` with the conditions applied).
        normalized: ``(B, K)`` float64 step-1 values (per reward, per group; 0 where the reward does not apply).
        weights: ``(K,)`` float64 the weights in force: the configured ones times SAW's (``adaptive_weights``).
        summed: ``(B,)`` float64 step-2 values (with ``conflict``: masked, and scaled by the group's kept fraction).
        final: ``(B,)`` float64 step-3 values, one per response: ``(summed - batch_mean) / batch_scale``.
        batch_mean, batch_scale: step 3's statistics (0 and 1 with ``batch_norm="none"``).
        group: ``(B,)`` long group ids; ``num_groups`` of them.
        valid_tokens: ``(B,)`` float64 valid response tokens per response.
        options: how it was computed (the conditions applied, norm_by_std, batch_norm, eps, ...).
        applies: ``(B, K)`` bool, where each reward applies (a reward that does not is left out of its group).
        keep: ``(B,)`` bool, the responses ``conflict`` kept (all True without it); a masked one's ``final`` is 0.
        base_weights: ``(K,)`` float64 the configured weights (``weights`` divided by SAW's).
        rewarded: ``(B,)`` bool, the responses some reward applies to (all True when every reward applies
            everywhere). One that no reward applies to is paid nothing: its ``final`` is exactly 0, and it takes no
            part in step 3's statistics (as a response ``conflict`` masks).
        estimator: ``"gdpo"``, or ``"corrgrpo"`` for ``gdpo_verl.core.corrgrpo`` (no step 3: ``final`` is ``summed``).

    With ``Sessions``, B counts sessions (their last outputs) everywhere but in ``advantages``, which has a row
    for every output.
    """

    advantages: torch.Tensor | None
    names: tuple[str, ...]
    raw_scores: torch.Tensor
    scores: torch.Tensor
    normalized: torch.Tensor
    weights: torch.Tensor
    summed: torch.Tensor
    final: torch.Tensor
    batch_mean: float
    batch_scale: float
    group: torch.Tensor
    num_groups: int
    valid_tokens: torch.Tensor
    options: GdpoOptions
    applies: torch.Tensor | None = None
    keep: torch.Tensor | None = None
    base_weights: torch.Tensor | None = None
    rewarded: torch.Tensor | None = None
    estimator: str = "gdpo"

    @property
    def conditions(self) -> tuple[Condition, ...]:
        return self.options.conditions


def gdpo_outcome_parts(
    scores: Mapping[str, Any],
    valid_tokens: Any,
    index: Any,
    weights: Mapping[str, float] | None = None,
    options: GdpoOptions = GdpoOptions(),
    *,
    applies: Mapping[str, Any] | None = None,
) -> GdpoParts:
    """GDPO on one outcome score per response and reward (``advantages`` is None).

    Args:
        scores: reward name -> ``(B,)`` outcome scores; a None entry (in a list or an object array) is a reward
            that does not apply to that response.
        valid_tokens: ``(B,)`` valid response tokens of each response (the weights of ``batch_norm="token"``).
        index: ``(B,)`` group ids: verl's ``uid`` numpy object array, a list, or an integer tensor.
        weights: reward name -> weight on that reward's normalized advantage; ``None`` weighs all 1.0.
        options: how to normalize (``GdpoOptions``; each field's meaning is declared in ``options.OPTIONS``). Its
            ``conditions`` keep a reward only where another reaches a threshold, before step 1; where the ``given``
            reward does not apply, the conditioned one does not apply either.
        applies: reward name -> ``(B,)`` bool, False where the reward does not apply (and its score is ignored);
            a reward not named applies wherever its score is not None.
    """
    names, raw_scores, valid_tokens, applied = outcome_inputs(scores, valid_tokens, applies)
    base_weight = weight_vector_for(names, weights)
    options = replace(as_options(options), conditions=check_conditions(names, options.conditions))
    group, num_groups = group_ids(index, raw_scores.shape[0], raw_scores.device)

    rewards = apply_conditions(raw_scores, names, options.conditions, applied)
    applied = applies_under_conditions(applied, names, options.conditions)
    normalized = group_normalize(rewards, group, num_groups, norm_by_std=options.norm_by_std, eps=options.eps,
                                 applies=applied, baseline=options.baseline)  # step 1
    weight = base_weight.to(normalized.device)
    if options.adaptive_weights == "saw":
        weight = weight * saw_weights(rewards, applied, valid_tokens > 0)
    contributions = normalized * weight
    summed = contributions.sum(dim=1)  # step 2
    keep = None
    if options.conflict != "none":
        keep = conflict_keep(contributions, options.conflict, options.conflict_threshold)
        summed = summed * group_kept_fraction(keep, group, num_groups) * keep
    # a response no reward applies to is paid nothing: out of step 3's statistics, like one conflict masked
    rewarded = torch.ones_like(group, dtype=torch.bool) if applied is None else applied.any(dim=1)
    counted = keep if bool(rewarded.all()) else rewarded if keep is None else keep & rewarded
    final, batch_mean, batch_scale = batch_normalize(summed, valid_tokens, options.batch_norm, options.eps,
                                                     counted)  # step 3
    _check_finite(final)

    return GdpoParts(
        advantages=None, names=names, raw_scores=raw_scores, scores=rewards, normalized=normalized, weights=weight,
        summed=summed, final=final, batch_mean=batch_mean, batch_scale=batch_scale, group=group,
        num_groups=num_groups, valid_tokens=valid_tokens, options=options, applies=applied,
        keep=torch.ones_like(group, dtype=torch.bool) if keep is None else keep, base_weights=base_weight,
        rewarded=rewarded,
    )


def gdpo_parts(
    rewards: Mapping[str, torch.Tensor], response_mask: torch.Tensor, index: Any,
    weights: Mapping[str, float] | None = None, *, sessions: Sessions | None = None,
    applies: Mapping[str, torch.Tensor] | None = None, outcome: Any = None, options: GdpoOptions | None = None,
    **keywords: Any,
) -> GdpoParts:
    """``gdpo_advantage`` with its intermediate values; same arguments, and ``sessions`` for multi-output agent
    sessions (``Sessions``; None: every row is a response of its own). The whole step: the mask checked, outcome
    scores, the three steps, the ``(B, T)`` advantages. ``applies``: reward name -> ``(B,)`` bool, False where
    that reward does not apply to the response (its score there is ignored). ``outcome``: the per-response
    computation, ``gdpo_outcome_parts`` (None) or another with its arguments (``corrgrpo.corrgrpo_outcome_parts``).
    The options: ``options`` (a ``GdpoOptions``), or each as a keyword (``eps=1e-4``), not both."""
    if options is not None and keywords:
        raise ValueError(f"give the options as options=GdpoOptions(...) or as keywords, not both; got both options "
                         f"and {sorted(keywords)}.")
    options = gdpo_options(keywords) if options is None else options
    names = check_rewards(rewards, response_mask)
    output = output_buffer(response_mask)  # becomes the advantages (expand_advantages)
    scores = outcome_scores(rewards, names, output)
    valid_tokens = output.sum(dim=-1)
    applies = dict(applies or {})
    if sessions is not None:
        rows = torch.as_tensor(sessions.final_rows, dtype=torch.long, device=scores.device)
        scores, valid_tokens = scores[rows], valid_tokens[rows]
        index = index[rows.to(index.device)] if isinstance(index, torch.Tensor) else np.asarray(index)[rows.tolist()]
        applies = {name: torch.as_tensor(mask)[rows.to(torch.as_tensor(mask).device)] for name, mask in applies.items()}
    parts = (outcome or gdpo_outcome_parts)(dict(zip(names, scores.T, strict=True)), valid_tokens, index, weights,
                                            options, applies=applies or None)
    row_session = None if sessions is None else sessions.row_session
    return replace(parts, advantages=expand_advantages(parts.final, output, row_session))


def gdpo_advantage(
    rewards: Mapping[str, torch.Tensor],
    response_mask: torch.Tensor,
    index: Any,
    weights: Mapping[str, float] | None = None,
    **options: Any,
) -> torch.Tensor:
    """GDPO advantages for a batch of responses.

    Args:
        rewards: reward name -> ``(B,)`` outcome scores or ``(B, T)`` token-level scores. A token-level
            reward's outcome score is the sum of its scores over the response's valid tokens.
        response_mask: ``(B, T)`` 1 on valid response tokens, 0 elsewhere.
        index, weights: as for ``gdpo_outcome_parts``.
        options: the options of the computation as keywords (``conditions``, ``norm_by_std``, ``batch_norm``,
            ``eps``, ``baseline``, ``conflict``, ``conflict_threshold``, ``adaptive_weights``: the fields of
            ``GdpoOptions``, each with its declared default), or ``options=GdpoOptions(...)``; and ``applies``
            (reward name -> ``(B,)`` bool, False where the reward does not apply).

    Returns:
        ``(B, T)`` float32 advantages, zero outside ``response_mask``.
    """
    return gdpo_parts(rewards, response_mask, index, weights, **options).advantages


def output_buffer(response_mask: torch.Tensor) -> torch.Tensor:
    """A float32 copy of ``response_mask``, checked to hold values in [0, 1]: the advantages' output buffer
    (``expand_advantages``). A mask of 2s would double every advantage, -1 flip it, a NaN spoil all of them."""
    output = response_mask.to(torch.float32, copy=True)
    if output.numel():
        low, high = (value.item() for value in torch.aminmax(output))
        if not (low >= 0 and high <= 1):  # False for NaN too
            raise ValueError(
                f"response_mask must hold 1 on valid response tokens and 0 elsewhere; it has values from {low} to "
                f"{high}. Pass verl's response_mask (or attention_mask[:, -T:]) unchanged."
            )
    return output


def expand_advantages(final: torch.Tensor, output: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """The ``(B, T)`` advantages: ``output`` (a float32 copy of the response mask) times each row's value.

    ``final`` holds one value per response, or, with ``rows``, one per session whose value row i takes
    (``final[rows[i]]``). ``output`` is filled in place: one ``(B, T)`` allocation in all (multiplying by an
    integer or bool mask directly takes a type-promotion path twice as slow).
    """
    per_row = final if rows is None else final[rows.to(final.device)]
    return output.mul_(per_row.to(torch.float32).unsqueeze(-1))


# --------------------------------------------------------------------------- the steps


def group_ids(index: Any, batch_size: int, device: torch.device | str | None = None) -> tuple[torch.Tensor, int]:
    """Map arbitrary group labels to contiguous ids.

    Args:
        index: ``(B,)`` group labels: verl's ``uid`` numpy object array of strings, a list, or an integer tensor.
        batch_size: B, the number of responses the labels must cover.
        device: where the returned ids live.

    Returns:
        ``(ids, num_groups)``: ``ids`` is a ``(B,)`` long tensor with values in ``0 .. num_groups - 1``.
    """
    if isinstance(index, torch.Tensor):
        if index.dim() != 1 or index.shape[0] != batch_size:
            raise ValueError(f"index must have shape ({batch_size},) like the batch; got {tuple(index.shape)}.")
        if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
            raise ValueError(f"an index tensor must hold integer group ids; got dtype {index.dtype}.")
        uniques, ids = torch.unique(index.to(device), return_inverse=True)
        return ids, int(uniques.numel())

    labels = np.asarray(index)
    if labels.ndim != 1 or labels.shape[0] != batch_size:
        raise ValueError(f"index must have shape ({batch_size},) like the batch; got {labels.shape}.")
    try:
        uniques, ids = np.unique(labels, return_inverse=True)
    except TypeError as exc:
        raise ValueError(
            "index labels must be mutually comparable (for example all strings, as verl's uid); "
            f"got a mix of types: {sorted({type(v).__name__ for v in labels.tolist()})}."
        ) from exc
    _check_labels(index, labels, uniques)
    return torch.as_tensor(ids.reshape(-1), dtype=torch.long, device=device), len(uniques)


def _check_labels(index: Any, labels: np.ndarray, uniques: np.ndarray) -> None:
    """Refuse group labels that would merge or split groups silently: a bool (``True == 1``, so the uids
    ``True`` and ``1`` would be one group) and NaN (a float array puts every NaN in one group, an object
    array each NaN in a group of its own). ``labels`` is ``np.asarray(index)``, which turns ``[True, 1]`` into
    ``[1, 1]``: a list is checked by its own items. ``uniques``: the distinct labels; when they are all strings
    (verl's uids) so are the labels, and nothing more is looked at."""
    fix = "Give every response the uid of its prompt, all of one type (verl's uid: one string per prompt)."
    if labels.dtype.kind == "b":
        raise ValueError(f"group ids (uid) must not be bools; got {labels[0]!r} at response 0: True equals 1 and "
                         f"False equals 0, so bool uids merge with the uids 1 and 0. {fix}")
    if labels.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(labels))
        if nan.size:
            raise ValueError(f"group id (uid) nan at {nan.size} response(s), the first response {nan[0]}: NaN is not a "
                             f"group (NaN uids would fall into one group). {fix}")
    if labels.dtype != object and isinstance(index, np.ndarray):
        return
    if set(map(type, uniques.tolist())) <= {str}:
        return
    values = labels.tolist() if isinstance(index, np.ndarray) else list(index)
    for row, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"group id (uid) {value!r} at response {row} is a bool: True equals 1 and False equals 0, "
                             f"so bool uids merge with the uids 1 and 0. {fix}")
        if isinstance(value, (float, np.floating)) and math.isnan(value):
            raise ValueError(f"group id (uid) nan at response {row}: NaN is not a group (each NaN uid would form a "
                             f"group of its own). {fix}")


def group_normalize(
    values: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    *,
    norm_by_std: bool,
    eps: float,
    baseline: str,
    ddof: int = 1,
    applies: torch.Tensor | None = None,
) -> torch.Tensor:
    """Step 1: normalize each column of ``values`` within its group, in float64.

    Args:
        values: ``(B, K)`` one outcome score per response and reward.
        group: ``(B,)`` long group ids in ``0 .. num_groups - 1``.
        num_groups: G.
        norm_by_std: divide by ``std + eps``; if False only subtract the baseline (GRPO w/o std).
        eps: added to the std.
        ddof: 1 for the unbiased std (verl, the estimator), 0 for the population std (``baseline="mean"``).
        applies: ``(B, K)`` bool, False where a reward does not apply: such a value is left out of its group's
            statistics and normalizes to 0. None: every value applies.
        baseline: ``"mean"``: ``(x - mean) / (std + eps)`` over the group. ``"leave_one_out"`` (NeMo-RL's
            ``use_leave_one_out_baseline``): ``(x_i - mean_{-i}) / (std_{-i} + eps)``, the mean and the unbiased
            std of the group's other values; where that std is 0 (the others are all equal, up to round-off, or
            there is one other) the group's unbiased std divides instead (NeMo-RL leaves such a value unscaled,
            so its size would follow the reward's scale).

    Returns:
        ``(B, K)`` float64. A group whose values are all equal, including a group of one, gives exactly 0 (values
        that do not apply are not counted).
    """
    x = values.to(torch.float64)
    num_rewards = x.shape[1]
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    present = None if applies is None or bool(applies.all()) else applies.to(x.device)
    if present is not None:
        x = torch.where(present, x, zero)
        weight = present.to(torch.float64)
    else:
        weight = torch.ones_like(x)
    counts = torch.zeros(num_groups, num_rewards, dtype=torch.float64, device=x.device).index_add_(0, group, weight)
    mean = torch.zeros_like(counts).index_add_(0, group, x) / counts.clamp(min=1)
    deviation = (x - mean[group]) * weight
    if baseline == "leave_one_out" or norm_by_std:
        # The squares are taken of deviations divided by the group's largest one, then scaled back: rewards
        # near 1e300 would overflow float64 when squared, and give a std of inf (an advantage of 0).
        largest = torch.zeros_like(mean).scatter_reduce_(0, group.unsqueeze(1).expand_as(x), deviation.abs(), "amax")
        largest = torch.where(largest > 0, largest, torch.ones((), dtype=x.dtype, device=x.device))
        scaled = deviation / largest[group]
        squares = torch.zeros_like(mean).index_add_(0, group, scaled * scaled)
    if baseline == "leave_one_out":
        n = counts[group]
        others = (n - 1).clamp(min=1)
        # mean_{-i} = mean - d_i / (n - 1); the others' squared deviations about their own mean:
        # sum_j d_j^2 - d_i^2 - (n - 1) * (d_i / (n - 1))^2 = sum_j d_j^2 - d_i^2 * n / (n - 1)   (d = x - mean)
        z = deviation * n / others
        if norm_by_std:  # the unbiased std of the n - 1 others
            unit = largest[group]
            spread = (squares[group] - scaled * scaled * n / others).clamp(min=0)
            std = unit * (spread / (n - 2).clamp(min=1)).sqrt()
            # Where the others are equal (or there is one other), their std is 0: the group's std scales instead.
            # "Equal" up to round-off: 0.1 + 0.2 and 0.3 leave a std of ~1e-17, and 1 / (1e-17 + eps) ~ 1e6.
            group_std = unit * (squares[group] / others).sqrt()
            alone = (n <= 2) | (spread <= OTHERS_EQUAL_RTOL * squares[group])
            z = deviation * n / others / (torch.where(alone, group_std, std) + eps)
    elif norm_by_std:
        std = largest * (squares / (counts - ddof).clamp(min=1)).sqrt()
        z = deviation / (std[group] + eps)
    else:
        z = deviation
    # Deciding "constant group" from max == min, not from the std, keeps round-off in the mean
    # (0.1 + 0.1 + 0.1 != 0.3) from turning into a small non-zero advantage.
    varies = group_varies(values.to(torch.float64), group, num_groups, present)[group]
    if present is not None:
        varies = varies & present
    return torch.where(varies, z, zero)


def group_varies(
    values: torch.Tensor, group: torch.Tensor, num_groups: int, applies: torch.Tensor | None = None
) -> torch.Tensor:
    """``(G, K)`` bool: True where column k of ``values`` ``(B, K)`` takes more than one value in group g (among
    the values that apply, with ``applies`` ``(B, K)`` bool)."""
    rows = group.unsqueeze(1).expand_as(values)
    shape = (num_groups, values.shape[1])
    high, low = values, values
    if applies is not None:
        high = torch.where(applies, values, -math.inf)
        low = torch.where(applies, values, math.inf)
    group_max = values.new_full(shape, -math.inf).scatter_reduce_(0, rows, high, "amax")
    group_min = values.new_full(shape, math.inf).scatter_reduce_(0, rows, low, "amin")
    return group_max > group_min


def batch_normalize(
    advantages: torch.Tensor, valid_tokens: torch.Tensor, mode: str, eps: float, keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float, float]:
    """Step 3: normalize the summed advantage over the whole batch.

    Args:
        advantages: ``(B,)`` float64, one value per response.
        valid_tokens: ``(B,)`` float64, the number of valid response tokens of each response.
        mode: ``"token"`` — verl's ``masked_whiten``: every valid token counts once, unbiased variance,
            ``(A - mean) * rsqrt(var + 1e-8)``. ``"sequence"`` — the paper's Eq. 6: every response with a
            valid token counts once, ``(A - mean) / (std + eps)`` with the unbiased std. ``"none"`` — unchanged.
        eps: added to the std in ``"sequence"`` mode.
        keep: ``(B,)`` bool, the responses the statistics are taken over (GD2PO's kept responses, and those some
            reward applies to; the others get 0). With fewer than 2 kept units there is nothing to normalize: every value is 0.

    Returns:
        ``(normalized (B,) float64, mean, scale)`` with ``normalized = (advantages - mean) / scale`` (0 outside
        ``keep``).
    """
    if mode == "none":
        return advantages if keep is None else advantages * keep, 0.0, 1.0
    if mode == "token":
        weight, unit = valid_tokens, "valid response tokens"
    elif mode == "sequence":
        weight, unit = (valid_tokens > 0).to(torch.float64), "responses with a valid token"
    else:
        raise ValueError(f"batch_norm must be one of {BATCH_NORMS}; got {mode!r}.")
    total = weight.sum()
    count = total.item()
    if count < 2:
        raise ValueError(
            f"batch_norm={mode!r} needs at least 2 {unit} in the batch to estimate a variance; got {int(count)}. "
            "Check the response_mask, or use batch_norm='none'."
        )
    if keep is not None:
        if (weight * keep).sum().item() < 2:  # (nearly) everything masked: nothing to train on this batch
            return torch.zeros_like(advantages), 0.0, 1.0
        normalized, mean, scale = batch_normalize(advantages, valid_tokens * keep, mode, eps)
        return normalized * keep, mean, scale
    mean = (weight * advantages).sum() / total
    centered = advantages - mean
    var = (weight * centered * centered).sum() / (total - 1)
    if mode == "token":
        inverse_scale = torch.rsqrt(var + WHITEN_VAR_EPS)
        return centered * inverse_scale, mean.item(), 1.0 / inverse_scale.item()
    scale = var.sqrt() + eps
    if scale.item() == 0:  # every value equal and eps 0: nothing to learn, not 0 / 0
        return torch.zeros_like(centered), mean.item(), 1.0
    return centered / scale, mean.item(), scale.item()


# --------------------------------------------------------------------------- options


def _check_finite(final: torch.Tensor) -> None:
    if not bool(torch.isfinite(final).all()):
        raise ValueError(
            "GDPO advantages came out NaN or infinite: a reward or weight is too large for float64 arithmetic "
            "(near 1e308). Rescale the reward, or the weights (only their ratios matter after the batch step)."
        )
