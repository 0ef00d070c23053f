"""The README's routes on the CPU run, as a new user takes them, mistakes included.

One start: the README's example reward pasted into a file and trained through the README's documented line
(``REWARD=my_reward.py bash scripts/train_cpu.sh``), on verl's own config (``CONFIG=verl``: the README's second route,
the GDPO keys given with +), with the overrides a user adds (a tensorboard logger, the records elsewhere): the
verdict is OK, the advantages are not zero, the terminal holds about a screen, nothing lands outside OUT, and
``gdpo-verl plot`` draws the run's curves from its own metrics and from tensorboard's.

Then the mistakes, each stopped before Ray starts (seconds, no start of a run): a misspelled reward key, with the
key the reward returns named; a misspelled option, read from hydra's refusal as the key meant; a checkpoint
directory another run saved in, both runs named. The README's other
route, the packaged config, is the one every CPU run here takes (test_cpu_training.py's main job first); its command
is composed from the README's text in tests/integration/test_config.py."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gdpo_verl.cpu_run import check_run
from tests.e2e.runs import PYTHON, ROOT
from tests.readme import readme_line, readme_reward

pytestmark = pytest.mark.cpu_training


def train_cpu(cwd: Path, out: Path, *overrides: str, steps: int = 2, **env: str) -> subprocess.CompletedProcess:
    if not PYTHON.is_file():
        pytest.fail(f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh")
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_", "LABEL"))}
    return subprocess.run(["bash", str(ROOT / "scripts" / "train_cpu.sh"), *overrides], cwd=cwd,
                          env={**inherited, "OUT": str(out), "STEPS": str(steps), "CPU_TRAINING_PYTHON": str(PYTHON),
                               **env}, capture_output=True, text=True, timeout=1800)


def test_the_readmes_reward_trains_on_the_cpu_run_through_verls_config_with_a_users_overrides(tmp_path):
    line = readme_line("REWARD=")
    assert line == "REWARD=my_reward.py bash scripts/train_cpu.sh"
    cwd = tmp_path / "cwd"  # where the user stands: the reward beside them, given by a relative path
    cwd.mkdir()
    (cwd / "my_reward.py").write_text(readme_reward())
    out, records = tmp_path / "out", tmp_path / "out" / "elsewhere"
    hydra_runs = set((ROOT / "outputs").glob("20*"))  # hydra's default run folders, outputs/<date>, in the checkout
    result = train_cpu(cwd, out, "trainer.logger=[console,tensorboard]", f"algorithm.gdpo.dump_dir={records}",
                       CONFIG="verl", REWARD="my_reward.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.rstrip().endswith(f"GDPO CPU training run: OK (2 steps; outputs in {out})")
    # the logger override keeps verl's file logger, which the verdict reads, and says so
    assert "trainer.logger=[console,tensorboard,file]" in result.stdout
    # about a screen: the phases, a line per step, the verdict; verl's output is in the log
    shown = result.stdout.splitlines()
    assert len(shown) <= 40, result.stdout
    assert sum(line.startswith("step ") for line in shown) == 2 and "run.log" in result.stdout
    metrics = check_run.step_metrics(out)
    assert sorted(metrics) == [1, 2]
    # something to learn (a step where no group has a right answer has none, as under GRPO)
    assert any(metrics[step]["critic/advantages/max"] > 0 for step in (1, 2))
    assert metrics[1]["gdpo/correct/applies_frac"] == metrics[1]["gdpo/length/applies_frac"] == 1.0
    assert sorted(check_run.step_records(out, str(records))) == [1, 2]  # the records where the override put them
    # nothing outside OUT: not where the user stands, not in the checkout
    assert list(cwd.iterdir()) == [cwd / "my_reward.py"]
    assert not (ROOT / "tensorboard_log").exists() and set((ROOT / "outputs").glob("20*")) == hydra_runs
    assert list((out / "tensorboard").rglob("events.out.tfevents*"))
    # gdpo-verl plot reads the run's own metrics, and tensorboard's
    for run in (out, out / "tensorboard"):
        plotted = subprocess.run([str(PYTHON.with_name("gdpo-verl")), "plot", str(run), "--out",
                                  str(tmp_path / "curves.png"), "--json"], capture_output=True, text=True, timeout=300)
        assert plotted.returncode == 0, plotted.stderr
        assert '"gdpo/correct/mean"' in plotted.stdout


def test_a_misspelled_reward_key_stops_before_ray_naming_the_key_the_reward_returns(tmp_path):
    result = train_cpu(tmp_path, tmp_path / "out", "algorithm.gdpo_reward_keys=[corect,length]")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("CPU training run stopped: ValueError: algorithm.gdpo_reward_keys=['corect', 'length'] "
                           "names 'corect' (did you mean 'correct'?), which the reward "
                           "pkg://gdpo_verl.rewards.math_length does not return"), last
    assert "ray init kwargs" not in (tmp_path / "out" / "run.log").read_text()  # before Ray


def test_a_misspelled_option_is_read_from_hydras_refusal_as_the_key_meant(tmp_path):
    result = train_cpu(tmp_path, tmp_path / "out", "algorithm.gdpo.batchnorm=sequence")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert re.match(r"CPU training run stopped: the override algorithm\.gdpo\.batchnorm=sequence names no key of the "
                    r"config: did you mean algorithm\.gdpo\.batch_norm\? ", last), last


def test_a_checkpoint_directory_of_another_run_stops_before_ray_naming_both_runs(tmp_path):
    # the CPU run's own resumes pass the same check (test_cpu_training.py: check_resumed reads the owner's record)
    other = tmp_path / "other_run"
    other.mkdir()
    (other / "gdpo_verl_run.json").write_text('{"project": "gdpo_cpu", "experiment": "bigger"}')
    (other / "global_step_4").mkdir()
    result = train_cpu(tmp_path, tmp_path / "out", f"trainer.default_local_dir={other}")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"CPU training run stopped: ValueError: trainer.default_local_dir={str(other)!r} holds the "
                           "checkpoints of another run (project 'gdpo_cpu', experiment 'bigger'"), last
    assert "this run is project 'gdpo_cpu', experiment 'tiny'" in last
    assert "ray init kwargs" not in (tmp_path / "out" / "run.log").read_text()  # before Ray
    assert sorted(path.name for path in other.iterdir()) == ["gdpo_verl_run.json", "global_step_4"]  # untouched
