"""Hydra composition of the packaged config through verl's real main_ppo (--cfg job prints, runs nothing)."""

import re
import shlex
import subprocess
import sys
from importlib.resources import files

import pytest
from omegaconf import OmegaConf

from gdpo_verl.core.options import COMPUTED, DEFAULTS, GdpoOptions
from gdpo_verl.verl_adapter.settings import OPTION_DEFAULTS, settings_from_config
from tests.readme import README


def compose(*arguments):
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *arguments, "--cfg", "job"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return OmegaConf.create(result.stdout)




def readme_routes():
    """The README's commands on verl's main_ppo, as a user pastes them (its "..." stands for the user's own
    settings: left out)."""
    blocks = re.findall(r"```bash\n(python -m verl\.trainer\.main_ppo .*?)```", README.read_text(), re.S)
    assert len(blocks) == 2, "the README shows two routes onto verl's main_ppo (the packaged config, verl's own)"
    return [[word for word in shlex.split(block.replace("\\\n", " "), comments=True)[3:] if word != "..."]
            for block in blocks]


@pytest.mark.parametrize("arguments", readme_routes(), ids=["packaged-config", "verl-config-with-plus"])
def test_main_ppo_composes_gdpo_settings(arguments):
    config = compose(*arguments)
    assert config.algorithm.adv_estimator == "gdpo"
    assert config.trainer.use_v1 is True  # verl's default trainer, in both forms
    # the manager that passes extra_info["response_length"] to the README's example reward, on both routes
    assert config.reward.reward_manager.name == "gdpo_verl"
    assert config.reward.custom_reward_function.name == "compute_score"
    assert config.algorithm.filter_groups.enable is False
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size is not None  # verl's own defaults are all there
    settings = settings_from_config(config.algorithm)
    assert settings.reward_keys == ("correct", "length")
    assert settings.weights == {"correct": 1.0, "length": 0.5}


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
    assert settings.dump_dir is None
    assert declared.gdpo_reward_keys is None and declared.gdpo_reward_weights is None
    assert declared.use_kl_in_reward is False
