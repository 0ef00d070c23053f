"""Two steps of GDPO on the coding reward through verl's main_ppo on the CPU (scripts/cpu_main_ppo.sh), on the V1
trainer's asynchronous colocated mode (TRAINER=colocate_async: step 2 trains on rollouts one policy version old;
tests/e2e/test_trainers.py runs the other asynchronous trainers): the programs the policy writes run in the
bubblewrap sandbox inside verl's reward worker, a Ray actor.

The tiny model's vocabulary holds three whole fenced programs as single tokens (a right one, a wrong one, one that
raises), so a freshly initialised model writes each of them in some responses and none in others: pass_rate,
length and no_bug vary within groups, and a score above 0 can only come from a program that ran in the sandbox and
printed the right answers. The data goes through scripts/prepare_coding_data.py. Needs .venv-cpu-training.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gdpo_verl.cpu_run.check_run import MAX_PROBS_DIFF, PROBS_DIFF, STALENESS
from tests.e2e.runs import PYTHON, ROOT

pytestmark = pytest.mark.cpu_training

RIGHT, WRONG, RAISES = "```python\nprint(int(input())*2)\n```", "```python\nprint(0)\n```", "```python\n1/0\n```"
WORDS = (RIGHT, WRONG, RAISES, "here", "is", "my", "code", "double", "the", "number", "user", "assistant", ":")
KEYS = ("pass_rate", "length", "no_bug")


def coding_rows() -> list[dict]:
    truth = json.dumps({"inputs": ["2\n", "5\n"], "outputs": ["4\n", "10\n"]})
    return [{"data_source": "apps", "ability": "coding", "prompt": [{"role": "user", "content": f"double the number {i}"}],
             "reward_model": {"style": "rule", "ground_truth": truth}, "extra_info": {"index": i}} for i in range(4)]


def test_two_gdpo_steps_score_programs_in_the_sandbox_inside_verls_reward_worker(tmp_path):
    if not PYTHON.is_file():
        pytest.fail(f"no CPU training environment at {PYTHON}: create it with bash scripts/setup_cpu_training_env.sh")
    source = tmp_path / "eurus"
    source.mkdir()
    (source / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in coding_rows()))
    prepared = subprocess.run([str(PYTHON), str(ROOT / "scripts" / "prepare_coding_data.py"), "--out",
                               str(tmp_path / "data"), "--eurus", str(source)], capture_output=True, text=True, timeout=300)
    assert prepared.returncode == 0, prepared.stderr
    built = subprocess.run([str(PYTHON), "-c", "import sys; from pathlib import Path; from gdpo_verl.cpu_run.tiny_model "
                            f"import build; build(Path(sys.argv[1]), words={WORDS!r})", str(tmp_path / "model")],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert built.returncode == 0, built.stderr

    out, data = tmp_path / "run", tmp_path / "data" / "train.parquet"
    out.mkdir()
    overrides = [
        f"algorithm.gdpo_reward_keys=[{','.join(KEYS)}]", f"algorithm.gdpo.dump_dir={out / 'gdpo'}",
        "reward.custom_reward_function.path=pkg://gdpo_verl.rewards.coding",
        "+reward.custom_reward_function.reward_kwargs.objectives=3",
        "+reward.custom_reward_function.reward_kwargs.max_length=6",
        "+reward.custom_reward_function.reward_kwargs.think=none",
        f"data.train_files={data}", f"data.val_files={data}", "data.train_batch_size=4",
        "data.max_prompt_length=32", "data.max_response_length=12",
        f"actor_rollout_ref.model.path={tmp_path / 'model'}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.actor.optim.lr=1e-2", "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.max_model_len=64",
        "actor_rollout_ref.rollout.max_num_batched_tokens=512", "actor_rollout_ref.rollout.max_num_seqs=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
        "trainer.project_name=gdpo_cpu", "trainer.experiment_name=coding",
    ]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "VERL_"))}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "cpu_main_ppo.sh"), *overrides],
                         env={**env, "CPU_TRAINING_PYTHON": str(PYTHON), "OUT": str(out), "STEPS": "2",
                              "TRAINER": "colocate_async"},
                         capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # main_ppo started the sandbox on every Ray node before verl's TaskRunner (and so before any model) started
    assert "gdpo-verl: the reward's sandbox (gdpo_verl.rewards.coding) runs on all 1 Ray node(s)" in (
        out / "run.log").read_text()

    metrics = {entry["step"]: entry["data"] for entry in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}
    assert sorted(metrics) == [1, 2]
    records = [json.loads(line) for line in (out / "gdpo" / "gdpo_steps.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [1, 2]
    rewards = {key: [value for record in records for value in record["rewards"][key]] for key in KEYS}
    for key in KEYS:
        assert f"gdpo/{key}/mean" in metrics[1], key
    # colocate_async: one warm-up batch, so step 2 trained on rollouts of the policy before it; step 1's were
    # generated after the first weight sync, so vLLM agreed with the actor there (it starts on random weights)
    assert [metrics[step][STALENESS] for step in (1, 2)] == [0, 1]
    assert metrics[1][PROBS_DIFF] < MAX_PROBS_DIFF
    # programs ran in the sandbox inside the reward worker: only a run of the right program passes a test
    assert max(rewards["pass_rate"]) == 1.0
    # and the others were told apart: no program (no code, or the one that raises) is not clean, a wrong one is
    assert set(rewards["no_bug"]) == {0.0, 1.0}
    assert any(pass_rate == 0.0 and clean == 1.0 for pass_rate, clean in zip(rewards["pass_rate"], rewards["no_bug"]))
