"""Every recipe composes with DRY_RUN=1 through verl's real entry points (prints the config, runs nothing). The
recipes run in bash as a user runs them; their launches are composed in one process of verl's entry points
(launches.py says how, and test_a_composed_launch_prints_what_the_recipes_own_process_prints that it is the same)."""

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from gdpo_verl.verl_adapter.settings import check_config, settings_from_config
from tests.integration.recipes.catalog import MATH, RECIPES, ROOT, USER_REWARD
from tests.integration.recipes.launches import Launches

LAUNCHES: list[Launches] = []


@pytest.fixture(scope="module", autouse=True)
def launches():
    """One composing process for this file's recipes (launches.py)."""
    LAUNCHES.append(Launches())
    yield LAUNCHES[0]
    LAUNCHES.pop().close()
    default_run.cache_clear()


def dry_run(recipe, *overrides, composed=True, **environment):
    """The recipe run with DRY_RUN=1; its launches composed by this file's composing process, or with
    ``composed=False`` each by a process of its own, as a user's run makes them."""
    env = {**os.environ, "DRY_RUN": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **environment}
    if composed:
        env = LAUNCHES[0].environment(env)
    return subprocess.run(["bash", str(recipe), *overrides], capture_output=True, text=True, env=env, timeout=300)


@functools.cache
def default_run(recipe):
    """One DRY_RUN of a recipe with its defaults (and a reward file for gdpo_custom_reward.sh), shared by the tests
    that read it."""
    return dry_run(recipe, **(USER_REWARD if recipe.name == "gdpo_custom_reward.sh" else {}))


def configs(output):
    return [OmegaConf.create(document) for document in yaml.safe_load_all(output) if document]


@pytest.mark.parametrize(("environment", "overrides"), [
    ({}, ()),  # verl.trainer.main_ppo on gdpo-verl's packaged config
    ({"TRAINER": "one_step_off"}, ()),  # the experimental entry points, on their own configs
    ({"TRAINER": "fully_async"}, ()),
    ({}, ("algorithm.no_such_key=1",)),  # refused by hydra
], ids=["main_ppo", "one_step_off", "fully_async", "refused"])
def test_a_composed_launch_prints_what_the_recipes_own_process_prints(environment, overrides):
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    own = dry_run(recipe, *overrides, composed=False, **environment)
    composed = dry_run(recipe, *overrides, **environment)
    assert (composed.returncode, composed.stdout) == (own.returncode, own.stdout)
    if overrides:
        assert own.returncode == 1
        refusal = next(line for line in own.stderr.splitlines() if "no_such_key" in line)
        assert refusal in composed.stderr.splitlines()
    else:
        assert own.returncode == 0 and len(configs(own.stdout)) == 1


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
    # where the paper is silent, DLER's script (docs/math-length.md says which is which)
    "actor_rollout_ref.actor.clip_ratio_c": 10.0,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.7,
    # ours: long prompts are left out, not truncated
    "data.filter_overlong_prompts": True,
    "data.truncation": "error",
}
# What each TRAINER adds to a recipe (recipes/launch.sh), on top of the paper's setup, which it keeps. The trainers
# other than the V1 trainer have no dynamic sampling (check_config refuses it there): FILTER_GROUPS=False for those.
TRAINERS = {
    "colocate_async": {"trainer.v1.trainer_mode": "colocate_async"},
    "separate_async": {"trainer.v1.trainer_mode": "separate_async",
                       "trainer.v1.separate_async.parameter_sync_step": 8,  # 512 prompts / mini-batches of 64
                       "actor_rollout_ref.rollout.checkpoint_engine.backend": "nccl",
                       "actor_rollout_ref.rollout.nnodes": 1, "actor_rollout_ref.rollout.n_gpus_per_node": 8},
    "legacy": {"trainer.use_v1": False, "algorithm.filter_groups.enable": False},
    "one_step_off": {"actor_rollout_ref.hybrid_engine": False, "rollout.n_gpus_per_node": 8,
                     "algorithm.rollout_correction.bypass_mode": True,  # verl's own config for it
                     "algorithm.filter_groups.enable": False},
    "fully_async": {"actor_rollout_ref.hybrid_engine": False, "rollout.n_gpus_per_node": 8,
                    "async_training.trigger_parameter_sync_step": 8, "async_training.require_batches": 1,
                    "rollout.total_rollout_steps": 500 * 512,  # prompts: the paper's 500 steps of 512
                    "data.train_batch_size": 0, "data.gen_batch_size": 1, "algorithm.filter_groups.enable": False},
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


CODING = sorted((ROOT / "coding").glob("r1_7b_*.sh"))
# Table 7's "Math/Coding" column; the conditioned length and the reward the paper names (section 4.3)
CODING_PAPER = {**{key: value for key, value in PAPER.items() if not key.startswith("reward.") and "clip_ratio_c" not in key},
                "reward.custom_reward_function.path": "pkg://gdpo_verl.rewards.coding",
                "reward.custom_reward_function.reward_kwargs.max_length": 4000,
                "reward.custom_reward_function.reward_kwargs.sandbox": "local",
                "actor_rollout_ref.model.path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"}


@pytest.mark.parametrize("recipe", CODING, ids=lambda path: path.name)
def test_coding_recipes_carry_the_papers_setup_with_two_or_three_objectives(recipe):
    (config,) = configs(default_run(recipe).stdout)
    for key, value in CODING_PAPER.items():
        assert OmegaConf.select(config, key) == value, key
    three = recipe.stem.endswith("3obj")
    assert config.reward.custom_reward_function.reward_kwargs.objectives == (3 if three else 2)
    keys = ["pass_rate", "length", "no_bug"] if three else ["pass_rate", "length"]
    assert list(config.algorithm.gdpo_reward_keys) == keys
    assert config.algorithm.adv_estimator == ("gdpo" if "_gdpo_" in recipe.name else "grpo")
    assert config.trainer.experiment_name == recipe.stem


def test_a_coding_recipe_runs_its_programs_on_sandbox_fusion_through_verls_own_settings():
    recipe = ROOT / "coding" / "r1_7b_gdpo_3obj.sh"
    (local,) = configs(default_run(recipe).stdout)
    assert local.reward.sandbox_fusion.url is None
    assert (local.reward.custom_reward_function.reward_kwargs.cpu_s, local.reward.custom_reward_function.reward_kwargs.memory_mb) == (5, 1024)
    (remote,) = configs(dry_run(recipe, SANDBOX="fusion", SANDBOX_FUSION_URL="http://sandbox:8080/run_code",
                                    MEMORY_MB="2048").stdout)
    fusion = remote.reward.sandbox_fusion
    assert (fusion.url, fusion.max_concurrent, fusion.memory_limit_mb) == ("http://sandbox:8080/run_code", 64, 2048)
    kwargs = remote.reward.custom_reward_function.reward_kwargs
    assert kwargs.sandbox == "fusion" and kwargs.wall_s == 10 and "cpu_s" not in kwargs and "memory_mb" not in kwargs


def test_coding_recipes_cover_both_estimators_and_both_objective_sets():
    assert {path.stem for path in CODING} == {f"r1_7b_{e}_{k}obj" for e in ("grpo", "gdpo") for k in (2, 3)}


def test_weight_sweep_composes_one_run_per_weight():
    recipe = ROOT / "math_length" / "r1_7b_gdpo_length_weight_sweep.sh"
    result = default_run(recipe)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = configs(result.stdout)
    # weight 1.0 is r1_7b_gdpo.sh, run once, not a second time here
    assert [list(run.algorithm.gdpo_reward_weights) for run in runs] == [[1.0, w] for w in (0.75, 0.5, 0.25)]
    assert [run.trainer.experiment_name for run in runs] == [f"r1_7b_gdpo_length_weight_{w}" for w in ("0.75", "0.5", "0.25")]
    # the summed score carries the same weights
    assert [run.reward.custom_reward_function.reward_kwargs.length_weight for run in runs] == [0.75, 0.5, 0.25]


def test_weight_sweep_runs_for_the_grpo_baseline_with_the_weights_in_its_score():
    recipe = ROOT / "math_length" / "r1_7b_gdpo_length_weight_sweep.sh"
    result = dry_run(recipe, ESTIMATOR="grpo", WEIGHTS="0.5")
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = configs(result.stdout)
    assert run.algorithm.adv_estimator == "grpo" and run.trainer.experiment_name == "r1_7b_grpo_length_weight_0.5"
    assert run.reward.custom_reward_function.reward_kwargs.length_weight == 0.5
    assert list(run.algorithm.gdpo_reward_weights) == [1.0, 0.5]  # the gdpo/ metrics use the same weights
    check_config(run)


def test_a_weight_in_gdpo_but_not_in_the_summed_score_is_refused_before_ray_starts():
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    result = dry_run(recipe, "reward.custom_reward_function.reward_kwargs.length_weight=1.0", LENGTH_WEIGHT="0.5")
    assert result.returncode == 0, result.stderr[-3000:]
    (config,) = configs(result.stdout)
    with pytest.raises(ValueError, match="reward weights differ between GDPO and the summed score"):
        check_config(config)


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
    result = dry_run(recipe, "trainer.total_epochs=3", REWARD_KEYS="[right,fmt,len]", REWARD_WEIGHTS="[1.0,0.5,0.25]",
                     ROLLOUT_N="4")
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.create(result.stdout)
    assert settings_from_config(config.algorithm).weights == {"right": 1.0, "fmt": 0.5, "len": 0.25}
    assert config.actor_rollout_ref.rollout.n == 4
    assert config.trainer.total_epochs == 3


def list_knobs(recipe):
    result = subprocess.run(["bash", str(recipe)], capture_output=True, text=True, timeout=60,
                            env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "LIST_KNOBS": "1"})
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_every_recipe_lists_its_knobs_once_and_launches_nothing_doing_so(recipe):
    knobs = list_knobs(recipe)
    assert len(knobs) == len(set(knobs)) and "MODEL" in knobs
    # each knob is a variable the recipe reads: setting one changes the composed config somewhere
    shared = recipe.parent / "common.sh"
    source = recipe.read_text() + (shared.read_text() if shared.is_file() else "") + (ROOT / "launch.sh").read_text()
    unread = [knob for knob in knobs if not re.search(rf"\$\{{?{knob}\b", source)]
    assert not unread


def test_math_recipes_declare_the_shared_knobs_and_their_own():
    knobs = list_knobs(ROOT / "math_length" / "r1_7b_gdpo.sh")
    assert {"MODEL", "THINK", "TP", "EXPERIMENT", "DATA_DIR", "LENGTH_WEIGHT", "NNODES", "DUMP_DIR"} <= set(knobs)


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_each_trainer_keeps_the_papers_setup_and_adds_its_own(trainer):
    result = dry_run(ROOT / "math_length" / "r1_1.5b_gdpo.sh", TRAINER=trainer)
    assert result.returncode == 0, result.stderr[-3000:]
    (config,) = configs(result.stdout)
    if trainer in ("legacy", "one_step_off", "fully_async"):
        # the paper's DAPO dynamic sampling, which verl would ignore there: refused before Ray starts
        with pytest.raises(ValueError, match="runs on verl's V1 trainer only"):
            check_config(config)
        config.algorithm.filter_groups.enable = False  # as FILTER_GROUPS=False sets it
    expected = {**PAPER, **TRAINERS[trainer]}
    for key, value in expected.items():
        assert OmegaConf.select(config, key) == value, key
    assert config.algorithm.adv_estimator == "gdpo" and config.algorithm.gdpo.batch_norm == "token"
    check_config(config)  # what the run checks before Ray starts


@pytest.mark.parametrize(("environment", "message"), [
    ({"TRAINER": "async"}, "TRAINER must be sync, colocate_async, separate_async, legacy, one_step_off or fully_async"),
    ({"TRAINER": "separate_async", "MINI_BATCH_SIZE": "100"}, r"TRAIN_BATCH_SIZE \(512\) must be a multiple of "
                                                               r"MINI_BATCH_SIZE \(100\)"),
])
def test_a_bad_trainer_setting_stops_the_recipe_naming_it(environment, message):
    result = dry_run(ROOT / "math_length" / "r1_1.5b_gdpo.sh", **environment)
    assert result.returncode == 2
    assert re.search(message, result.stderr), result.stderr


TOOL_CALLING = sorted((ROOT / "tool_calling").glob("qwen*.sh"))
OFFICIAL_TOOL_CALLING = {  # NVlabs/GDPO verl-GDPO/train_gdpo.sh
    "data.train_batch_size": 512,
    "data.max_prompt_length": 2048,
    "data.max_response_length": 1024,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 128,
    "actor_rollout_ref.rollout.n": 4,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.6,
    "trainer.total_epochs": 15,
    "reward.custom_reward_function.path": "pkg://gdpo_verl.rewards.tool_calling",
    "reward.custom_reward_function.reward_kwargs.correct_scale": 3.0,
}


def test_tool_calling_recipes_cover_both_models_and_three_estimators():
    assert [path.stem for path in TOOL_CALLING] == sorted(
        f"qwen2.5_{m}_{e}" for m in ("1.5b", "3b") for e in ("gdpo", "grpo", "grpo_no_std")
    )


@pytest.mark.parametrize("recipe", TOOL_CALLING, ids=lambda path: path.name)
def test_tool_calling_recipes_carry_the_official_setup_and_compare_like_with_like(recipe):
    (config,) = configs(default_run(recipe).stdout)
    for key, value in OFFICIAL_TOOL_CALLING.items():
        assert OmegaConf.select(config, key) == value, key
    size = recipe.stem.split("_")[1].upper()
    assert config.actor_rollout_ref.model.path == f"Qwen/Qwen2.5-{size}-Instruct"
    assert list(config.algorithm.gdpo_reward_keys) == ["format", "correct"]
    assert config.algorithm.norm_adv_by_std_in_grpo is (not recipe.stem.endswith("no_std"))
    # the same KL treatment for every estimator: none in the reward (which GDPO would drop), none in the loss
    assert config.algorithm.use_kl_in_reward is False and config.actor_rollout_ref.actor.use_kl_loss is False
    assert config.trainer.experiment_name == recipe.stem


def test_tool_calling_kl_in_the_loss_applies_to_every_estimator_alike():
    for recipe in TOOL_CALLING[:3]:
        result = dry_run(recipe, USE_KL_LOSS="True")
        assert result.returncode == 0, result.stderr[-3000:]
        (config,) = configs(result.stdout)
        actor = config.actor_rollout_ref.actor
        assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type) == (True, 0.001, "low_var_kl")


def test_tool_calling_weights_reach_the_summed_score_as_well_as_gdpo():
    for recipe in TOOL_CALLING[:3]:
        result = dry_run(recipe, FORMAT_WEIGHT="2.0", CORRECT_WEIGHT="0.5")
        assert result.returncode == 0, result.stderr[-3000:]
        (config,) = configs(result.stdout)
        kwargs = config.reward.custom_reward_function.reward_kwargs
        assert list(config.algorithm.gdpo_reward_weights) == [kwargs.format_weight, kwargs.correct_weight] == [2.0, 0.5]


def test_tool_calling_refuses_records_of_gdpo_advantages_under_grpo():
    result = dry_run(ROOT / "tool_calling" / "qwen2.5_1.5b_grpo.sh", DUMP_DIR="/tmp/records")
    assert result.returncode == 2 and "DUMP_DIR records GDPO's advantages" in result.stderr


def test_prompt_overflow_can_truncate_like_dler_and_refuses_unknown_values():
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    result = dry_run(recipe, PROMPT_OVERFLOW="left", KL_LOSS_TYPE="low_var_kl")
    assert result.returncode == 0, result.stderr[-3000:]
    (config,) = configs(result.stdout)
    assert (config.data.filter_overlong_prompts, config.data.truncation) == (False, "left")
    assert config.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
    refused = dry_run(recipe, PROMPT_OVERFLOW="cut")
    assert refused.returncode == 2 and "PROMPT_OVERFLOW must be drop, left, right or middle" in refused.stderr
