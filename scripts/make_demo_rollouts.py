"""Write gdpo_verl/data/demo_rollouts.jsonl: a synthetic math batch with two binary rewards.

12 prompts x 8 rollouts. Each prompt has a difficulty (chance of a correct answer) and a typical
response length; `correct` is drawn from the difficulty, `length` is 1 when the response has at most
4000 tokens (the paper's length reward). Deterministic (seeded), so the demo's numbers are stable.
"""

import json
import random
from pathlib import Path

PROMPTS = 12
ROLLOUTS = 8
MAX_LENGTH = 4000


def main() -> None:
    rng = random.Random(2601_05242)
    rows = []
    for p in range(PROMPTS):
        difficulty = rng.choice([0.0, 0.15, 0.5, 0.85, 1.0])
        typical = rng.choice([1500, 3000, 3800, 4500, 6000])
        for _ in range(ROLLOUTS):
            tokens = max(64, min(8000, int(rng.gauss(typical, typical * 0.25))))
            rows.append(
                {
                    "uid": f"prompt-{p:02d}",
                    "response_length": tokens,
                    "correct": int(rng.random() < difficulty),
                    "length": int(tokens <= MAX_LENGTH),
                }
            )
    path = Path(__file__).resolve().parents[1] / "gdpo_verl" / "data" / "demo_rollouts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"wrote {len(rows)} rollouts to {path}")


if __name__ == "__main__":
    main()
