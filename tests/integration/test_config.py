"""Hydra composition of the packaged config through verl's real main_ppo (--cfg job prints, runs nothing)."""

import subprocess
import sys
from importlib.resources import files

import pytest
from omegaconf import OmegaConf

from gdpo_verl.core.advantage import DEFAULT_BATCH_NORM, DEFAULT_EPS, GdpoOptions
from gdpo_verl.verl_adapter.settings import OPTION_DEFAULTS, settings_from_config


def compose(*arguments):
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *arguments, "--cfg", "job"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return OmegaConf.create(result.stdout)


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(
            ["--config-path", "pkg://gdpo_verl.config", "--config-name", "gdpo_trainer",
             "algorithm.gdpo_reward_keys=[correct,length]", "algorithm.gdpo_reward_weights=[1.0,0.5]",
             "algorithm.gdpo.batch_norm=sequence"],
            id="packaged-config",
        ),
        pytest.param(
            ["algorithm.adv_estimator=gdpo", "+algorithm.gdpo_reward_keys=[correct,length]",
             "+algorithm.gdpo_reward_weights=[1.0,0.5]", "+algorithm.gdpo.batch_norm=sequence"],
            id="verl-config-with-plus",
        ),
    ],
)
def test_main_ppo_composes_gdpo_settings(arguments):
    config = compose(*arguments)
    assert config.algorithm.adv_estimator == "gdpo"
    assert config.trainer.use_v1 is True  # verl's default trainer, in both forms
    packaged = "--config-name" in arguments
    assert config.reward.reward_manager.name == ("gdpo_verl" if packaged else "naive")
    assert config.algorithm.filter_groups.enable is False
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size is not None  # verl's own defaults are all there
    settings = settings_from_config(config.algorithm)
    assert settings.reward_keys == ("correct", "length")
    assert settings.weights == {"correct": 1.0, "length": 0.5}
    assert settings.options.batch_norm == "sequence"


def test_packaged_config_declares_every_option_with_the_default_the_code_uses():
    declared = OmegaConf.load(files("gdpo_verl.config") / "gdpo" / "settings.yaml").algorithm
    assert dict(declared.gdpo) == OPTION_DEFAULTS  # read from the yaml: what a config without algorithm.gdpo gets
    # the core's defaults, for callers without verl, are the config's
    assert (declared.gdpo.batch_norm, declared.gdpo.eps) == (DEFAULT_BATCH_NORM, DEFAULT_EPS)
    settings = settings_from_config({"gdpo_reward_keys": ["correct"]})
    assert (settings.options.batch_norm, settings.options.eps, settings.dump_dir) == (DEFAULT_BATCH_NORM, DEFAULT_EPS, None)
    # and the options beyond the paper's: the yaml's defaults are the core's (GdpoOptions)
    core = GdpoOptions()
    for name in ("baseline", "conflict", "conflict_threshold", "adaptive_weights"):
        assert declared.gdpo[name] == getattr(core, name) == getattr(settings.options, name), name
    assert declared.gdpo_reward_keys is None and declared.gdpo_reward_weights is None
    assert declared.norm_adv_by_std_in_grpo is True and declared.use_kl_in_reward is False
