"""Every recipe composes with DRY_RUN=1 through verl's real main_ppo (prints the config, runs nothing)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gdpo_verl.verl_adapter.settings import settings_from_config

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").rglob("*.sh"))


def dry_run(recipe, *overrides, **environment):
    env = {**os.environ, "DRY_RUN": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **environment}
    return subprocess.run(["bash", str(recipe), *overrides], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_recipe_composes_a_valid_gdpo_config(recipe):
    result = dry_run(recipe)
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.create(result.stdout)
    assert config.algorithm.adv_estimator == "gdpo"
    settings_from_config(config.algorithm)


def test_custom_reward_recipe_takes_knobs_from_environment_and_extra_overrides():
    recipe = next(path for path in RECIPES if path.name == "gdpo_custom_reward.sh")
    result = dry_run(recipe, "trainer.total_epochs=3", REWARD_KEYS="[acc,fmt,len]", REWARD_WEIGHTS="[1.0,0.5,0.25]",
                     ROLLOUT_N="4")
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.create(result.stdout)
    assert settings_from_config(config.algorithm).weights == {"acc": 1.0, "fmt": 0.5, "len": 0.25}
    assert config.actor_rollout_ref.rollout.n == 4
    assert config.trainer.total_epochs == 3
