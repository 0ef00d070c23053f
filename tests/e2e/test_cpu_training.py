"""Real GDPO training on the CPU, through verl's own main_ppo: the main job (two steps, beside a busy process per
core); and a run killed inside a step and resumed from its checkpoint, with no step lost or doubled, through verl's
legacy trainer (without TransferQueue, its vLLM engine core killed) and the V1 trainer's three modes (its driver
killed in separate_async), each resumed from the checkpoint the one before left (the resumed runs on a mixed-task
batch, with GD2PO's snr masking and a weight schedule). test_trainers.py resumes verl's experimental trainers.

Nothing of verl is mocked: its V1 trainer, Ray, TransferQueue, the FSDP2 actor, the vLLM rollout server (vLLM's
CPU build), the bucketed weight sync and the checkpoint all run for real, with this plugin's estimator,
reward manager and math rewards. What lets verl run on a CPU at all is
gdpo_verl/verl_adapter/for_cpu_run/cpu_platform.py (a verl platform for the CPU, added through verl's platform
registry) and the environment of scripts/setup_cpu_training_env.sh; docs/cpu-training.md lists every such piece.

Each start of a run costs about 150 to 180 CPU-seconds (its processes import torch, verl and vLLM;
docs/development.md, "Where the time goes"); a step, seconds. So runs are shared where the checks need the same
steps: the resume goes on from a copy of the main job's run (which checkpoints after each step) through the legacy
trainer and the V1 trainer's asynchronous modes. Four starts in all.
They need .venv-cpu-training (scripts/test.sh creates it); ``pytest -m "not cpu_training"`` leaves them out.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from gdpo_verl.cpu_run import check_run
from gdpo_verl.cpu_run.check_run import MAX_PROBS_DIFF, PROBS_DIFF, SENT, STALENESS
from gdpo_verl.cpu_run import supervise
from tests.e2e.runs import (MIXED_TASK, ROOT, STEPS, TENSORS, check_mixed_task_steps, check_resumed, finish_run,
                            latest_checkpoint, run_killed_in_step, start_run, stop_busy, stop_run)

# The main job's start-up made slow on purpose, where the run's supervisor once did not see it: with the test-only
# switch in tests/e2e/slow_actor_start (a sitecustomize first on PYTHONPATH), the Ray worker that becomes verl's
# TaskRunner computes for SLOW_START_S before it loads the class, still titled ray::IDLE, while the rest of the run
# waits for it. That alone is longer than the STALL_TIMEOUT the run gets and than the supervisor's 30 s window.
STALL_TIMEOUT_S = 20
SLOW_START_S = STALL_TIMEOUT_S + supervise.WORK_WINDOW_S + 10

pytestmark = pytest.mark.cpu_training


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The main job, run once for the tests below, beside as many busy processes as the machine has cores, in its
    own session, and with a start-up slower than its STALL_TIMEOUT: a run on a busy machine, or whose start-up is
    slow, may be slower, never stopped for it (test_the_run_finishes_beside_..., test_a_start_up_...)."""
    out = tmp_path_factory.mktemp("cpu_training")
    cores = len(os.sched_getaffinity(0))
    slow_start = {
        "SLOW_ACTOR_START": f"TaskRunnerV1:{SLOW_START_S:g}:{out / 'slow_start.json'}",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "slow_actor_start"),
                                       *filter(None, [os.environ.get("PYTHONPATH")])]),
        "STALL_TIMEOUT": str(STALL_TIMEOUT_S),
        # where torch's inductor would keep what it compiled, in any process of the run
        "TORCHINDUCTOR_CACHE_DIR": str(out / "torchinductor"),
    }
    process = None
    try:
        started = time.monotonic()
        # a checkpoint after each step, for the V1 resume test to go on from (the default job saves after its last)
        process = start_run(out, STEPS, "trainer.save_freq=1", busy=cores, env=slow_start)
        stdout, stderr = process.communicate(timeout=2400)
    finally:
        if process is not None:
            stop_run(process)
        stop_busy(out)
    minutes = (time.monotonic() - started) / 60
    log = out / "run.log"  # written by gdpo_verl/cpu_run/supervise.py
    assert process.returncode == 0, (
        f"the run failed beside {cores} busy processes (log: {log}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
    )
    print(f"CPU training run beside {cores} busy processes: {minutes:.1f} minutes")
    return out, stdout


def test_both_steps_train_with_gdpo_and_change_the_weights(run):
    out, stdout = run
    lines, problems, no_signal = check_run.check(out, STEPS)
    assert problems == [] and no_signal is None
    assert "GDPO CPU training run: OK (2 steps" in stdout
    assert lines[-1].startswith("weights: 21 of 21 tensors changed")


def test_the_readmes_sample_output_is_what_the_run_prints_numbers_aside(run):
    # README, "Try it": the lines it shows after the run, each printed by the main job (its numbers vary by run)
    _, stdout = run
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("there. It says what it is doing"):]
    block = block[block.index("```\n") + 4:]
    sample = block[:block.index("```")].strip().splitlines()
    def shape(text: str) -> str:  # numbers and the outputs' folder aside
        return re.sub(r"[-+]?\d+(?:\.\d+)?", "N", re.sub(r"outputs in \S+\)", "outputs in PATH)", text))

    printed = [shape(line) for line in stdout.splitlines()]
    for line in sample:
        assert any(shown.endswith(shape(line)) for shown in printed), (line, stdout[-2000:])


def test_each_step_scored_every_response_with_both_rewards(run):
    out, _ = run
    records = check_run.step_records(out)
    assert sorted(records) == [1, 2]
    for record in records.values():
        # 8 prompts x 4 responses; groups of 4 by uid; rewards from gdpo_verl.rewards.math_length
        assert len(record["uid"]) == 32 and len(set(record["uid"])) == 8
        assert set(record["rewards"]) == {"correct", "length"}
        assert all(value in (0.0, 1.0) for values in record["rewards"].values() for value in values)
        # the length reward is 1 exactly for responses of at most 8 tokens (max_length=8)
        assert record["rewards"]["length"] == [float(n <= 8) for n in record["response_length"]]


def test_nothing_in_the_run_compiles_with_torch_compile(run):
    # Before: verl's FSDP engine (its entropy function) and vLLM's CPU sampler were compiled by inductor, which ran the
    # machine's C++ compiler in the run's workers (scripts/cpu_main_ppo.sh sets TORCH_COMPILE_DISABLE)
    out, _ = run
    cache = out / "torchinductor"  # the folder may be made (vLLM sets inductor up on import); nothing is put in it
    assert not cache.exists() or [path for path in cache.rglob("*") if path.is_file()] == []


def test_the_trainer_logged_the_plugin_metrics_next_to_its_own(run):
    out, _ = run
    metrics = check_run.step_metrics(out)
    for step in (1, 2):
        data = metrics[step]
        assert data["training/global_step"] == step
        assert all(name in data for name in check_run.gdpo_metrics(("correct", "length")))
        # the plugin's per-reward means agree with verl's reward log of the same step
        assert data["gdpo/correct/mean"] + data["gdpo/length/mean"] == pytest.approx(data["critic/score/mean"])
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1


def test_a_run_killed_in_a_step_resumes_from_its_checkpoint_with_no_step_lost_or_doubled(run, tmp_path):
    # One run that goes on from the main job's checkpoint through verl's legacy trainer and the V1 trainer's two
    # asynchronous modes, each resuming from the checkpoint the one before left (a checkpoint is the same files
    # whichever trainer or mode wrote it), two of them killed inside a step: both trainers number the records by
    # their own global step, and no step may be lost or doubled.
    every_step = ["trainer.save_freq=1", *MIXED_TASK]
    # 1. two steps under sync, a checkpoint after each: the main job's run (the run fixture), copied
    shutil.copytree(run[0], tmp_path, dirs_exist_ok=True)
    assert latest_checkpoint(tmp_path) == 2
    # 2. the legacy trainer (RayPPOTrainer.fit), without TransferQueue, as on verl's neo branch or an install without
    # it: the legacy trainer must stand on its own (tests/fixtures/other_verl/sitecustomize.py hides it from every
    # process of the run). From the step-2 checkpoint: step 3 (it did not start again at step 1); its vLLM engine
    # core killed in step 4, and the run must stop by itself, naming it, with everything it started
    no_transfer_queue = tmp_path / "no_transfer_queue.txt"
    run_killed_in_step(tmp_path, 6, 4, *every_step, "trainer.use_v1=False", resume=True,
                       env={"NO_TRANSFER_QUEUE": str(no_transfer_queue)}, kill="engine")
    assert "transfer_queue" in no_transfer_queue.read_text().split()  # looked for, not found
    # On the V1 trainer (trainer.use_v1=True) the asynchronous modes' checkpoints also hold TransferQueue's state,
    # with the rollouts generated ahead, which the next run may train on first.
    v1 = [*every_step, "trainer.use_v1=True"]
    # 3. separate_async without a warm-up batch, from the step-3 checkpoint (the legacy trainer's, no rollouts in
    # it): step 4 on rollouts its own server generated after the trainer sent it the checkpoint's weights over TCP;
    # its driver killed in step 5
    run_killed_in_step(tmp_path, 6, 5, *v1, "trainer.v1.separate_async.num_warmup_batches=0", resume=True,
                       env={"TRAINER": "separate_async"})
    metrics = check_run.step_metrics(tmp_path)
    assert metrics[4][STALENESS] == 0 and metrics[4][PROBS_DIFF] < MAX_PROBS_DIFF  # the sync reached vLLM
    assert metrics[4][SENT] == TENSORS
    # 4. under colocate_async, from the step-4 checkpoint (with what separate_async's TransferQueue held): steps 5, 6
    stdout = finish_run(start_run(tmp_path, 6, *v1, resume=True, env={"TRAINER": "colocate_async"}),
                        "the run resumed after the kills")
    check_resumed(tmp_path, 6, (4, 5), stdout)
    # steps 1 and 2 are the main job's (the math reward alone, weights 1); on from step 3, the mixed-task batch
    check_mixed_task_steps(tmp_path, [3, 4, 5, 6])


def test_the_run_finishes_beside_as_many_busy_processes_as_the_machine_has_cores(run):
    # Before: with both cores of a 2-core machine kept busy, the run was stopped by its own checks while healthy
    # (the node check's probe had not answered in 120 s and was called "not installed", then "died"; a slow
    # step "made no progress for 300 s"). Slower is fine; stopped is not. The run fixture runs beside them.
    out, stdout = run
    assert "GDPO CPU training run: OK (2 steps" in stdout
    assert check_run.check(out, STEPS)[1] == []


def test_a_start_up_slower_than_the_stall_timeout_is_slow_not_stalled(run):
    # Before: the supervisor counted the CPU of the processes it knew as parts by their titles; the Ray worker that
    # becomes the TaskRunner is titled ray::IDLE while it loads the class (imports verl, torch and vLLM: minutes on
    # a busy machine), so with everything else waiting on it the run was "idle" and stopped after STALL_TIMEOUT.
    out, stdout = run
    slow = json.loads((out / "slow_start.json").read_text())
    assert slow["title"].startswith("ray::IDLE"), slow  # invisible to a count of parts by title
    assert slow["seconds"] >= STALL_TIMEOUT_S + supervise.WORK_WINDOW_S
    assert "GDPO CPU training run: OK (2 steps" in stdout
