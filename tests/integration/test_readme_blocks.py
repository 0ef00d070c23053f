"""Every command of the README's code blocks is run by a test as written, or says why it cannot be here.

``ROUTES`` maps each command the README shows to the test that runs it; a command the README gains without an entry
fails here, so a new route cannot go untested. The commands that run in seconds in this environment (the plugin
check, the gdpo-verl commands with their placeholders filled in) run in this file."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

# the start of a command -> where it runs (a test, or why it cannot run here)
ROUTES = {
    "bash scripts/train_cpu.sh": "tests/e2e/test_readme_routes.py (train_cpu.sh itself, with the README's reward)",
    "bash scripts/test.sh": ".ci/run (CI runs it on a clean clone)",
    "REWARD=my_reward.py bash scripts/train_cpu.sh": "tests/e2e/test_readme_routes.py, as written",
    "pip install -e '.[vllm]'": "not here: a GPU node's install (verl's vllm extra pins a CUDA torch)",
    "pip install -e .": "scripts/setup_env.sh, which makes this environment (with torch pinned beside it)",
    "python -c \"import verl; from verl.trainer.ppo import core_algos;": "this file",
    "python -m verl.trainer.main_ppo": "tests/integration/test_config.py (both routes, composed by main_ppo)",
    "gdpo-verl inspect": "this file", "gdpo-verl demo": "this file", "gdpo-verl collapse": "this file",
    "gdpo-verl plot": "this file", "gdpo-verl check-reward": "this file",
    "gdpo-verl doctor": "tests/integration/tools/test_cli_tools.py (a real local Ray cluster)",
    "python scripts/prepare_data.py": "tests/integration/scripts/test_data_and_evaluation.py (--local: the datasets "
                                      "download from the hub, which this machine cannot reach)",
    "python scripts/prepare_tool_data.py": "tests/integration/scripts/test_tool_data.py (ToolRL's files, local)",
    "python scripts/prepare_coding_data.py": "tests/integration/scripts/test_coding_data.py (Eurus-2-RL-Data's "
                                             "layout, local)",
    "DATA_DIR=": "tests/integration/recipes/test_recipes.py (every recipe through main_ppo's checks, no GPU)",
}


def readme_commands() -> list[str]:
    """Every command of the README's bash blocks: a line (with its continuation lines), its comment cut."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split("  #")[0].strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def test_every_readme_command_has_a_test_that_runs_it():
    untested = [command for command in readme_commands() if not any(command.startswith(start) for start in ROUTES)]
    assert not untested, f"README commands no test runs (add them to ROUTES, with the test): {untested}"
    unused = [start for start in ROUTES if not any(command.startswith(start) for command in readme_commands())]
    assert not unused, f"ROUTES names commands the README no longer shows: {unused}"


def test_the_plugin_check_prints_what_the_readme_says():
    block = next(block for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
                 if "get_adv_estimator_fn" in block)
    lines = block.splitlines()
    command = next(line for line in lines if line.startswith("python -c"))
    expected = lines[lines.index(command) + 1].lstrip("# ").strip()
    result = subprocess.run([sys.executable, *shlex.split(command)[1:]], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == expected


def gdpo_verl_commands() -> list[str]:
    return [command for command in readme_commands() if command.startswith("gdpo-verl ")
            and not command.startswith("gdpo-verl doctor")]


def filled_in(command: str, tmp_path: Path) -> list[str]:
    """A README command with its placeholders as a user fills them in: a run's records, rollouts, two runs' logs,
    their reward and data."""
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    example = ROOT / "gdpo_verl" / "data" / "example_steps.jsonl"
    (records / "gdpo_steps.jsonl").write_text(example.read_text())
    for run in ("RUN_A", "RUN_B"):
        (tmp_path / run).mkdir(exist_ok=True)
        lines = [{"step": step, "data": {"gdpo/correct/mean": 0.1 * step, "response_length/mean": 100.0 + step}}
                 for step in (1, 2, 3)]
        (tmp_path / run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "my_reward.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
        "    correct = float(solution_str.strip() == str(ground_truth))\n"
        "    return {'score': correct, 'correct': correct, 'length': float(extra_info['response_length'] <= 2)}\n")
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(
        {"data_source": "math", "reward_model": {"ground_truth": answer}, "extra_info": {"index": index}}) + "\n"
        for index, answer in enumerate(("2", "4", "9"))))
    places = {"/path/to/dump_dir": str(records), "FILE.jsonl": str(ROOT / "gdpo_verl/data/demo_rollouts.jsonl"),
              "RUN_A": str(tmp_path / "RUN_A"), "RUN_B": str(tmp_path / "RUN_B"),
              "my_reward.py": str(tmp_path / "my_reward.py"), "train.parquet": str(tmp_path / "train.jsonl")}
    words = shlex.split(command)
    return [places.get(word, word) for word in words]


@pytest.mark.parametrize("command", gdpo_verl_commands())
def test_each_gdpo_verl_command_of_the_readme_runs(command, tmp_path):
    executable = Path(sys.executable).with_name("gdpo-verl")
    words = filled_in(command, tmp_path)
    result = subprocess.run([str(executable), *words[1:]], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
