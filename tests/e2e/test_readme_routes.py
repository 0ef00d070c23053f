"""The README's route onto verl's own config, as a new user takes it: the README's example reward pasted into a file,
the README's command with that file's path, and only what the CPU run adds (scripts/cpu_main_ppo.sh with
CONFIG=verl: the CPU platform and settings, the supervisor; and the CPU task's model, data and sizes). It must reach
its first advantage step: GDPO's metrics of step 1 logged, both of the reward's components scored.

The README's other route, the packaged config, is the one every CPU run here takes (test_cpu_training.py's main job
first); its command is composed from the README's text in tests/integration/test_config.py, and the pasted reward
scored through the gdpo_verl manager in tests/integration/verl_adapter/test_reward_manager.py. One start, about 3 to
4 minutes on 2 cores."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gdpo_verl.cpu_run import check_run
from tests.e2e.test_cpu_training import PYTHON, ROOT
from tests.integration.test_config import README, readme_routes

pytestmark = pytest.mark.cpu_training


def readme_reward() -> str:
    usage = README.read_text()[README.read_text().index("### Your rewards, your verl config"):]
    start = usage.index("```python\n") + len("```python\n")
    return usage[start:usage.index("```", start)]


def cpu_task(out: Path) -> list[str]:
    """The CPU run's task without its rewards (scripts/run_cpu_training.sh's TASK): the tiny model and the 8-prompt
    fixture, 4 responses of up to 16 tokens each."""
    train = out / "data" / "deepscaler_train.parquet"
    return [f"data.train_files={train}", f"data.val_files={train}", "data.train_batch_size=8",
            "data.max_prompt_length=64", "data.max_response_length=16", f"actor_rollout_ref.model.path={out / 'model'}",
            "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
            "actor_rollout_ref.actor.use_kl_loss=False", "actor_rollout_ref.rollout.n=4",
            "actor_rollout_ref.rollout.max_model_len=128", "actor_rollout_ref.rollout.max_num_batched_tokens=512",
            "actor_rollout_ref.rollout.max_num_seqs=32", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16"]


def test_the_readmes_route_on_verls_own_config_with_its_example_reward_reaches_its_first_advantage_step(tmp_path):
    if not PYTHON.is_file():
        pytest.fail(f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh")
    for command in ([str(PYTHON), "-m", "gdpo_verl.cpu_run.tiny_model", str(tmp_path / "model")],
                    [str(PYTHON), str(ROOT / "scripts" / "prepare_data.py"), "--out", str(tmp_path / "data"), "--local",
                     f"deepscaler={ROOT / 'gdpo_verl' / 'data' / 'cpu_training_math.jsonl'}"]):
        made = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert made.returncode == 0, made.stderr[-3000:]
    (tmp_path / "my_reward.py").write_text(readme_reward())
    _, own_config = readme_routes()
    route = [word.replace("/path/to/my_reward.py", str(tmp_path / "my_reward.py")) for word in own_config]
    assert f"reward.custom_reward_function.path={tmp_path / 'my_reward.py'}" in route

    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "cpu_main_ppo.sh"), *route, *cpu_task(tmp_path)],
        env={**inherited, "CONFIG": "verl", "OUT": str(tmp_path), "STEPS": "1", "LABEL": "readme",
             "CPU_TRAINING_PYTHON": str(PYTHON)},
        capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:] + (tmp_path / "run.log").read_text()[-4000:]
    metrics = check_run.step_metrics(tmp_path)
    assert list(metrics) == [1]
    step = metrics[1]
    # the estimator ran on both of the reward's components; 16-token responses are all within the length budget
    assert step["gdpo/length/mean"] == 1.0 and 0.0 <= step["gdpo/correct/mean"] <= 1.0
    assert step["gdpo/correct/weight"] == 1.0 and step["gdpo/length/weight"] == 0.5
    assert step["gdpo/correct/applies_frac"] == step["gdpo/length/applies_frac"] == 1.0
