"""GDPO through verl's fully asynchronous trainer (``verl.experimental.fully_async_policy``), killed inside its
second step and resumed: test_trainers.py says what these runs check. A file of its own so that pytest-xdist can run
it beside test_trainers.py's run (--dist loadfile gives a file to one worker)."""

import math

import pytest

from tests.e2e.runs import kill_and_resume

pytestmark = pytest.mark.cpu_training


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
    assert ("resumed from the checkpoint of weight version 1 (1 step(s) trained, 1 per version), set its global step "
            "to 2, which would number the next step 3 and skip step 2; set to 1, so the next step is 2.") in (
        tmp_path / "run.log").read_text()
