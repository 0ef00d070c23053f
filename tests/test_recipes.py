"""Every recipe composes with DRY_RUN=1 through verl's real main_ppo (prints the config, runs nothing)."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from gdpo_verl.verl_adapter.settings import check_config, settings_from_config

ROOT = Path(__file__).resolve().parents[1] / "recipes"
# common.sh is sourced by the math recipes, not run; cluster scripts start Ray (tested in test_cluster.py).
RECIPES = sorted(path for path in ROOT.rglob("*.sh") if path.name != "common.sh" and path.parent.name != "cluster")
MATH = sorted((ROOT / "math_length").glob("r*_*.sh")) + sorted((ROOT / "math_length").glob("qwen*_*.sh"))


def dry_run(recipe, *overrides, **environment):
    env = {**os.environ, "DRY_RUN": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **environment}
    return subprocess.run(["bash", str(recipe), *overrides], capture_output=True, text=True, env=env, timeout=300)


@functools.cache
def default_run(recipe):
    """One DRY_RUN of a recipe with its defaults, shared by the tests that read it."""
    return dry_run(recipe)


def configs(output):
    return [OmegaConf.create(document) for document in yaml.safe_load_all(output) if document]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_recipe_composes_a_valid_config(recipe):
    result = default_run(recipe)
    assert result.returncode == 0, result.stderr[-3000:]
    for config in configs(result.stdout):
        expected = "grpo" if "_grpo" in recipe.name else "gdpo"
        assert config.algorithm.adv_estimator == expected
        settings_from_config(config.algorithm)
        check_config(config)  # what main_ppo checks before Ray starts


PAPER = {
    "data.train_batch_size": 512,
    "data.max_prompt_length": 1024,
    "data.max_response_length": 8000,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 64,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.28,
    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
    "actor_rollout_ref.actor.use_kl_loss": True,
    "actor_rollout_ref.actor.kl_loss_type": "mse",
    "actor_rollout_ref.actor.kl_loss_coef": 0.0005,
    "actor_rollout_ref.rollout.n": 16,
    "actor_rollout_ref.rollout.temperature": 1.0,
    "algorithm.use_kl_in_reward": False,
    "algorithm.filter_groups.enable": True,
    "algorithm.filter_groups.metric": "score",
    "trainer.total_training_steps": 500,
    "reward.reward_manager.name": "gdpo_verl",
    "reward.custom_reward_function.path": "pkg://gdpo_verl.rewards.math_length",
    "reward.custom_reward_function.reward_kwargs.max_length": 4000,
}
MODELS = {
    "r1_1.5b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "required"),
    "r1_7b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "required"),
    "qwen3_4b": ("Qwen/Qwen3-4B-Instruct-2507", "none"),
}


@pytest.mark.parametrize("recipe", [path for path in MATH if "sweep" not in path.name], ids=lambda path: path.name)
def test_math_recipes_carry_the_papers_setup(recipe):
    (config,) = configs(default_run(recipe).stdout)
    for key, value in PAPER.items():
        assert OmegaConf.select(config, key) == value, key
    model, think = MODELS[recipe.name.split("_g")[0]]
    assert config.actor_rollout_ref.model.path == model
    kwargs = config.reward.custom_reward_function.reward_kwargs
    assert kwargs.think == think
    assert kwargs.conditioned is ("conditioned" in recipe.name)
    assert list(config.algorithm.gdpo_reward_keys) == ["correct", "length"]
    assert config.trainer.experiment_name == recipe.stem


def test_math_recipes_cover_every_model_estimator_and_length_reward():
    names = {path.stem for path in MATH}
    expected = {f"{m}_{e}{c}" for m in MODELS for e in ("grpo", "gdpo") for c in ("", "_conditioned")}
    assert expected <= names


def test_weight_sweep_composes_one_run_per_weight():
    recipe = ROOT / "math_length" / "r1_7b_gdpo_length_weight_sweep.sh"
    result = default_run(recipe)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = configs(result.stdout)
    assert [list(run.algorithm.gdpo_reward_weights) for run in runs] == [[1.0, w] for w in (1.0, 0.75, 0.5, 0.25)]
    assert [run.trainer.experiment_name for run in runs] == [f"r1_7b_gdpo_length_weight_{w}" for w in ("1.0", "0.75", "0.5", "0.25")]


def test_math_recipe_knobs_come_from_the_environment():
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    result = dry_run(recipe, "trainer.val_before_train=False", NNODES="4", FILTER_METRIC="gdpo_signature",
                     MODEL="/models/r1", DUMP_DIR="/tmp/gdpo")
    assert result.returncode == 0, result.stderr[-3000:]
    (config,) = configs(result.stdout)
    assert (config.trainer.nnodes, config.actor_rollout_ref.model.path) == (4, "/models/r1")
    assert config.algorithm.filter_groups.metric == "gdpo_signature"
    assert config.algorithm.gdpo.dump_dir == "/tmp/gdpo"
    assert config.trainer.val_before_train is False


def test_custom_reward_recipe_takes_knobs_from_environment_and_extra_overrides():
    recipe = next(path for path in RECIPES if path.name == "gdpo_custom_reward.sh")
    result = dry_run(recipe, "trainer.total_epochs=3", REWARD_KEYS="[acc,fmt,len]", REWARD_WEIGHTS="[1.0,0.5,0.25]",
                     ROLLOUT_N="4")
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.create(result.stdout)
    assert settings_from_config(config.algorithm).weights == {"acc": 1.0, "fmt": 0.5, "len": 0.25}
    assert config.actor_rollout_ref.rollout.n == 4
    assert config.trainer.total_epochs == 3
