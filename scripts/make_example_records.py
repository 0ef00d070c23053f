"""Write gdpo_verl/data/example_steps.jsonl, the synthetic record that `gdpo-verl inspect` shows by default.

The records come from the real estimator (``algorithm.gdpo.dump_dir``) on synthetic batches shaped like
the paper's math runs: 16 prompts x 8 rollouts a step, rewards ``correct`` and ``length`` (1 when short).
Over 24 steps the length reward saturates (almost every response short) while correctness climbs slowly,
so the per-reward zero-variance fractions and the GRPO/GDPO distinct counts move the way they do in a run.
One prompt a step trades one reward for the other so that the rewards cancel there.

    python scripts/make_example_records.py [--out gdpo_verl/data/example_steps.jsonl]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from gdpo_verl.records.steps import RECORD_FILE, example_path
from gdpo_verl.verl_adapter import compute_gdpo_advantage

STEPS, PROMPTS, ROLLOUTS, MAX_LENGTH = 24, 16, 8, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=example_path())
    args = parser.parse_args()
    rng = np.random.default_rng(2601)
    with tempfile.TemporaryDirectory() as dump_dir:
        config = OmegaConf.create(
            {
                "gdpo_reward_keys": ["correct", "length"],
                "norm_adv_by_std_in_grpo": True,
                "use_kl_in_reward": False,
                "gdpo": {"dump_dir": dump_dir},
            }
        )
        for step in range(STEPS):
            short_rate = min(0.97, 0.35 + 0.06 * step)
            difficulty = rng.uniform(0.05, 0.95, PROMPTS)
            solve_rate = np.clip(difficulty + 0.01 * step, 0.0, 1.0).repeat(ROLLOUTS)
            correct = (rng.random(PROMPTS * ROLLOUTS) < solve_rate).astype(float)
            length = (rng.random(PROMPTS * ROLLOUTS) < short_rate).astype(float)
            # Prompt 0 is a trade-off: half the rollouts are correct and long, half wrong and short. With
            # equal weights the two normalized rewards cancel exactly (gdpo/cancelled_group_frac).
            correct[:ROLLOUTS] = np.arange(ROLLOUTS) < ROLLOUTS // 2
            length[:ROLLOUTS] = 1 - correct[:ROLLOUTS]
            lengths = np.where(length == 1, rng.integers(8, MAX_LENGTH // 2, length.size), MAX_LENGTH)
            mask = torch.from_numpy((np.arange(MAX_LENGTH)[None] < lengths[:, None]).astype(np.int64))
            uid = np.array([f"s{step}-p{i // ROLLOUTS}" for i in range(PROMPTS * ROLLOUTS)], dtype=object)
            compute_gdpo_advantage(
                torch.zeros(mask.shape),
                mask,
                index=uid,
                config=config,
                non_tensor_batch={"uid": uid, "correct": correct, "length": length},
            )
        args.out.write_text((Path(dump_dir) / RECORD_FILE).read_text())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
