"""GDPO through each of verl's asynchronous trainers, started by that trainer's own entry point: a CPU run of the tiny
model (scripts/run_cpu_training.sh with TRAINER=...; docs/training-loop.md has the table of what each trainer is
tested for, and docs/cpu-training.md what each needs on a CPU), its driver killed inside its last step, then resumed
from its checkpoint with no step lost or doubled.

The resumed run must pass gdpo_verl/tools/check_run.py (the run script runs it): each step logged once with the
``gdpo/`` metrics, one record per step equal to the advantages verl trained on, every weight changed. On top of
that each test checks what is particular to its trainer: how stale its rollouts are, and that its weight sync
reached the rollout server, before the kill and after the resume (the rollout server of a resumed run starts on
the model's first weights, or random ones, until the trainer sends the checkpoint's). The trainers with rollout
apart from training sync weights through gdpo-verl's CPU checkpoint engine (``cpu_tcp``), which logs what it sent.
Every run trains on the mixed-task batch of test_cpu_training.py (a component that applies to half the prompts,
GD2PO's snr masking, a weight on a schedule).

verl's V1 ``sync`` trainer and its legacy trainer have their runs in test_cpu_training.py (the V1 resume goes on
under ``colocate_async``), its ``colocate_async`` mode also in test_coding_run.py (the coding reward's run).
"""

import math

import pytest

from gdpo_verl.tools.check_run import MAX_PROBS_DIFF, PROBS_DIFF, SENT, STALENESS, step_metrics, step_records
from tests.e2e.test_cpu_training import (MIXED_TASK, check_mixed_task_steps, check_resumed, finish_run,
                                         kill_the_driver_in_step, start_run)

pytestmark = pytest.mark.cpu_training

NODES_CHECKED = "gdpo-verl: \"gdpo\" is gdpo-verl's estimator on all 1 Ray node(s)"
# The tiny model has 21 weight tensors (gdpo_verl/tools/tiny_model.py).
TENSORS = 21
# A checkpoint after each step; the actor updated one sample at a time, twice over, so that the window between a
# step's record and its checkpoint, where the test kills the driver, is seconds long (test_cpu_training.py)
EVERY_STEP = ("trainer.save_freq=1", *MIXED_TASK)
SLOW_UPDATE = ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "actor_rollout_ref.actor.ppo_epochs=2")


def kill_and_resume(out, trainer, steps, *overrides, unlogged=()):
    """A run of ``steps`` steps through ``trainer``, its driver killed in its last step (after that step's record,
    before its checkpoint), then resumed: the metrics of the killed run's steps, then those of both runs, as verl
    logged them, and the resumed run's stdout. ``unlogged``: the steps verl never logs (check_resumed)."""
    env = {"TRAINER": trainer}
    kill_the_driver_in_step(start_run(out, steps, *EVERY_STEP, *SLOW_UPDATE, *overrides, env=env), out, steps)
    log = (out / "run.log").read_text()
    # the per-node check ran in the driver before verl's TaskRunner (the first Ray actor of the run) started
    assert NODES_CHECKED in log
    before = step_metrics(out)
    assert sorted(before) == [step for step in range(1, steps) if step not in unlogged]
    stdout = finish_run(start_run(out, steps, *EVERY_STEP, *overrides, resume=True, env=env),
                        f"TRAINER={trainer} resumed after the kill")
    check_resumed(out, steps, steps, stdout, unlogged)
    assert sorted(step_records(out)) == list(range(1, steps + 1))
    check_mixed_task_steps(out, [step for step in range(1, steps + 1) if step not in unlogged])
    return before, step_metrics(out), stdout


def test_separate_async_syncs_weights_to_its_own_rollout_server_and_resumes(tmp_path):
    # trainer.v1.trainer_mode=separate_async, a rollout server of its own and no warm-up batch. The resumed run's
    # server starts on the model's first weights, and step 2 trains on rollouts it generated after the trainer sent
    # it the step-1 checkpoint's over TCP: vLLM's probabilities agree with the actor's only if they reached it
    # (0.09 apart for rollouts one version old)
    _, metrics, _ = kill_and_resume(tmp_path, "separate_async", 2, "trainer.v1.separate_async.num_warmup_batches=0")
    for step in (1, 2):
        assert metrics[step][STALENESS] == 0
        assert metrics[step][PROBS_DIFF] < MAX_PROBS_DIFF
        assert metrics[step][SENT] == TENSORS  # the sync before the step (at the start, or the step before)


def test_one_step_off_policy_trains_through_its_own_entry_point_and_resumes(tmp_path):
    # verl.experimental.one_step_off_policy.main_ppo: rollouts of step k+1 are generated while step k trains. The
    # rollout server starts on random ("dummy") weights, and the trainer trains on the rollout's own log-probs, so
    # actor/ppo_kl of step 2, the resumed run's first step (on rollouts generated after the sync of the step-1
    # checkpoint's weights, with one update), is near 0 only if that sync reached it. (Step 1, in the killed run,
    # updates twice over, which moves its ppo_kl off 0.)
    _, metrics, stdout = kill_and_resume(tmp_path, "one_step_off", 2)
    assert abs(metrics[2]["actor/ppo_kl"]) < 1e-2
    assert [metrics[step][SENT] for step in (1, 2)] == [TENSORS, TENSORS]
    assert "rollout/actor probs diff not logged" in stdout


def test_fully_async_policy_trains_through_its_own_entry_point_and_resumes(tmp_path):
    # verl.experimental.fully_async_policy.fully_async_main: a rollouter streams groups to the trainer through a
    # message queue. verl logs a step's training metrics during the next step, after its weight sync and checkpoint
    # (under the weight version after it; check_run reads them by the step they trained, training/global_step): the
    # run killed in step 2 never logged step 1, and the resumed run, from step 1's checkpoint, does not train it
    # again. Its record is there, once. Resumed from weight version 1, verl 0.9.1 would number the next step 3 and
    # leave the killed run's record of step 2 in place (gdpo-verl numbers it 2 and says so)
    _, metrics, stdout = kill_and_resume(tmp_path, "fully_async", 2, unlogged=(1,))
    assert "step 1: recorded, not in verl's metrics: the run resumed from its checkpoint" in stdout
    assert metrics[2]["training/global_step"] == 2
    assert not math.isnan(metrics[2]["gdpo/correct/mean"])
    assert metrics[2]["fully_async/count/current_param_version"] == 1  # the weights it trained from
    assert ("resumed from the checkpoint of weight version 1 (1 steps trained, 1 per version), set its global step "
            "to 2, which would number the next step 3 and skip step 2; set to 1, so the next step is 2.") in (
        tmp_path / "run.log").read_text()
