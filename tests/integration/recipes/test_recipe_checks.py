"""Every recipe passes what verl's main_ppo checks before Ray, as a user launches it (CHECK=1: verl's validate_config,
gdpo-verl's checks, the checkpoint directory's owner, the memory plan; then it stops before Ray). And where a run
writes: a checkpoint directory and a tensorboard directory of its own under the roots the knobs name, a bounded
number of saves. The launches run through verl's real entry points (launches.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from gdpo_verl.verl_adapter.checkpoint_owner import OWNER_FILE
from tests.integration.recipes.launches import Launches
from tests.integration.recipes.catalog import RECIPES, ROOT, USER_REWARD

STOPPED = "stopped before Ray starts (no GPU allocated, no checkpoint directory written)"
LAUNCHES: list[Launches] = []


@pytest.fixture(scope="module", autouse=True)
def launches():
    LAUNCHES.append(Launches())
    yield
    LAUNCHES.pop().close()


def launch(recipe, *overrides, home, **environment):
    """The recipe as a user launches it, with HOME (the default roots' base) in ``home``."""
    env = {**os.environ, "HOME": str(home),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **environment}
    for name in ("CHECKPOINT_DIR", "TENSORBOARD_DIR", "GPU_MEMORY_GB", "MEMORY_PLAN", "DRY_RUN", "CHECK"):
        if name not in environment:
            env.pop(name, None)
    return subprocess.run(["bash", str(recipe), *overrides], capture_output=True, text=True, timeout=300,
                          env=LAUNCHES[0].environment(env))


def composed(result):
    assert result.returncode == 0, result.stderr[-3000:]
    return [OmegaConf.create(document) for document in yaml.safe_load_all(result.stdout) if document]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_every_recipe_passes_what_main_ppo_checks_before_ray(recipe, tmp_path):
    extra = USER_REWARD if recipe.name == "gdpo_custom_reward.sh" else {}
    result = launch(recipe, home=tmp_path, CHECK="1", **extra)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    runs = 3 if "sweep" in recipe.name else 1
    assert output.count("[validate_config] All configuration checks passed successfully!") == runs
    assert output.count("gdpo-verl memory plan, per GPU (8 training GPU(s)") == runs
    assert output.count(STOPPED) == runs
    assert "ray init kwargs" not in output  # verl's run_ppo prints it just before ray.init
    assert not any(tmp_path.iterdir())  # nothing written: no checkpoint directory, no record


def test_every_run_of_a_sweep_and_each_estimator_gets_directories_of_its_own(tmp_path):
    roots = {"CHECKPOINT_DIR": "/shared/ckpt", "TENSORBOARD_DIR": "/shared/tb/"}
    sweep = composed(launch(ROOT / "math_length" / "r1_7b_gdpo_length_weight_sweep.sh", home=tmp_path, DRY_RUN="1",
                            **roots))
    single = [composed(launch(ROOT / "math_length" / f"r1_7b_{estimator}.sh", home=tmp_path, DRY_RUN="1", **roots))[0]
              for estimator in ("grpo", "gdpo")]
    runs = [*sweep, *single]
    directories = [run.trainer.default_local_dir for run in runs]
    boards = [run.ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR for run in runs]
    assert len(set(directories)) == len(set(boards)) == 5
    for run, directory, board in zip(runs, directories, boards):
        name = f"{run.trainer.project_name}/{run.trainer.experiment_name}"
        assert (directory, board) == (f"/shared/ckpt/{name}", f"/shared/tb/{name}")
        assert run.trainer.max_actor_ckpt_to_keep == 2
        assert run.actor_rollout_ref.rollout.max_model_len == 1024 + 8000


def test_the_defaults_are_under_home_and_the_knobs_reach_the_config(tmp_path):
    (run,) = composed(launch(ROOT / "tool_calling" / "qwen2.5_3b_gdpo.sh", home=tmp_path, DRY_RUN="1",
                             KEEP_CHECKPOINTS="5", PARAM_OFFLOAD="True", OPTIMIZER_OFFLOAD="True"))
    assert run.trainer.default_local_dir == f"{tmp_path}/checkpoints/gdpo_tool_calling/qwen2.5_3b_gdpo"
    assert run.ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR == (
        f"{tmp_path}/tensorboard/gdpo_tool_calling/qwen2.5_3b_gdpo")
    assert (run.trainer.max_actor_ckpt_to_keep, run.trainer.max_critic_ckpt_to_keep) == (5, 5)
    fsdp = run.actor_rollout_ref.actor.fsdp_config
    assert fsdp.param_offload is True and fsdp.optimizer_offload is True
    assert run.actor_rollout_ref.rollout.max_model_len == 2048 + 1024


@pytest.mark.parametrize(("environment", "message"), [
    ({"CHECKPOINT_DIR": "ckpt"}, "CHECKPOINT_DIR must be an absolute path"),
    ({"TENSORBOARD_DIR": "tb"}, "TENSORBOARD_DIR must be an absolute path"),
    ({"KEEP_CHECKPOINTS": "0"}, "KEEP_CHECKPOINTS must be a whole number of saves to keep, 1 or more; got '0'"),
    ({"CHECK": "yes"}, "CHECK must be 1 (check the launch and stop before Ray) or 0; got 'yes'"),
])
def test_a_bad_directory_or_count_stops_the_recipe_naming_it(tmp_path, environment, message):
    result = launch(ROOT / "math_length" / "r1_1.5b_gdpo.sh", home=tmp_path, **environment)
    assert result.returncode == 2 and message in result.stderr, result.stderr[-2000:]


def test_a_run_is_refused_a_checkpoint_directory_another_run_saved_in_and_its_own_resumes(tmp_path):
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    directory = tmp_path / "ckpt" / "gdpo_math_length" / "r1_1.5b_gdpo"
    directory.mkdir(parents=True)
    (directory / "global_step_50").mkdir()
    (directory / OWNER_FILE).write_text(json.dumps({"project": "gdpo_math_length", "experiment": "r1_1.5b_grpo"}))
    # the same directory given by trainer.default_local_dir, as a user's override would
    refused = launch(recipe, f"trainer.default_local_dir={directory}", home=tmp_path, CHECK="1")
    assert refused.returncode == 1
    assert ("holds the checkpoints of another run (project 'gdpo_math_length', experiment 'r1_1.5b_grpo'"
            in refused.stderr)
    assert "this run is project 'gdpo_math_length', experiment 'r1_1.5b_gdpo'" in refused.stderr
    (directory / OWNER_FILE).write_text(json.dumps({"project": "gdpo_math_length", "experiment": "r1_1.5b_gdpo"}))
    resumed = launch(recipe, home=tmp_path, CHECK="1", CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    assert resumed.returncode == 0 and STOPPED in resumed.stdout, resumed.stderr[-3000:]


def test_a_7b_recipe_on_2_gpus_is_stopped_by_its_memory_plan_naming_the_fixes(tmp_path):
    recipe = ROOT / "math_length" / "r1_7b_gdpo.sh"
    result = launch(recipe, home=tmp_path, CHECK="1", GPUS_PER_NODE="2")
    assert result.returncode == 1
    assert "the run needs 100.0 GiB per GPU and the card has 79.2" in result.stderr
    for fix in ("OPTIMIZER_OFFLOAD=True", "PARAM_OFFLOAD=True", "NNODES x GPUS_PER_NODE = 4 fits", "MEMORY_PLAN=warn"):
        assert fix in result.stderr
    offloaded = launch(recipe, home=tmp_path, CHECK="1", GPUS_PER_NODE="2", OPTIMIZER_OFFLOAD="True")
    assert offloaded.returncode == 0 and STOPPED in offloaded.stdout, offloaded.stderr[-3000:]
    warned = launch(recipe, home=tmp_path, CHECK="1", GPUS_PER_NODE="2", MEMORY_PLAN="warn")
    assert warned.returncode == 0 and "WARNING: gdpo-verl memory plan: the run needs 100.0 GiB" in warned.stdout
    smaller = launch(recipe, home=tmp_path, CHECK="1", GPU_MEMORY_GB="40")
    assert smaller.returncode == 1 and "the card has 39.6" in smaller.stderr


def test_a_run_renamed_by_an_override_or_a_root_holding_checkpoints_itself_is_refused(tmp_path):
    recipe = ROOT / "math_length" / "r1_1.5b_gdpo.sh"
    renamed = launch(recipe, "trainer.experiment_name=mine", home=tmp_path, DRY_RUN="1")
    assert renamed.returncode == 2
    assert "trainer.experiment_name=mine: name the run with PROJECT=... and EXPERIMENT=..." in renamed.stderr
    # a CHECKPOINT_DIR that an earlier version took as the run's own directory: resuming there is named, not missed
    (tmp_path / "old" / "global_step_50").mkdir(parents=True)
    rooted = launch(recipe, home=tmp_path, CHECK="1", CHECKPOINT_DIR=str(tmp_path / "old"))
    assert rooted.returncode == 2
    assert (f"CHECKPOINT_DIR={tmp_path / 'old'} holds checkpoints itself, but it is a root" in rooted.stderr
            and f"trainer.default_local_dir={tmp_path / 'old'}" in rooted.stderr)
    # the way it names: that run's directory given as the run's own (no record there: the line that adopts it)
    resumed = launch(recipe, f"trainer.default_local_dir={tmp_path / 'old'}", home=tmp_path, CHECK="1",
                     CHECKPOINT_DIR=str(tmp_path / "old"))
    assert resumed.returncode == 1 and "holds checkpoints that no run recorded as its own" in resumed.stderr
