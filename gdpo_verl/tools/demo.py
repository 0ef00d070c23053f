"""The demo: a multi-reward rollout batch through verl's real advantage stage, GRPO next to GDPO.

Each rollout is a JSON line with ``uid`` (its prompt group), ``response_length`` (tokens) and one
numeric field per reward component. GRPO trains on the summed reward (verl's "grpo"); GDPO normalizes
each component (verl's "gdpo", which this package registers); with ``estimator="corrgrpo"`` CorrGRPO stands in
GDPO's place (the group-centred weighted sum over the rewards' correlation, this package's "corrgrpo"). Both run
through ``verl.trainer.ppo.ray_trainer.compute_advantage`` on a real ``DataProto``.
"""

from __future__ import annotations

import sys
from collections import Counter
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from gdpo_verl.core.advantage import group_ids
from gdpo_verl.core.collapse import COLLAPSE_DECIMALS
from gdpo_verl.core.diagnostics import distinct_per_group
from gdpo_verl.core.checks import is_reward_value
from gdpo_verl.records.jsonl import read_jsonl
from gdpo_verl.verl_adapter.for_tools.batches import verl_advantages
from gdpo_verl.verl_adapter.names import CORRGRPO_NAMES, ESTIMATOR_NAME

RESERVED = ("uid", "response_length")
# The estimators the demo sets beside GRPO (algorithm.adv_estimator), and how its report names each.
LABELS = {ESTIMATOR_NAME: "GDPO", **dict.fromkeys(CORRGRPO_NAMES, "CorrGRPO")}
# Longer responses would make the demo's (B, T) batch needlessly large; real ones are far shorter.
MAX_RESPONSE_LENGTH = 131_072


def default_rollouts() -> Path:
    return Path(str(files("gdpo_verl") / "data" / "demo_rollouts.jsonl"))


def load_rollouts(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of the JSONL file and the reward component names (every field but uid and response_length)."""
    rows = []
    for number, row in read_jsonl(path):
        where = f"{path}:{number}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object (one rollout), got {row!r:.80}.")
        missing = [key for key in RESERVED if key not in row]
        if missing:
            raise ValueError(f"{where}: missing {missing}; every rollout needs uid and response_length.")
        length = row["response_length"]
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_RESPONSE_LENGTH:
            raise ValueError(f"{where}: response_length must be a whole number from 1 to {MAX_RESPONSE_LENGTH:,}; got {length!r:.80}.")
        bad = {key: value for key, value in row.items()
               if key not in RESERVED and value is not None and not is_reward_value(value)}
        if bad:
            raise ValueError(f"{where}: rewards must be finite numbers (null where one does not apply); got "
                             f"{bad!r:.120}.")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rollouts.")
    names = [key for key in rows[0] if key not in RESERVED]
    if not names:
        raise ValueError(f"{path}: rollouts carry no reward fields besides {list(RESERVED)}.")
    for number, row in enumerate(rows, start=1):
        if sorted(k for k in row if k not in RESERVED) != sorted(names):
            raise ValueError(f"{path}: rollout {number} has rewards {sorted(row)}; the first one has {names}.")
    return rows, names


def merged_pairs(uids: np.ndarray, combos: list[tuple], values: np.ndarray) -> int:
    """Pairs of rollouts of one prompt with different reward combinations but the same advantage (rounded as the
    paper does, ``COLLAPSE_DECIMALS``).

    Counted from class sizes, not pair by pair (3,000 rollouts of one prompt: milliseconds, not a minute): the
    pairs with the same (prompt, rounded advantage), less those that also share the reward combination.
    """
    rounded = np.round(np.asarray(values, dtype=np.float64), COLLAPSE_DECIMALS).tolist()
    labels = list(uids)

    def pairs(keys: Counter) -> int:
        return sum(count * (count - 1) // 2 for count in keys.values())

    return pairs(Counter(zip(labels, rounded))) - pairs(Counter(zip(labels, combos, rounded)))


def run_demo(path: Path | None = None, out: TextIO | None = None, weights: Any = None,
             options: dict[str, Any] | None = None, step: int | None = None) -> dict[str, float]:
    """``weights`` (``algorithm.gdpo_reward_weights``), ``options`` (``algorithm.gdpo``; its ``estimator``, "gdpo" or
    "corrgrpo", is ``algorithm.adv_estimator``) and ``step`` (the trainer step, where scheduled weights are read)
    configure GDPO as in training. The summary's ``gdpo_*`` values are the chosen estimator's."""
    out = out or sys.stdout
    options = dict(options or {})
    estimator = options.pop("estimator", None) or ESTIMATOR_NAME
    label = LABELS.get(estimator)
    if label is None:
        raise ValueError(f"estimator must be one of {sorted(LABELS)}; got {estimator!r}.")
    path = path or default_rollouts()
    rows, names = load_rollouts(path)
    uids = np.array([str(row["uid"]) for row in rows], dtype=object)
    groups = sorted(set(uids))
    combos = [tuple(row[name] for name in names) for row in rows]

    grpo = verl_advantages(rows, names, {"adv_estimator": "grpo"})
    if weights is not None:  # a reward not named weighs 1
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise ValueError(f"--weights names {unknown}; the rollouts' rewards are {names}.")
        weights = {**dict.fromkeys(names, 1.0), **weights}
    gdpo = verl_advantages(rows, names, {"adv_estimator": estimator, "gdpo_reward_keys": names,
                                         "gdpo_reward_weights": weights, "gdpo": options}, step)
    group_of, num_groups = group_ids(uids, len(rows))

    write = lambda text="": print(text, file=out)  # noqa: E731
    write(f"{len(rows)} rollouts in {len(groups)} groups from {path}")
    how = "GDPO normalizes each one" if label == "GDPO" else "CorrGRPO divides their centred sum by their correlation"
    write(f"rewards: {', '.join(names)}; GRPO trains on their sum, {how} (verl compute_advantage)")
    write()
    write(f"{'reward':<12}{'mean':>8}{'zero-variance groups':>24}")
    for name in names:
        applies = np.array([row[name] is not None for row in rows])
        values = np.array([row[name] if row[name] is not None else np.nan for row in rows], dtype=np.float64)
        flat = sum(len(set(values[(uids == g) & applies])) <= 1 for g in groups)
        share = "" if applies.all() else f"  (applies to {applies.sum()} of {len(rows)})"
        mean = values[applies].mean() if applies.any() else float("nan")
        write(f"{name:<12}{mean:>8.3f}{f'{flat}/{len(groups)}':>24}{share}")
    write()

    write(f"{'group':<12}{'rewards (' + ','.join(names) + f') -> GRPO | {label} advantage':<60}")
    for group in groups:
        rows_of = np.flatnonzero(uids == group)
        cells = "  ".join(f"{combos[i]}:{grpo[i]:+.2f}|{gdpo[i]:+.2f}" for i in rows_of[:4])
        more = f"  (+{len(rows_of) - 4})" if len(rows_of) > 4 else ""
        write(f"{group:<12}{cells}{more}")
    write()

    whole_batch = torch.zeros(len(rows), dtype=torch.long)  # one group: distinct values across the batch
    summary = {
        "distinct_reward_combinations": len(set(combos)),
        "grpo_distinct_advantages": distinct_per_group(torch.from_numpy(grpo), whole_batch, 1),
        "gdpo_distinct_advantages": distinct_per_group(torch.from_numpy(gdpo), whole_batch, 1),
        "grpo_distinct_advantages_per_group": distinct_per_group(torch.from_numpy(grpo), group_of, num_groups),
        "gdpo_distinct_advantages_per_group": distinct_per_group(torch.from_numpy(gdpo), group_of, num_groups),
        "grpo_merged_pairs": merged_pairs(uids, combos, grpo),
        "gdpo_merged_pairs": merged_pairs(uids, combos, gdpo),
    }
    write(f"distinct advantage values in the batch: GRPO {summary['grpo_distinct_advantages']:.0f}, "
          f"{label} {summary['gdpo_distinct_advantages']:.0f}; per group: "
          f"GRPO {summary['grpo_distinct_advantages_per_group']:.2f}, {label} "
          f"{summary['gdpo_distinct_advantages_per_group']:.2f}")
    write(f"rollout pairs of one prompt with different rewards but the same advantage: "
          f"GRPO {summary['grpo_merged_pairs']}, {label} {summary['gdpo_merged_pairs']}")
    return summary
