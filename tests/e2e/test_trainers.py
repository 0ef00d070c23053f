"""GDPO through verl's experimental trainers, each started by its own entry point: a CPU run of the tiny model
(scripts/run_cpu_training.sh with TRAINER=...; docs/training-loop.md has the table of what each trainer is tested for,
and docs/cpu-training.md what each needs on a CPU), its driver killed inside its second step, then resumed from its
checkpoint with no step lost or doubled.

The resumed run must pass gdpo_verl/cpu_run/check_run.py (the run script runs it): each step logged once with the
``gdpo/`` metrics, one record per step equal to the advantages verl trained on, every weight changed. On top of
that each test checks what is particular to its trainer, and that its weight sync reached the rollout server, before
the kill and after the resume (the rollout server of a resumed run starts on random weights until the trainer sends
the checkpoint's). They sync weights through gdpo-verl's CPU checkpoint engine (``cpu_tcp``), which logs what it
sent. Every run trains on the mixed-task batch of runs.py (MIXED_TASK: a component that applies to half the prompts,
GD2PO's snr masking, a weight on a schedule).

verl's V1 trainer, in each of its modes (sync, colocate_async, separate_async), and its legacy trainer have their runs
in test_cpu_training.py; colocate_async also in test_coding_run.py (the coding reward's run). The fully asynchronous
trainer's run is in test_fully_async_trainer.py, a file of its own so that pytest-xdist can give it to the other
worker (--dist loadfile).
"""

import pytest

from gdpo_verl.cpu_run.check_run import SENT
from tests.e2e.runs import TENSORS, kill_and_resume

pytestmark = pytest.mark.cpu_training

def test_one_step_off_policy_trains_through_its_own_entry_point_and_resumes(tmp_path):
    # verl.experimental.one_step_off_policy.main_ppo: rollouts of step k+1 are generated while step k trains. The
    # rollout server starts on random ("dummy") weights, and the trainer trains on the rollout's own log-probs, so
    # actor/ppo_kl of step 1 (taken before its one update) is near 0 only if the sync before step 1 reached it, and
    # that of step 2, the resumed run's first (on rollouts generated after the sync of the step-1 checkpoint's
    # weights), only if that sync did
    _, metrics, stdout = kill_and_resume(tmp_path, "one_step_off", 2)
    for step in (1, 2):
        assert abs(metrics[step]["actor/ppo_kl"]) < 1e-2
    assert [metrics[step][SENT] for step in (1, 2)] == [TENSORS, TENSORS]
    assert "verl's trainer logged no rollout/actor probs diff (it trains on the rollout's own log-probs)" in stdout
