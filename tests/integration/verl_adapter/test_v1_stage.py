"""verl's real V1 advantage stage (PPOTrainer._compute_advantage) with real Ray and TransferQueue.

Samples are written to TransferQueue the way verl's agent loop writes them (AgentLoopWorkerTQ.
_agent_loop_postprocess: keys {uid}_{session_id}_{output_index}, reward components in
extra_fields["reward_extra_info"]). The trainer object is created without its __init__, which would
allocate GPUs for workers: _compute_advantage reads only ``self.config``.
"""

import uuid

import numpy as np
import pytest
import torch

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.core.advantage import gdpo_parts
from gdpo_verl.core.diagnostics import advantage_metrics
from gdpo_verl.records.steps import load_steps, step_report
from tests.integration.verl_adapter.v1_samples import KEYS, put_samples, random_samples, read_advantages, trainer
from tests.reference import reference_gdpo

def test_v1_stage_under_grpo_logs_what_gdpo_would_do_and_leaves_grpo_alone(transfer_queue):
    samples = random_samples(seed=7)
    plain, observed = put_samples(samples), put_samples(samples)
    metrics_plain, metrics = {}, {}
    trainer("algorithm.adv_estimator=grpo", "algorithm.gdpo_reward_keys=null")._compute_advantage(plain, metrics_plain)
    trainer("algorithm.adv_estimator=grpo")._compute_advantage(observed, metrics)
    torch.testing.assert_close(read_advantages(observed)[0], read_advantages(plain)[0], rtol=0, atol=0)
    assert not any(key.startswith("gdpo/") for key in metrics_plain)

    _, mask = read_advantages(observed)
    rewards = {key: torch.tensor([info[key] for *_, info in samples]) for key in KEYS}
    expected = advantage_metrics(gdpo_parts(rewards, mask, [uid for uid, *_ in samples], None))
    assert {key: value for key, value in metrics.items() if key.startswith("gdpo/")} == pytest.approx(expected)
    assert expected["gdpo/grpo_collapsed_group_frac"] >= expected["gdpo/collapsed_group_frac"]


def reference_for(samples, mask):
    rewards = {key: [info[key] for *_, info in samples] for key in KEYS}
    index = [uid for uid, *_ in samples]
    return torch.tensor(reference_gdpo(rewards, mask.tolist(), index), dtype=torch.float32)


def test_v1_stage_computes_gdpo_from_transfer_queue_and_matches_the_legacy_path(transfer_queue):
    samples = random_samples(seed=1)
    order = np.random.default_rng(2).permutation(len(samples))
    samples = [samples[i] for i in order]  # the replay buffer hands samples over in any order
    batch = put_samples(samples)
    metrics = {}
    trainer()._compute_advantage(batch, metrics)
    advantages, mask = read_advantages(batch)

    expected = reference_for(samples, mask)
    torch.testing.assert_close(advantages, expected, rtol=1e-5, atol=1e-5)

    # The same batch through the legacy trainer's path: components in non_tensor_batch.
    legacy = DataProto.from_dict(
        tensors={"response_mask": mask, "token_level_rewards": torch.zeros(mask.shape)},
        non_tensors={
            "uid": np.array([uid for uid, *_ in samples], dtype=object),
            **{key: np.array([info[key] for *_, info in samples]) for key in KEYS},
        },
    )
    config = trainer().config.algorithm
    legacy = compute_advantage(legacy, adv_estimator="gdpo", config=config)
    torch.testing.assert_close(advantages, legacy.batch["advantages"], rtol=0, atol=0)
    assert "gdpo/correct/mean" in metrics


def test_padding_samples_added_by_verl_do_not_change_real_advantages(transfer_queue):
    samples = random_samples(seed=3, groups=3, group_size=3)
    batch = put_samples(samples)
    padded = upsample_batch_to_divisible_size(batch, 8, eos_token_id=0)
    assert len(padded) == 16
    metrics = {}
    trainer()._compute_advantage(padded, metrics)
    advantages, mask = read_advantages(padded)
    torch.testing.assert_close(advantages[:9, : mask[:9].shape[1]], reference_for(samples, mask[:9]), rtol=1e-5, atol=1e-5)
    assert advantages[9:].abs().sum() == 0
    # metrics count the 3 real groups only
    assert metrics["gdpo/distinct_adv_per_group"] <= 3


def test_multi_output_sessions_use_the_last_output_and_share_its_advantage(transfer_queue):
    base = random_samples(seed=4, groups=3, group_size=4)
    samples = []
    for uid, session, _, length, info in base:
        # Two earlier outputs per session carry the final output's components, as the agent loop copies them.
        for output in range(3):
            samples.append((uid, session, output, length + output, info))
    batch = put_samples(samples)
    trainer()._compute_advantage(batch, {})
    advantages, mask = read_advantages(batch)

    finals = [i for i, sample in enumerate(samples) if sample[2] == 2]
    expected_final = reference_for([samples[i] for i in finals], mask[finals])
    torch.testing.assert_close(advantages[finals], expected_final, rtol=1e-5, atol=1e-5)
    per_session = advantages[finals].sum(1) / mask[finals].sum(1)
    for row, sample in enumerate(samples):
        session_final = finals.index(row - sample[2] + 2)
        valid = advantages[row][mask[row].bool()]
        torch.testing.assert_close(valid, per_session[session_final].expand_as(valid), rtol=1e-6, atol=1e-6)


def test_components_written_as_top_level_fields_by_a_colocated_reward_model(transfer_queue):
    samples = random_samples(seed=5)
    batch = put_samples(samples, top_level=True)
    trainer()._compute_advantage(batch, {})
    advantages, mask = read_advantages(batch)
    torch.testing.assert_close(advantages, reference_for(samples, mask), rtol=1e-5, atol=1e-5)


def test_token_level_component_lists_in_reward_extra_info(transfer_queue):
    samples = random_samples(seed=6)
    token_samples = []
    for uid, session, output, length, info in samples:
        # length's per-token scores: its value spread over the response's tokens
        per_token = [0.0] * length
        per_token[0] = info["length"]
        token_samples.append((uid, session, output, length, {**info, "token_level_scores_length": per_token}))
    batch = put_samples(token_samples)
    trainer()._compute_advantage(batch, {})
    advantages, mask = read_advantages(batch)
    torch.testing.assert_close(advantages, reference_for(samples, mask), rtol=1e-5, atol=1e-5)


def test_metrics_logged_by_the_v1_stage_match_the_diagnostics_of_the_same_batch(transfer_queue):
    uid_a, uid_b = uuid.uuid4().hex, uuid.uuid4().hex
    # group a: correct varies, length constant. group b: constant sum (cancels under equal weights).
    samples = [
        (uid_a, 0, 0, 3, {"correct": 1.0, "length": 1.0}),
        (uid_a, 1, 0, 4, {"correct": 0.0, "length": 1.0}),
        (uid_b, 0, 0, 2, {"correct": 1.0, "length": 0.0}),
        (uid_b, 1, 0, 5, {"correct": 0.0, "length": 1.0}),
    ]
    batch = put_samples(samples)
    metrics = {}
    trainer()._compute_advantage(batch, metrics)
    assert metrics["gdpo/correct/mean"] == pytest.approx(0.5)
    assert metrics["gdpo/length/mean"] == pytest.approx(0.75)
    assert metrics["gdpo/correct/zero_var_group_frac"] == 0.0
    assert metrics["gdpo/length/zero_var_group_frac"] == 0.5
    assert metrics["gdpo/cancelled_group_frac"] == 0.5
    assert metrics["gdpo/distinct_adv_per_group"] == 1.5  # a: 2 values, b: 1 (cancelled)
    assert metrics["gdpo/grpo_distinct_adv_per_group"] == 1.5  # a: sums 2,1; b: sums 1,1
    _, mask = read_advantages(batch)
    parts = gdpo_parts(
        {key: torch.tensor([info[key] for *_, info in samples]) for key in KEYS}, mask, [s[0] for s in samples]
    )
    assert metrics == pytest.approx(advantage_metrics(parts))


def test_a_component_missing_from_some_samples_does_not_apply_to_them(transfer_queue):
    samples = random_samples(seed=7, groups=2, group_size=2)
    uid, session, output, length, info = samples[-1]
    samples[-1] = (uid, session, output, length, {"correct": 1.0})
    batch = put_samples(samples)
    metrics = {}
    trainer()._compute_advantage(batch, metrics)
    assert metrics["gdpo/length/applies_frac"] == 0.75 and metrics["gdpo/correct/applies_frac"] == 1.0


def test_unknown_reward_key_lists_what_the_samples_carry(transfer_queue):
    batch = put_samples(random_samples(seed=8, groups=2, group_size=2))
    with pytest.raises(ValueError, match=r"returned no 'lenght', .* holding the per-response keys \['acc', 'correct', 'length'"):
        trainer("algorithm.gdpo_reward_keys=[correct,lenght]")._compute_advantage(batch, {})


def test_other_estimators_without_gdpo_keys_run_verls_stage_unchanged(transfer_queue):
    samples = random_samples(seed=9)
    batch = put_samples(samples)
    metrics = {}
    trainer("algorithm.adv_estimator=grpo", "algorithm.gdpo_reward_keys=null")._compute_advantage(batch, metrics)
    advantages, _ = read_advantages(batch)
    assert advantages.abs().sum() > 0
    assert not any(key.startswith("gdpo/") for key in metrics)


def test_dump_dir_records_the_v1_step_with_its_global_step(transfer_queue, tmp_path):
    base = random_samples(seed=10, groups=2, group_size=3)
    samples = [(uid, session, output, length + output, info) for uid, session, _, length, info in base for output in range(2)]
    batch = put_samples(samples)
    stage = trainer(f"algorithm.gdpo.dump_dir={tmp_path}")
    stage.global_steps = 7
    trainer_metrics = {}
    stage._compute_advantage(batch, trainer_metrics)
    (record,) = load_steps(tmp_path)
    assert record.step == 7
    # One row per session: its last output, which is what the group statistics used.
    finals = [sample for sample in samples if sample[2] == 1]
    assert record.uid == [uid for uid, *_ in finals]
    assert record.rewards["correct"] == [info["correct"] for *_, info in finals]
    assert record.response_length == [length for _, _, _, length, _ in finals]
    assert step_report(record)["metrics"] == pytest.approx(
        {key: value for key, value in trainer_metrics.items() if key.startswith("gdpo/")}
    )
