"""Configuration errors surface in verl's main_ppo before Ray starts (so before any GPU is allocated)."""

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module

import verl  # noqa: F401  (loads the entry point, which wraps verl.utils.config.validate_config)
from verl.utils.config import validate_config

from gdpo_verl.verl_adapter.settings import check_config

# main_ppo prints this line right before ray.init().
RAY_STARTS = "ray init kwargs"


def packaged(*overrides):
    with initialize_config_module("gdpo_verl.config", version_base=None):
        return compose("gdpo_trainer", overrides=["algorithm.gdpo_reward_keys=[correct,length]", *overrides])


ERRORS = [
    (["algorithm.gdpo_reward_keys=null"], r"algorithm\.gdpo_reward_keys is not set"),
    (["algorithm.gdpo_reward_keys=[]"], r"gdpo_reward_keys is empty"),
    (["algorithm.gdpo_reward_weights=[1.0]"], r"has 1 value\(s\) \[1\.0\] but gdpo_reward_keys has 2"),
    (["algorithm.gdpo_reward_weights={correct:1.0,lenght:0.5}"], r"unknown: \['lenght'\], missing: \['length'\]"),
    (["algorithm.gdpo.batch_norm=tokens"], r"algorithm\.gdpo\.batch_norm must be one of"),
    (["algorithm.gdpo.conditions=[{reward:length,given:correctness,at_least:1}]"], r"conditions name \['correctness'\], which are not among the rewards"),
    (["algorithm.gdpo.conditions=[{reward:length,given:correct}]"], r"needs exactly the keys \['reward', 'given', 'at_least'\]"),
    (["algorithm.gdpo.conditions=[{reward:length,given:length,at_least:1}]"], r"cannot be conditioned on itself"),
    (["algorithm.gdpo.dump_dir=5"], r"algorithm\.gdpo\.dump_dir must be a directory path or null; got 5"),
    (["+algorithm.gdpo.epsilon=0.1"], r"unknown option\(s\) algorithm\.gdpo\.epsilon \(did you mean 'eps'\?\)"),
    (["+algorithm.gdpo_reward_weight=[1,1]"], r"unknown GDPO key\(s\) algorithm\.gdpo_reward_weight \(did you mean 'gdpo_reward_weights'\?\)"),
    (["algorithm.use_kl_in_reward=true"], r"use_kl_in_reward=True is not supported.*actor_rollout_ref\.actor\.use_kl_loss"),
    # the reward's own options, read as its calls read them (compute_score.needs.options)
    (["reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length",
      "+reward.custom_reward_function.reward_kwargs.max_lenght=3000"],
     r"reward_kwargs \['max_lenght'\] \(did you mean 'max_length' for 'max_lenght'\?\); the options are max_length"),
    (["reward.custom_reward_function.path=pkg://gdpo_verl.rewards.tool_calling",
      "algorithm.gdpo_reward_keys=[format,correct]", "+reward.custom_reward_function.reward_kwargs.strict_names=yes"],
     r"reward_kwargs\.strict_names must be true or false; got 'yes'"),
    (["algorithm.adv_estimator=grpo", "algorithm.gdpo_reward_weights=[1.0]"], r"has 1 value\(s\) \[1\.0\]"),
    (
        ["algorithm.adv_estimator=grpo", "algorithm.gdpo.dump_dir=/tmp/records"],
        r"dump_dir records the advantages GDPO trains on, but algorithm\.adv_estimator is 'grpo'",
    ),
    (
        ["algorithm.filter_groups.enable=true", "reward.reward_manager.name=naive"],
        r"filter_groups\.metric=gdpo_signature is computed by gdpo-verl's reward manager.*register:naive",
    ),
    # dynamic sampling where verl would ignore it: the legacy trainer, an experimental trainer's config
    (["algorithm.filter_groups.enable=true", "trainer.use_v1=false"], r"runs on verl's V1 trainer only"),
    (["algorithm.filter_groups.enable=true", "+rollout={nnodes:1,n_gpus_per_node:8}"],
     r"experimental trainers \(one_step_off_policy, fully_async_policy\) ignore it"),
]


@pytest.mark.parametrize(("overrides", "message"), ERRORS)
def test_each_configuration_error_is_raised_by_verls_validate_config(overrides, message):
    config = packaged(*overrides)
    with pytest.raises(ValueError, match=message):
        validate_config(config, use_reference_policy=False, use_critic=False)


def test_a_coding_reward_whose_sandbox_cannot_run_on_this_node_stops_before_ray_starts():
    from gdpo_verl.sandbox import SandboxUnavailable

    coding = ["algorithm.gdpo_reward_keys=[pass_rate,no_bug]",
              "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.coding"]
    with pytest.raises(SandboxUnavailable, match="sandbox on node .*: the interpreter /no/python is not an executable"):
        validate_config(packaged(*coding, "+reward.custom_reward_function.reward_kwargs.python=/no/python"),
                        use_reference_policy=False, use_critic=False)
    assert check_config(packaged(*coding)).reward_keys == ("pass_rate", "no_bug")  # a sandbox that runs: accepted


def test_a_reward_that_runs_no_programs_is_checked_with_its_own_options_only():
    # verl's Sandbox Fusion address is given to a reward that runs programs (the coding reward); the math reward's
    # options are what its reward_kwargs hold, and a url set for another use of verl's does not reach them
    math = ["reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length",
            "reward.sandbox_fusion.url=http://127.0.0.1:9/run_code"]
    assert check_config(packaged(*math)).reward_keys == ("correct", "length")
    with pytest.raises(ValueError, match=r"unknown reward.custom_reward_function.reward_kwargs \['sandbox'\]"):
        check_config(packaged(*math, "+reward.custom_reward_function.reward_kwargs.sandbox=fusion"))


def test_a_coding_reward_on_sandbox_fusion_is_checked_against_verls_sandbox_fusion_settings():
    # verl's reward.sandbox_fusion holds the server's address; the coding reward runs there only with sandbox=fusion
    from gdpo_verl.sandbox import SandboxUnavailable
    from tests.fusion_server import FusionServer

    coding = ["algorithm.gdpo_reward_keys=[pass_rate,no_bug]",
              "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.coding"]
    fusion = "+reward.custom_reward_function.reward_kwargs.sandbox=fusion"
    with FusionServer() as server:
        url = f"reward.sandbox_fusion.url={server.url}"
        assert check_config(packaged(*coding, fusion, url)).reward_keys == ("pass_rate", "no_bug")
        assert server.requests and server.requests[-1]["code"] == "print(1)"  # the driver's node asked the server
        with pytest.raises(ValueError, match="reward.sandbox_fusion.url is set but .*sandbox is 'local'"):
            check_config(packaged(*coding, url))
        with pytest.raises(ValueError, match="reward_kwargs.sandbox_fusion: .* set reward.sandbox_fusion.url"):
            check_config(packaged(*coding, fusion, url, f"+reward.custom_reward_function.reward_kwargs.sandbox_fusion.url={server.url}"))
    with pytest.raises(ValueError, match="reward.sandbox_fusion.url, which is not set"):
        check_config(packaged(*coding, fusion))
    with pytest.raises(SandboxUnavailable, match=f"Sandbox Fusion at {server.url} did not run a test program"):
        check_config(packaged(*coding, fusion, url))  # the server is gone: training does not start


def test_the_coding_reward_reads_sandbox_fusion_from_verls_older_top_level_place_too():
    from omegaconf import OmegaConf

    from gdpo_verl.verl_adapter.reward_config import sandboxed_reward_kwargs

    reward = {"custom_reward_function": {"path": "pkg://gdpo_verl.rewards.coding", "reward_kwargs": {"sandbox": "fusion"}},
              "sandbox_fusion": {"url": None}}
    older = {"url": "http://old:1/run_code", "max_concurrent": 3, "memory_limit_mb": 512}
    kwargs = sandboxed_reward_kwargs(OmegaConf.create({"reward": reward, "sandbox_fusion": older}))
    assert kwargs == {"sandbox": "fusion", "sandbox_fusion": older}
    newer = {**reward, "sandbox_fusion": {**older, "url": "http://new:1/run_code"}}
    assert sandboxed_reward_kwargs(OmegaConf.create({"reward": newer, "sandbox_fusion": older}))["sandbox_fusion"]["url"] \
        == "http://new:1/run_code"


DECLARED = "reward.custom_reward_function.path=pkg://tests.fixtures.declared_reward"


def test_the_check_learns_what_a_reward_needs_from_the_reward_itself():
    # compute_score.needs (gdpo_verl/rewards/needs.py): a reward whose score takes the weights gets them compared
    # with GDPO's; another function of the same module, which declares nothing, does not
    weights = ("algorithm.gdpo_reward_weights=[1.0,0.5]", DECLARED)
    with pytest.raises(ValueError, match="the reward weights differ between GDPO and the summed score"):
        check_config(packaged(*weights, "reward.custom_reward_function.name=compute_score"))
    assert check_config(packaged(*weights, "reward.custom_reward_function.name=undeclared")).reward_keys == (
        "correct", "length")
    # a reward that runs programs: its node check runs before Ray starts, with the reward_kwargs, and stops the run
    with pytest.raises(RuntimeError, match=r"this node cannot run the declared reward's programs \(reward_kwargs "
                                           r"\['python'\]\)"):
        check_config(packaged(DECLARED, "reward.custom_reward_function.name=sandboxed",
                              "+reward.custom_reward_function.reward_kwargs.python=/usr/bin/python3"))
    with pytest.raises(ValueError, match=r"path=pkg://tests.fixtures.no_such_reward: there is no module"):
        check_config(packaged("reward.custom_reward_function.path=pkg://tests.fixtures.no_such_reward"))
    with pytest.raises(ValueError, match=r"name=no_such_function is not a function of pkg://tests.fixtures.declared_reward"):
        check_config(packaged(DECLARED, "reward.custom_reward_function.name=no_such_function"))


def test_a_reward_key_the_reward_does_not_declare_is_refused_before_ray_starts_with_the_closest(tmp_path):
    # gdpo-verl's own rewards declare the keys their dict holds (compute_score.needs.returns): a misspelled key trained
    # on the other components alone before
    kit = "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"
    with pytest.raises(ValueError, match=r"gdpo_reward_keys=\['corect', 'length'\] names 'corect' \(did you mean "
                                         r"'correct'\?\), which the reward pkg://gdpo_verl.rewards.math_length does "
                                         r"not return: it declares \['correct', 'length', "):
        check_config(packaged(kit, "algorithm.gdpo_reward_keys=[corect,length]"))
    # a reward of the user's, from a file, declares them the same way
    reward = tmp_path / "my_reward.py"
    reward.write_text("from gdpo_verl.rewards.needs import RewardNeeds\n\n"
                      "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                      "    return {'score': 1.0, 'correct': 1.0, 'format': 0.0}\n\n"
                      "compute_score.needs = RewardNeeds(returns=('correct', 'format'))\n")
    mine = f"reward.custom_reward_function.path={reward}"
    with pytest.raises(ValueError, match=r"names 'lenght', which the reward .*my_reward.py does not return: it "
                                         r"declares \['correct', 'format'\]"):
        check_config(packaged(mine, "algorithm.gdpo_reward_keys=[correct,lenght]"))
    assert check_config(packaged(mine, "algorithm.gdpo_reward_keys=[format,correct]")).reward_keys == ("format",
                                                                                                         "correct")
    # a path that names no file stops here too, not in every reward worker after the model loaded
    with pytest.raises(ValueError, match=r"path=.*no_reward.py: .*no_reward.py does not exist on this node"):
        check_config(packaged(f"reward.custom_reward_function.path={tmp_path / 'no_reward.py'}"))


def test_a_valid_gdpo_config_passes_the_check():
    settings = check_config(packaged("algorithm.gdpo_reward_weights=[1.0,0.5]", "algorithm.filter_groups.enable=true"))
    assert settings.weights == {"correct": 1.0, "length": 0.5}


def test_other_estimators_are_not_checked_for_gdpo_keys():
    assert check_config(packaged("algorithm.adv_estimator=grpo", "algorithm.gdpo_reward_keys=null")) is None


def test_another_estimator_observed_with_gdpo_keys_may_keep_its_kl_in_the_reward():
    # the gdpo/ metrics only: the KL penalty stays the training estimator's business
    assert check_config(packaged("algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=true")) is None


def test_the_summed_reward_stays_available_as_the_filter_metric():
    check_config(packaged("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=score"))


def main_ppo(cwd, *arguments):
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *arguments]
    # cwd: hydra writes its outputs/ folder there.
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--config-path", "pkg://gdpo_verl.config", "--config-name", "gdpo_trainer"], "gdpo_reward_keys is not set"),
        (
            ["algorithm.adv_estimator=gdpo", "+algorithm.gdpo_reward_keys=[correct,length]", "algorithm.use_kl_in_reward=true"],
            "use_kl_in_reward=True is not supported",
        ),
        (
            ["--config-path", "pkg://gdpo_verl.config", "--config-name", "gdpo_trainer",
             "algorithm.gdpo_reward_keys=[corect,length]",
             "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.math_length"],
            "names 'corect' (did you mean 'correct'?), which the reward pkg://gdpo_verl.rewards.math_length does not",
        ),
    ],
)
def test_main_ppo_stops_before_ray_starts(arguments, message, tmp_path):
    result = main_ppo(tmp_path, *arguments)
    assert result.returncode != 0
    assert message in result.stderr
    assert RAY_STARTS not in result.stdout


@pytest.mark.parametrize("entry_point", ["verl.experimental.one_step_off_policy.main_ppo",
                                         "verl.experimental.fully_async_policy.fully_async_main"])
def test_verls_experimental_entry_points_stop_before_ray_starts(entry_point, tmp_path):
    # they call main_ppo's run_ppo without validate_config in the driver: the run_ppo that gdpo-verl wraps when they
    # import it checks the config first, and the GDPO settings come on their own configs by +gdpo=settings
    command = [sys.executable, "-m", entry_point, "hydra.searchpath=[pkg://verl.trainer.config,pkg://gdpo_verl.config]",
               "+gdpo=settings"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode != 0
    assert "gdpo_reward_keys is not set" in result.stderr
    assert RAY_STARTS not in result.stdout
