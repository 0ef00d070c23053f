"""Hydra composition of the packaged config through verl's real main_ppo (--cfg job prints, runs nothing)."""

import subprocess
import sys
from importlib.resources import files

import pytest
from omegaconf import OmegaConf

from gdpo_verl.core.advantage import DEFAULT_BATCH_NORM, DEFAULT_EPS, GdpoOptions
from gdpo_verl.core.options import COMPUTED, DEFAULTS
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
    # the yaml, as OmegaConf reads it (YAML 1.1: 1.0e-6 a float), gives each option its declared default
    declared = OmegaConf.load(files("gdpo_verl.config") / "gdpo" / "settings.yaml").algorithm
    assert OmegaConf.to_container(declared.gdpo) == {
        name: list(value) if isinstance(value, tuple) else value for name, value in OPTION_DEFAULTS.items()}
    assert declared.norm_adv_by_std_in_grpo is DEFAULTS["norm_by_std"]
    # a config without algorithm.gdpo reads the same defaults, and so does the core, for callers without verl
    settings = settings_from_config({"gdpo_reward_keys": ["correct"]})
    core = GdpoOptions()
    for name in COMPUTED:
        assert getattr(core, name) == getattr(settings.options, name) == DEFAULTS[name], name
    assert (settings.dump_dir, DEFAULT_BATCH_NORM, DEFAULT_EPS) == (None, DEFAULTS["batch_norm"], DEFAULTS["eps"])
    assert declared.gdpo_reward_keys is None and declared.gdpo_reward_weights is None
    assert declared.use_kl_in_reward is False
