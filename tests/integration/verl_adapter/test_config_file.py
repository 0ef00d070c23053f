"""The packaged config's options are the rendering of their declarations (gdpo_verl/verl_adapter/config_file.py),
and read back as declared."""

import dataclasses
import math
from importlib.resources import files

import pytest
import yaml
from omegaconf import OmegaConf

from gdpo_verl.core.options import OPTIONS
from gdpo_verl.verl_adapter.config_file import config_with_block, rendered, yaml_value

CONFIG = files("gdpo_verl.config") / "gdpo" / "settings.yaml"


def test_the_packaged_config_is_the_rendering_of_the_declarations(monkeypatch):
    shipped = CONFIG.read_text()
    assert rendered(shipped) == shipped, "run python scripts/render_settings.py"
    # a changed declaration changes the rendering (and so fails the check above until the yaml is rendered again),
    # in the block and under algorithm
    monkeypatch.setitem(OPTIONS, "eps", dataclasses.replace(OPTIONS["eps"], default=1e-4))
    monkeypatch.setitem(OPTIONS, "norm_by_std", dataclasses.replace(OPTIONS["norm_by_std"], default=False,
                                                                   doc="one line"))
    changed = rendered(shipped)
    assert "    eps: 0.0001\n" in changed and "    eps: 1.0e-06\n" in shipped
    assert "\n  # one line\n  norm_adv_by_std_in_grpo: false\n" in changed
    assert "honoured per component" in shipped and "honoured per component" not in changed


def test_rendering_replaces_the_options_only():
    shipped = CONFIG.read_text()
    # a key of algorithm after the block, and one at the top level, are kept as they are
    text = shipped.replace("    reward_timeout_s: 600\n", "    reward_timeout_s: 600\n  kl_ctrl_extra: 1\n# a note\n")
    changed = rendered(text)
    assert "\n  kl_ctrl_extra: 1\n# a note\n" in changed and rendered(changed) == changed
    assert config_with_block(shipped) == shipped
    with pytest.raises(ValueError, match="has 0 lines '  gdpo_reward_keys:' under algorithm"):
        rendered(shipped.replace("  gdpo_reward_keys: null", "  other: null"))


@pytest.mark.parametrize("value", [1e-6, 1e-4, 2.5e20, 0.8, 600, None, (), True, "token", "on", "No", "1.5", "a: b",
                                   "", math.inf, [1], {"a": 1}])
def test_a_default_reads_back_as_itself_in_pyyaml_and_omegaconf(value):
    expected = list(value) if isinstance(value, tuple) else value
    line = yaml_value(value)
    assert "\n" not in line
    assert yaml.safe_load(f"key: {line}")["key"] == expected
    assert OmegaConf.to_container(OmegaConf.create(f"key: {line}"))["key"] == expected
