"""The config key a misspelled hydra override most likely meant: hydra refuses ``algorithm.gdpo.batchnorm=...`` with
"Key 'batchnorm' is not in struct" and advises a ``+``, which would add a key nothing reads. The CPU run's narrator
(``gdpo_verl/cpu_run/narrate.py``) asks this for the fix, once the run has stopped."""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from gdpo_verl.core.checks import closest

# The entry points whose config this composes: verl's main_ppo (its own config, or one named by --config-path and
# --config-name) and its experimental trainers' (their config modules).
ENTRY_CONFIGS = {
    "verl.trainer.main_ppo": ("verl.trainer.config", "ppo_trainer"),
    "verl.experimental.one_step_off_policy.main_ppo": ("verl.experimental.one_step_off_policy.config",
                                                       "one_step_off_ppo_trainer"),
    "verl.experimental.fully_async_policy.fully_async_main": ("verl.experimental.fully_async_policy.config",
                                                              "fully_async_ppo_trainer"),
}


def closest_key(command: Sequence[str], full_key: str) -> str | None:
    """The key of ``command``'s config (``python -m <entry point> [--config-path pkg://M --config-name N]
    overrides...``) closest to ``full_key``, which the config lacks: its part that first names nothing is compared
    with the keys beside it. None when nothing is close, or the config cannot be composed without that override."""
    arguments = list(command)
    entry = next((arguments[at + 1] for at, word in enumerate(arguments[:-1]) if word == "-m"), None)
    if entry not in ENTRY_CONFIGS:
        return None
    module, name = ENTRY_CONFIGS[entry]
    if "--config-path" in arguments and "--config-name" in arguments:
        path = arguments[arguments.index("--config-path") + 1]
        if not path.startswith("pkg://"):
            return None
        module, name = path.removeprefix("pkg://").replace("/", "."), arguments[arguments.index("--config-name") + 1]
    start = arguments.index(entry) + 1
    overrides = [word for at, word in enumerate(arguments[start:], start)
                 if "=" in word and not word.startswith("-") and arguments[at - 1] not in ("--config-path", "--config-name")
                 and not word.lstrip("+").startswith(("hydra.", full_key))]
    try:
        with initialize_config_module(module, version_base=None):
            config = compose(name, overrides=overrides)
    except Exception:  # noqa: BLE001 - another override is refused too: no suggestion, hydra's error stands
        return None
    node, path = config, []
    for part in full_key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            guess = closest(part, [str(key) for key in node]) if isinstance(node, DictConfig) else None
            return ".".join([*path, guess]) if guess else None
        node, path = node[part], [*path, part]
    return None
