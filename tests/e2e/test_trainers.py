"""GDPO through each of verl's asynchronous trainers, started by that trainer's own entry point: a CPU run of the tiny
model (scripts/run_cpu_training.sh with TRAINER=...; docs/training-loop.md has the table of what each trainer is
tested for, and docs/cpu-training.md what each needs on a CPU).

Every run must pass gdpo_verl/tools/check_run.py (the run script runs it): each step logged once with the ``gdpo/``
metrics, one record per step equal to the advantages verl trained on, every weight changed. On top of that each test
checks what is particular to its trainer: how stale its rollouts are, and that its weight sync reached the rollout
server. The trainers with rollout apart from training sync weights through gdpo-verl's CPU checkpoint engine
(``cpu_tcp``), which logs what it sent.

verl's V1 ``sync`` trainer and its legacy trainer have their runs in test_cpu_training.py, its ``colocate_async`` mode
in test_coding_run.py (the coding reward's run).
"""

import math

import pytest

from gdpo_verl.tools.check_run import MAX_PROBS_DIFF, PROBS_DIFF, SENT, STALENESS, step_metrics, step_records
from tests.e2e.test_cpu_training import start_run, stop_run

pytestmark = pytest.mark.cpu_training

NODES_CHECKED = "gdpo-verl: \"gdpo\" is gdpo-verl's estimator on all 1 Ray node(s)"
# The tiny model has 21 weight tensors (gdpo_verl/tools/tiny_model.py).
TENSORS = 21


def run_trainer(out, trainer, steps, *overrides):
    process = start_run(out, steps, *overrides, env={"TRAINER": trainer})
    try:
        stdout, stderr = process.communicate(timeout=1800)
    finally:
        stop_run(process)
    assert process.returncode == 0, f"TRAINER={trainer} failed (log: {out / 'run.log'}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
    log = (out / "run.log").read_text()
    # the per-node check ran in the driver before verl's TaskRunner (the first Ray actor of the run) started
    assert NODES_CHECKED in log
    metrics, records = step_metrics(out), step_records(out)
    assert sorted(metrics) == sorted(records) == list(range(1, steps + 1))
    return stdout, metrics


def test_separate_async_syncs_weights_to_its_own_rollout_server(tmp_path):
    # trainer.v1.trainer_mode=separate_async, a rollout server of its own and no warm-up batch: steps 2 and 3 train on
    # rollouts that the server generated after the weight sync of the step before, so vLLM's probabilities agree
    # with the actor's only if the weights the trainer sent over TCP reached it (0.09 apart when they did not)
    stdout, metrics = run_trainer(tmp_path, "separate_async", 3, "trainer.v1.separate_async.num_warmup_batches=0")
    for step in (2, 3):
        assert metrics[step][STALENESS] == 0
        assert metrics[step][PROBS_DIFF] < MAX_PROBS_DIFF
        assert metrics[step][SENT] == TENSORS  # the sync at the end of the step before, logged with this one


def test_one_step_off_policy_trains_through_its_own_entry_point(tmp_path):
    # verl.experimental.one_step_off_policy.main_ppo: rollouts of step k+1 are generated while step k trains. The
    # rollout server starts on random ("dummy") weights, and the trainer trains on the rollout's own log-probs, so
    # actor/ppo_kl of step 1 (taken before its one update) is near 0 only if the sync before step 1 reached it
    stdout, metrics = run_trainer(tmp_path, "one_step_off", 2)
    assert abs(metrics[1]["actor/ppo_kl"]) < 1e-2
    assert [metrics[step][SENT] for step in (1, 2)] == [TENSORS, TENSORS]
    assert "rollout/actor probs diff not logged" in stdout


def test_fully_async_policy_trains_through_its_own_entry_point(tmp_path):
    # verl.experimental.fully_async_policy.fully_async_main: a rollouter streams groups to the trainer through a
    # message queue. verl logs a step's training metrics with the weight version after it; check_run reads them by
    # the step they trained (training/global_step), and every step's record is there once
    stdout, metrics = run_trainer(tmp_path, "fully_async", 2)
    for step in (1, 2):
        assert metrics[step]["training/global_step"] == step
        assert not math.isnan(metrics[step]["gdpo/correct/mean"])
        assert metrics[step]["fully_async/count/current_param_version"] == step - 1  # the weights it trained from
