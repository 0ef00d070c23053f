"""One checkpoint directory per run: the run that writes checkpoints into ``trainer.default_local_dir`` is recorded
there, and another run is refused that directory before Ray starts.

verl resumes (``trainer.resume_mode=auto``, its default) from the newest ``global_step_*`` in
``trainer.default_local_dir`` whatever run wrote it, and saves over another run's steps. Two runs given the same
directory (a sweep, a GRPO and a GDPO run started from one shell) would silently train one on the other's weights.
So the first run in a directory writes ``OWNER_FILE`` there (its project and experiment); a later run with another
project or experiment is refused, naming both; a run of the same name resumes as verl does. A directory that already
holds checkpoints but no record (written by plain verl) is refused too: nothing says whose they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gdpo_verl.verl_adapter.reward_config import config_value as _get

OWNER_FILE = "gdpo_verl_run.json"
# What verl writes into the directory: one folder per save, and the number of the last one.
VERL_CHECKPOINT_MARKS = ("latest_checkpointed_iteration.txt",)
VERL_STEP_PREFIX = "global_step_"


def run_name(config: Any) -> dict[str, str]:
    trainer = _get(config, "trainer")
    return {"project": str(_get(trainer, "project_name")), "experiment": str(_get(trainer, "experiment_name"))}


def checkpoint_dir(config: Any) -> Path | None:
    directory = _get(_get(config, "trainer"), "default_local_dir")
    return None if directory in (None, "") else Path(str(directory)).expanduser()


def _holds_checkpoints(directory: Path) -> bool:
    if any((directory / mark).exists() for mark in VERL_CHECKPOINT_MARKS):
        return True
    return any(entry.name.startswith(VERL_STEP_PREFIX) for entry in directory.iterdir())


def check_checkpoint_owner(config: Any) -> None:
    """Refuse ``trainer.default_local_dir`` when it belongs to another run (ValueError naming both runs and the fix).
    Reads only."""
    directory = checkpoint_dir(config)
    if directory is None or not directory.is_dir():
        return
    this = run_name(config)
    fix = ("Give this run a directory of its own (recipes: another EXPERIMENT=..., or CHECKPOINT_DIR, a root under "
           "which each run gets $PROJECT/$EXPERIMENT; verl: trainer.default_local_dir=...)")
    owner_file = directory / OWNER_FILE
    if owner_file.is_file():
        try:
            owner = json.loads(owner_file.read_text())
            recorded = {"project": str(owner["project"]), "experiment": str(owner["experiment"])}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"trainer.default_local_dir={str(directory)!r}: {owner_file} does not say which run it belongs to "
                f"({exc!r}); it should hold {json.dumps(this)}. {fix}, or write that file if these are this run's "
                "checkpoints."
            ) from exc
        if recorded != this:
            raise ValueError(
                f"trainer.default_local_dir={str(directory)!r} holds the checkpoints of another run (project "
                f"{recorded['project']!r}, experiment {recorded['experiment']!r}; {owner_file}), and this run is "
                f"project {this['project']!r}, experiment {this['experiment']!r}: verl would resume from that run's "
                f"weights and save over its steps. {fix}; to continue that run, launch it under its own names."
            )
        return
    if _holds_checkpoints(directory):
        raise ValueError(
            f"trainer.default_local_dir={str(directory)!r} holds checkpoints that no run recorded as its own "
            f"(no {OWNER_FILE}: written by verl without gdpo-verl, or by an older gdpo-verl): verl would resume "
            f"from them. {fix}. If they are this run's, record it: echo '{json.dumps(this)}' > {owner_file}"
        )


def claim_checkpoint_dir(config: Any) -> None:
    """Record this run as the owner of ``trainer.default_local_dir`` (after ``check_checkpoint_owner`` passed), creating
    the directory. A run that cannot create it is told here, before Ray starts, not at its first save."""
    directory = checkpoint_dir(config)
    if directory is None or (directory / OWNER_FILE).is_file():
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / f".{OWNER_FILE}.{os.getpid()}"
        temporary.write_text(json.dumps(run_name(config)) + "\n")
        temporary.replace(directory / OWNER_FILE)
    except OSError as exc:
        raise ValueError(
            f"trainer.default_local_dir={str(directory)!r}: cannot write there ({exc.strerror or exc}); verl saves the "
            "run's checkpoints there. Set CHECKPOINT_DIR (recipes) or trainer.default_local_dir to a writable "
            "directory, on storage every node sees when the run has several nodes."
        ) from exc
