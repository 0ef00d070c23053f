"""The recipes the tests run: every recipe (RECIPES), the math kit's (MATH), and the reward file the recipe for a
user's own reward needs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3] / "recipes"
# launch.sh and common.sh are sourced by the recipes, not run; cluster scripts start Ray (tested in test_cluster.py).
RECIPES = sorted(
    path for path in ROOT.rglob("*.sh") if path.name not in ("launch.sh", "common.sh") and path.parent.name != "cluster"
)
MATH = sorted((ROOT / "math_length").glob("r*_*.sh")) + sorted((ROOT / "math_length").glob("qwen*_*.sh"))

# The recipe for a user's own reward needs a reward file (its default, my_reward.py, is a placeholder: the config check
# imports the file before Ray starts, and refuses one that does not exist).
USER_REWARD = {"REWARD_FILE": str(Path(__file__).resolve().parents[2] / "fixtures" / "declared_reward.py")}
