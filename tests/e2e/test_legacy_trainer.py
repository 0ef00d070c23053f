"""GDPO through verl's legacy trainer (``trainer.use_v1=false``, RayPPOTrainer.fit), without TransferQueue: a fresh
run whose vLLM engine core is killed inside a step, which must stop by itself, naming it, with everything it started;
then the same run resumed from its checkpoint with no step lost or doubled. test_cpu_training.py resumes the V1
trainer the same way; this is a file of its own so that pytest-xdist can give it to another worker than that file's
(--dist loadfile gives a file to one worker)."""

import pytest

from tests.e2e.test_cpu_training import (MIXED_TASK, OTHER_VERL, check_mixed_task_steps, check_resumed, finish_run,
                                         run_killed_in_step, start_run)

pytestmark = pytest.mark.cpu_training


def test_a_run_whose_engine_core_dies_stops_and_resumes_from_its_checkpoint_with_no_step_lost_or_doubled(tmp_path):
    every_step = ["trainer.save_freq=1", "trainer.use_v1=False", *MIXED_TASK]
    # the legacy trainer's runs see no TransferQueue, as on verl's neo branch or an install without it: the legacy
    # trainer must stand on its own (tests/fixtures/other_verl/sitecustomize.py hides it from every process)
    env = {"PYTHONPATH": str(OTHER_VERL), "NO_TRANSFER_QUEUE": str(tmp_path / "no_transfer_queue.txt")}
    # 1-2. a fresh run of four steps whose vLLM engine core dies in step 3: it stops by itself, with everything it
    # started; 3. started again with the same settings: from the step-2 checkpoint, steps 3 and 4
    run_killed_in_step(tmp_path, 4, 3, *every_step, env=env, kill="engine")
    stdout = finish_run(start_run(tmp_path, 4, *every_step, resume=True, env=env), "the run resumed after the kill")
    check_resumed(tmp_path, 4, (3,), stdout)
    assert "transfer_queue" in (tmp_path / "no_transfer_queue.txt").read_text().split()  # looked for, not found
    check_mixed_task_steps(tmp_path, [1, 2, 3, 4])
