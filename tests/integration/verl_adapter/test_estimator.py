"""The registered "gdpo" estimator called by verl's own compute_advantage on a real DataProto."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl import gdpo_advantage
from gdpo_verl.verl_adapter import compute_gdpo_advantage
from tests.integration.verl_adapter.legacy_batch import rollout_batch


def algorithm(**keys):
    base = {"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
            "gdpo_reward_keys": ["correct", "length"]}
    return OmegaConf.create(base | keys)


def run(data, config):
    return compute_advantage(
        data, adv_estimator=config.adv_estimator, norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo, config=config
    )


def test_registry_holds_our_estimator():
    assert core_algos.get_adv_estimator_fn("gdpo") is compute_gdpo_advantage


@pytest.mark.parametrize("object_arrays", [True, False])
@pytest.mark.parametrize(
    "keys",
    [
        {},
        {"gdpo_reward_weights": [1.0, 0.25]},
        {"norm_adv_by_std_in_grpo": False},
        {"gdpo": {"batch_norm": "sequence", "eps": 1e-4}},
        {"gdpo": {"batch_norm": "none"}},
    ],
)
def test_compute_advantage_returns_gdpo_advantage(keys, object_arrays):
    data, components = rollout_batch(object_arrays=object_arrays)
    config = algorithm(**keys)
    out = run(data, config)

    options = dict(config.get("gdpo", {}))
    weights = dict(zip(config.gdpo_reward_keys, config.get("gdpo_reward_weights", [1.0, 1.0])))
    expected = gdpo_advantage(
        components,
        data.batch["response_mask"],
        data.non_tensor_batch["uid"],
        weights,
        norm_by_std=config.norm_adv_by_std_in_grpo,
        **options,
    )
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=0, atol=0)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])


def test_agrees_with_verl_builtin_where_the_builtin_is_exact():
    # Binary rewards and groups of at least two: the built-in's known flaws do not show here.
    data, _ = rollout_batch(seed=3)
    config = algorithm(gdpo_reward_weights=[1.0, 0.5])
    ours = run(data, config).batch["advantages"].clone()
    builtin, _ = core_algos.compute_gdpo_outcome_advantage(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        config=config,
        non_tensor_batch=data.non_tensor_batch,
        batch=data.batch,
    )
    torch.testing.assert_close(ours, builtin, rtol=1e-5, atol=1e-5)


def test_token_level_scores_per_reward_take_precedence():
    data, components = rollout_batch()
    mask = data.batch["response_mask"]
    process = torch.rand(mask.shape, generator=torch.Generator().manual_seed(1))
    data.batch["token_level_scores_length"] = process
    out = run(data, algorithm()).batch["advantages"]
    expected = gdpo_advantage({"correct": components["correct"], "length": process}, mask, data.non_tensor_batch["uid"])
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_uses_response_mask_only():
    data, _ = rollout_batch()
    expected = run(data, algorithm()).batch["advantages"].clone()
    data.batch.pop("prompts")
    data.batch.pop("attention_mask")
    torch.testing.assert_close(run(data, algorithm()).batch["advantages"], expected, rtol=0, atol=0)


def test_missing_reward_key_lists_what_is_available():
    data, _ = rollout_batch()
    with pytest.raises(ValueError, match=r"returned no 'lenght', .* names; the batch reached the advantage step holding the per-response "
                                         r"keys \['correct', 'length', 'uid'\]. Did you mean 'length'\?"):
        run(data, algorithm(gdpo_reward_keys=["correct", "lenght"]))


def test_batch_without_any_component_points_at_the_plugin_hook():
    # What verl 0.9.1's V1 advantage stage hands over when gdpo-verl's hook is not active: uid and tensors only.
    data, _ = rollout_batch()
    for name in ("correct", "length"):
        data.non_tensor_batch.pop(name)
    with pytest.raises(ValueError, match=r"no reward component reached the advantage stage at all.*VERL_USE_EXTERNAL_PLUGINS"):
        run(data, algorithm())


@pytest.mark.parametrize(("value", "kind"), [("0.5", "str"), ((1, 2), "tuple")])
def test_non_numeric_component_is_rejected(value, kind):
    # (None is no number either, but says the component does not apply: tests/integration/verl_adapter/test_variants.py)
    data, _ = rollout_batch()
    data.non_tensor_batch["length"][5] = value
    with pytest.raises(ValueError, match=rf"'length' must hold one number per response \(or None where it does not "
                                         rf"apply\); got values of type \['{kind}'\]"):
        run(data, algorithm())


def test_nan_component_names_the_reward():
    data, _ = rollout_batch()
    data.non_tensor_batch["correct"][3] = float("nan")
    with pytest.raises(ValueError, match=r"'correct': 1 of 24 responses"):
        run(data, algorithm())


def test_missing_uid_is_rejected():
    data, _ = rollout_batch()
    data.non_tensor_batch.pop("uid")
    with pytest.raises(ValueError, match=r"non_tensor_batch\['uid'\]"):
        run(data, algorithm())


def test_config_error_reaches_compute_advantage():
    data, _ = rollout_batch()
    with pytest.raises(ValueError, match="must be a list, not the string"):
        run(data, algorithm(gdpo_reward_keys="correct"))


def test_legacy_trainer_metrics_carry_the_gdpo_metrics_of_the_step():
    # The legacy fit loop logs ray_trainer.compute_data_metrics(batch) right after compute_advantage.
    from verl.trainer.ppo import ray_trainer

    data, components = rollout_batch(seed=3)
    data = run(data, algorithm())
    metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
    assert metrics["gdpo/correct/mean"] == pytest.approx(components["correct"].mean().item())
    assert metrics["gdpo/length/mean"] == pytest.approx(components["length"].mean().item())
    for name in ("correct/zero_var_group_frac", "length/adv_contribution_std", "cancelled_group_frac",
                 "distinct_adv_per_group", "grpo_distinct_adv_per_group"):
        assert f"gdpo/{name}" in metrics
    assert "critic/score/mean" in metrics  # verl's own metrics are still there
    # Logged once: the next step's metrics do not repeat them.
    assert not any(key.startswith("gdpo/") for key in ray_trainer.compute_data_metrics(batch=data, use_critic=False))


def test_under_another_estimator_the_legacy_metrics_show_what_gdpo_would_do():
    from verl.trainer.ppo import ray_trainer

    data, _ = rollout_batch(seed=5)
    gdpo_metrics = ray_trainer.compute_data_metrics(batch=run(data, algorithm()), use_critic=False)
    plain = run(rollout_batch(seed=5)[0], algorithm(adv_estimator="grpo", gdpo_reward_keys=None))
    assert not any(key.startswith("gdpo/") for key in ray_trainer.compute_data_metrics(batch=plain, use_critic=False))

    observed = run(rollout_batch(seed=5)[0], algorithm(adv_estimator="grpo"))
    # GRPO trained as without the keys; the gdpo/ metrics are GDPO's on the same batch
    torch.testing.assert_close(observed.batch["advantages"], plain.batch["advantages"], rtol=0, atol=0)
    metrics = ray_trainer.compute_data_metrics(batch=observed, use_critic=False)
    assert {key: value for key, value in metrics.items() if key.startswith("gdpo/")} == pytest.approx(
        {key: value for key, value in gdpo_metrics.items() if key.startswith("gdpo/")}
    )


def per_token(values, lengths, width):
    """Each response's value at its first token, zeros elsewhere, as lists of ``width`` (or the length)."""
    rows = []
    for value, length in zip(values.tolist(), lengths, strict=True):
        row = [0.0] * (width or length)
        row[0] = value
        rows.append(row)
    return rows


@pytest.mark.parametrize("padded", [True, False], ids=["stacked-2d-array", "ragged-object-array"])
def test_legacy_per_token_component_lists_in_non_tensor_batch(padded):
    data, components = rollout_batch(seed=4)
    expected = run(data, algorithm()).batch["advantages"]
    lengths = data.batch["response_mask"].sum(-1).tolist()
    data, _ = rollout_batch(seed=4)
    rows = per_token(components["length"], lengths, data.batch["response_mask"].shape[1] if padded else None)
    data.non_tensor_batch.pop("length")
    if padded:  # what verl's legacy trainer makes of equal-length lists (the gdpo_verl manager pads them)
        data.non_tensor_batch["token_level_scores_length"] = np.array(rows)
    else:
        ragged = np.empty(len(rows), dtype=object)
        ragged[:] = rows
        data.non_tensor_batch["token_level_scores_length"] = ragged
    torch.testing.assert_close(run(data, algorithm()).batch["advantages"], expected, rtol=0, atol=0)


def test_a_per_token_list_shorter_than_its_response_is_refused():
    data, components = rollout_batch(seed=5)
    lengths = data.batch["response_mask"].sum(-1).tolist()
    rows = per_token(components["length"], lengths, None)
    rows[2] = rows[2][:-1] if lengths[2] > 1 else []
    ragged = np.empty(len(rows), dtype=object)
    ragged[:] = rows
    data.non_tensor_batch["token_level_scores_length"] = ragged
    with pytest.raises(ValueError, match=rf"'token_level_scores_length' of response 2 must be a list of at least {lengths[2]} numbers"):
        run(data, algorithm())


def test_conditions_keep_a_reward_only_where_another_reaches_the_threshold():
    from verl.trainer.ppo import ray_trainer

    data, components = rollout_batch(seed=6)
    conditioned = algorithm(gdpo={"conditions": [{"reward": "length", "given": "correct", "at_least": 1}]})
    data = run(data, conditioned)
    result = data.batch["advantages"]
    metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)

    gated, _ = rollout_batch(seed=6)
    gated.non_tensor_batch["length"] = (components["length"] * components["correct"]).numpy()
    torch.testing.assert_close(result, run(gated, algorithm()).batch["advantages"], rtol=0, atol=0)
    assert metrics["gdpo/length/raw_mean"] == pytest.approx(components["length"].mean().item())
    assert metrics["gdpo/length/mean"] == pytest.approx((components["length"] * components["correct"]).mean().item())


def test_records_outside_a_trainer_are_refused_with_the_reason(tmp_path):
    data, _ = rollout_batch(seed=8)
    with pytest.raises(ValueError, match="numbers its records by the trainer's global step"):
        run(data, algorithm(gdpo={"dump_dir": str(tmp_path)}))


def test_a_component_near_the_float64_limit_trains_and_logs():
    # 0 and 1e303 (was: OverflowError in the gdpo/ metrics' distinct counts, which stopped the step)
    from verl.trainer.ppo import ray_trainer

    data, components = rollout_batch(seed=2)
    data.non_tensor_batch["correct"] = data.non_tensor_batch["correct"] * 1e303
    out = run(data, algorithm())
    expected = gdpo_advantage({"correct": components["correct"] * 1e303, "length": components["length"]},
                              data.batch["response_mask"], data.non_tensor_batch["uid"])
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=0, atol=0)
    metrics = ray_trainer.compute_data_metrics(batch=out, use_critic=False)
    assert metrics["gdpo/correct/mean"] == pytest.approx(components["correct"].mean().item() * 1e303)
    assert 1 <= metrics["gdpo/grpo_distinct_adv_per_group"] <= metrics["gdpo/distinct_adv_per_group"] <= 4


@pytest.mark.parametrize(
    ("uids", "message"),
    [
        ([True] * 4 + [1] * 4, r"group id \(uid\) True at response 0 is a bool: True equals 1"),
        ([float("nan")] * 4 + [2.0] * 4, r"group id \(uid\) nan at 4 response\(s\)"),
        ([3] * 4 + [float("nan")] * 4, r"group id \(uid\) nan at response 4"),
    ],
)
def test_uids_that_would_merge_groups_are_refused(uids, message):
    # True == 1: numpy's grouping (and verl's own, a dict) would make one group of the two prompts.
    data, _ = rollout_batch(groups=2)
    data.non_tensor_batch["uid"] = np.array(uids, dtype=object if isinstance(uids[0], (bool, int)) else float)
    with pytest.raises(ValueError, match=message + r".*uid of its prompt"):
        run(data, algorithm())


def test_the_dataset_row_index_is_no_reward_component():
    # verl's dataset stores extra_info.index per sample as "index", a number: it was trained on as a reward.
    data, _ = rollout_batch()
    data.non_tensor_batch["index"] = np.arange(len(data), dtype=np.int64)
    with pytest.raises(ValueError, match=r"lists 'index', which is no reward component: verl stores the dataset row's"):
        run(data, algorithm(gdpo_reward_keys=["correct", "index"]))
