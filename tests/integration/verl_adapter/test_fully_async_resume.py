"""verl's fully asynchronous trainer resumed from a checkpoint: its own ``FullyAsyncTrainer.load_checkpoint`` (on
the class Ray runs in the actor's process, where gdpo-verl wraps it), run on a checkpoint directory as verl writes
it. The trainer object is a stand-in for the Ray actor, which needs workers on GPUs or the CPU run
(tests/e2e/test_trainers.py resumes a real one): only the attributes load_checkpoint reads and the worker group's
load_checkpoint, which records the path it is given."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl.experimental.fully_async_policy import fully_async_trainer

from gdpo_verl.verl_adapter.touch_points import actor_class


def resume(tmp_path, version, trigger, estimator="gdpo", reward_keys=None):
    """A fresh trainer (global_steps 0, as verl's __init__ leaves it) loading the checkpoint of weight ``version``;
    the trainer and what its worker group was asked to load."""
    (tmp_path / f"global_step_{version}" / "actor").mkdir(parents=True)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text(str(version))
    loaded = []
    trainer = SimpleNamespace(
        config=OmegaConf.create({
            "trainer": {"resume_mode": "auto", "default_hdfs_dir": None, "default_local_dir": str(tmp_path),
                        "del_local_ckpt_after_load": False},
            "algorithm": {"adv_estimator": estimator, "gdpo_reward_keys": reward_keys},
        }),
        global_steps=0, current_param_version=0, last_ckpt_version=0, trigger_parameter_sync_step=trigger,
        use_critic=False,
        actor_rollout_wg=SimpleNamespace(load_checkpoint=lambda path, del_local_after_load: loaded.append(path)),
    )
    returned = asyncio.run(actor_class(fully_async_trainer.FullyAsyncTrainer).load_checkpoint(trainer))
    assert returned == trainer.current_param_version == version
    return trainer, loaded


@pytest.mark.parametrize("trigger", [1, 4])
def test_a_resumed_gdpo_run_numbers_its_next_step_as_the_one_after_the_checkpoints_steps(tmp_path, trigger):
    # weight version 2 was saved after 2 x trigger steps; fit() adds 1 before its first step, so that step is
    # 2 x trigger + 1 (verl 0.9.1 set 2 x trigger + 1 here, which numbered it 2 x trigger + 2)
    trainer, loaded = resume(tmp_path, 2, trigger)
    assert trainer.global_steps == 2 * trigger
    assert loaded == [str(tmp_path / "global_step_2" / "actor")]


def test_a_run_observing_gdpo_under_another_estimator_is_numbered_the_same(tmp_path):
    trainer, _ = resume(tmp_path, 3, 1, estimator="grpo", reward_keys=["correct", "length"])
    assert trainer.global_steps == 3


def test_another_estimators_run_keeps_verls_numbering(tmp_path):
    # gdpo-verl changes nothing of a run that is not GDPO's
    trainer, _ = resume(tmp_path, 3, 1, estimator="grpo")
    assert trainer.global_steps == 3 + 1
