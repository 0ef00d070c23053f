"""The demo: a multi-reward rollout batch through verl's real advantage stage, GRPO next to GDPO.

Each rollout is a JSON line with ``uid`` (its prompt group), ``response_length`` (tokens) and one
numeric field per reward component. GRPO trains on the summed reward (verl's "grpo"); GDPO normalizes
each component (verl's "gdpo", which this package registers). Both run through
``verl.trainer.ppo.ray_trainer.compute_advantage`` on a real ``DataProto``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from importlib.resources import files
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

RESERVED = ("uid", "response_length")


def default_rollouts() -> Path:
    return Path(str(files("gdpo_verl") / "data" / "demo_rollouts.jsonl"))


def load_rollouts(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of the JSONL file and the reward component names (every field but uid and response_length)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg}).") from exc
        missing = [key for key in RESERVED if key not in row]
        if missing:
            raise ValueError(f"{path}:{number}: missing {missing}; every rollout needs uid and response_length.")
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


def build_batch(rows: list[dict[str, Any]], names: list[str]):
    """A DataProto laid out as verl's trainer has it after the reward step (summed score on the last token)."""
    from verl import DataProto

    lengths = torch.tensor([int(row["response_length"]) for row in rows])
    if (lengths < 1).any():
        raise ValueError("every response_length must be at least 1.")
    response_mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()
    components = {name: np.array([float(row[name]) for row in rows]) for name in names}
    scores = torch.zeros(response_mask.shape)
    scores[torch.arange(len(rows)), lengths - 1] = torch.tensor(sum(components.values()), dtype=torch.float32)
    non_tensors = {"uid": np.array([str(row["uid"]) for row in rows], dtype=object), **components}
    tensors = {"response_mask": response_mask, "token_level_scores": scores, "token_level_rewards": scores.clone()}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def advantages(batch, algorithm: dict[str, Any]) -> np.ndarray:
    """One advantage per response (the value on its first token) from verl's compute_advantage."""
    import verl  # noqa: F401  (loads the plugin entry point)
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = OmegaConf.create({"norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False, **algorithm})
    out = compute_advantage(
        batch, adv_estimator=config.adv_estimator, norm_adv_by_std_in_grpo=True, config=config
    )
    return out.batch["advantages"][:, 0].numpy().astype(np.float64)


def distinct(values: np.ndarray) -> int:
    return len(np.unique(np.round(values, 4)))


def merged_pairs(uids: np.ndarray, combos: list[tuple], values: np.ndarray) -> int:
    """Pairs of rollouts of one prompt with different reward combinations but the same advantage."""
    merged = 0
    members = defaultdict(list)
    for i, uid in enumerate(uids):
        members[uid].append(i)
    for rows in members.values():
        for a, i in enumerate(rows):
            for j in rows[a + 1 :]:
                merged += int(combos[i] != combos[j] and round(values[i], 4) == round(values[j], 4))
    return merged


def run_demo(path: Path | None = None, out: TextIO | None = None) -> dict[str, int]:
    out = out or sys.stdout
    path = path or default_rollouts()
    rows, names = load_rollouts(path)
    uids = np.array([str(row["uid"]) for row in rows], dtype=object)
    groups = sorted(set(uids))
    combos = [tuple(row[name] for name in names) for row in rows]

    grpo = advantages(build_batch(rows, names), {"adv_estimator": "grpo"})
    gdpo = advantages(build_batch(rows, names), {"adv_estimator": "gdpo", "gdpo_reward_keys": names})

    write = lambda text="": print(text, file=out)  # noqa: E731
    write(f"{len(rows)} rollouts in {len(groups)} groups from {path}")
    write(f"rewards: {', '.join(names)}; GRPO trains on their sum, GDPO normalizes each one (verl compute_advantage)")
    write()
    write(f"{'reward':<12}{'mean':>8}{'zero-variance groups':>24}")
    for name in names:
        values = np.array([row[name] for row in rows], dtype=np.float64)
        flat = sum(len(set(values[uids == g])) == 1 for g in groups)
        write(f"{name:<12}{values.mean():>8.3f}{f'{flat}/{len(groups)}':>24}")
    write()

    write(f"{'group':<12}{'rewards (' + ','.join(names) + ') -> GRPO | GDPO advantage':<60}")
    for group in groups:
        rows_of = np.flatnonzero(uids == group)
        cells = "  ".join(f"{combos[i]}:{grpo[i]:+.2f}|{gdpo[i]:+.2f}" for i in rows_of[:4])
        more = f"  (+{len(rows_of) - 4})" if len(rows_of) > 4 else ""
        write(f"{group:<12}{cells}{more}")
    write()

    summary = {
        "distinct_reward_combinations": len(set(combos)),
        "grpo_distinct_advantages": distinct(grpo),
        "gdpo_distinct_advantages": distinct(gdpo),
        "grpo_merged_pairs": merged_pairs(uids, combos, grpo),
        "gdpo_merged_pairs": merged_pairs(uids, combos, gdpo),
    }
    write(f"distinct advantage values: GRPO {summary['grpo_distinct_advantages']}, "
          f"GDPO {summary['gdpo_distinct_advantages']}")
    write(f"rollout pairs of one prompt with different rewards but the same advantage: "
          f"GRPO {summary['grpo_merged_pairs']}, GDPO {summary['gdpo_merged_pairs']}")
    return summary
