"""What a run was configured with, read back from hydra's record of its composed config: ``<run dir>/.hydra/
config.yaml`` (``hydra.run.dir``; the CPU run sets it to ``OUT/hydra``). The CPU run's verdict (``cpu_run/
check_run.py``) reads the reward keys and the records' directory from it, so that it follows the user's overrides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

CONFIG_FILE = Path(".hydra") / "config.yaml"


@dataclass(frozen=True)
class RunConfig:
    """The values of a run's config its verdict reads.

    Attributes:
        reward_keys: ``algorithm.gdpo_reward_keys`` (empty when unset).
        dump_dir: ``algorithm.gdpo.dump_dir``: where the per-step records went (None: none were written).
        adv_estimator: ``algorithm.adv_estimator``.
    """

    reward_keys: tuple[str, ...]
    dump_dir: str | None
    adv_estimator: str


def read_run_config(run_dir: Path) -> RunConfig:
    """The config hydra recorded in ``run_dir`` (its ``hydra.run.dir``); ValueError naming the file when there is
    none, or a value cannot be read."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise ValueError(f"no record of the run's config at {path}: the run did not start (hydra writes it first), or "
                         "hydra.run.dir was set elsewhere.")
    config = OmegaConf.load(path)

    def value(key: str, default: Any = None) -> Any:
        try:
            found = OmegaConf.select(config, key, default=default, throw_on_resolution_failure=True)
        except Exception as exc:  # an interpolation this record cannot resolve alone (an environment variable)
            raise ValueError(f"{path}: {key} cannot be read ({type(exc).__name__}: {exc}).") from exc
        return OmegaConf.to_container(found) if OmegaConf.is_config(found) else found

    keys = value("algorithm.gdpo_reward_keys") or ()
    return RunConfig(tuple(str(key) for key in keys), value("algorithm.gdpo.dump_dir"),
                     str(value("algorithm.adv_estimator", "")))
