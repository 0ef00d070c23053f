"""The options beyond the paper through verl: its compute_advantage on a real DataProto (the legacy trainer's call),
the V1 stage's TransferQueue reader, the reward loop's stacking, hydra-style settings and their start-up refusals."""

import logging

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.core.advantage import gdpo_outcome_parts
from gdpo_verl.core.options import GdpoOptions
from gdpo_verl.core.options import COMPUTED, DEFAULTS, GDPO_ONLY
from gdpo_verl.verl_adapter.components import require_components
from gdpo_verl.verl_adapter.estimator import Step, gdpo_step, running
from gdpo_verl.verl_adapter.reward_manager import reward_signature, signature_components
from gdpo_verl.verl_adapter.settings import check_config, settings_from_config
from gdpo_verl.verl_adapter.transfer_queue import step_inputs_from_fields

CORRECT = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
CODE = [1.0, 0.0, 0.0, None, None, None, None, 0.5]  # applies to 4 of the 8 (prompt b: a math prompt)
LENGTHS = [3, 4, 2, 5, 4, 4, 1, 3]
UIDS = ["a", "a", "a", "b", "b", "b", "b", "a"]


def batch():
    mask = (torch.arange(5)[None] < torch.tensor(LENGTHS)[:, None]).long()
    code = np.empty(8, dtype=object)
    code[:] = CODE
    scores = torch.zeros(8, 5)
    non_tensors = {"uid": np.array(UIDS, dtype=object), "correct": np.array(CORRECT, dtype=object), "code": code}
    tensors = {"response_mask": mask, "token_level_scores": scores, "token_level_rewards": scores.clone()}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors), mask


def algorithm(**gdpo):
    return OmegaConf.create({"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
                             "gdpo_reward_keys": ["correct", "code"], "gdpo": gdpo})


@pytest.mark.parametrize("gdpo", [{}, {"conflict": "snr"}, {"baseline": "leave_one_out", "adaptive_weights": "saw"}],
                         ids=str)
def test_verl_compute_advantage_leaves_a_none_reward_out_of_its_group(gdpo):
    data, mask = batch()
    config = algorithm(**gdpo)
    with running(Step(settings_from_config(config), global_step=3)) as step:
        out = compute_advantage(data, adv_estimator="gdpo", norm_adv_by_std_in_grpo=True, config=config)
    expected = gdpo_outcome_parts({"correct": CORRECT, "code": CODE}, LENGTHS, UIDS, options=GdpoOptions(**gdpo)).final
    torch.testing.assert_close(out.batch["advantages"], (expected[:, None] * mask).float())
    assert step.metrics["gdpo/code/applies_frac"] == 0.5 and step.metrics["gdpo/correct/applies_frac"] == 1.0
    assert step.metrics["gdpo/code/mean"] == pytest.approx(1.5 / 4)


def test_a_component_that_applies_to_no_response_is_named_in_a_warning(caplog):
    data, _ = batch()
    data.non_tensor_batch["code"] = np.array([None] * 8, dtype=object)
    config = algorithm()
    with caplog.at_level(logging.WARNING, logger="gdpo_verl"):
        with running(Step(settings_from_config(config), global_step=7)):
            compute_advantage(data, adv_estimator="gdpo", norm_adv_by_std_in_grpo=True, config=config)
    assert any("'code' applies to none of the 8 responses of step 7" in record.getMessage()
               for record in caplog.records)


def test_a_scheduled_weight_is_read_at_the_trainers_step():
    data, _ = batch()
    config = algorithm()
    config.gdpo_reward_weights = {"correct": 1.0, "code": [[0, 0.0], [10, 2.0]]}
    settings = settings_from_config(config)
    for global_step, weight in ((0, 0.0), (5, 1.0), (40, 2.0)):
        with running(Step(settings, global_step=global_step)) as step:
            compute_advantage(data, adv_estimator="gdpo", norm_adv_by_std_in_grpo=True, config=config)
        assert step.metrics["gdpo/code/weight"] == weight and step.metrics["gdpo/correct/weight"] == 1.0
    with pytest.raises(ValueError, match="outside verl's trainer"):
        compute_advantage(data, adv_estimator="gdpo", norm_adv_by_std_in_grpo=True, config=config)


def test_the_v1_reader_takes_a_component_some_samples_left_out_as_not_applying():
    keys = [f"u{i}_0_0" for i in range(3)]
    infos = [{"reward_extra_info": {"correct": 1.0, "code": 0.5}}, {"reward_extra_info": {"correct": 0.0}},
             {"reward_extra_info": {"correct": 1.0, "code": None}}]
    inputs = step_inputs_from_fields(keys, {"extra_fields": infos}, ["correct", "code"])
    assert inputs.components["code"].tolist() == [0.5, None, None]
    mixed = [{"reward_extra_info": {"code": 1.0}}, {"reward_extra_info": {"token_level_scores_code": [1.0]}}]
    with pytest.raises(ValueError, match="per token .* in some samples and one value"):
        step_inputs_from_fields(keys[:2], {"extra_fields": mixed}, ["code"])


def test_a_reward_key_left_out_of_compute_scores_dict_stops_naming_what_it_returned():
    # a misspelled key trained on the other components alone before, with a warning per step
    info = {"score": 1.0, "correct": 1.0, "length": 0.0, "short": 1.0}
    with pytest.raises(ValueError, match=r"compute_score returned no 'corect', which algorithm.gdpo_reward_keys="
                                         r"\['corect', 'length'\] names; it returned \['correct', 'length', 'score', "
                                         r"'short'\]. Did you mean 'correct'\?"):
        require_components(dict(info), ["corect", "length"])
    with pytest.raises(ValueError, match="returned no 'code'.*None where the component does not apply"):
        require_components(dict(info), ["correct", "code"])
    # a plain number, which verl keeps as "acc"
    with pytest.raises(ValueError, match="returned no 'correct'.*return a dict instead"):
        require_components({"acc": 1.0}, ["correct"])


def test_verls_stacking_of_reward_extra_info_keeps_none_for_a_component_that_does_not_apply():
    infos = [require_components({"score": 1.0, "correct": 1.0, "code": None}, ["correct", "code"]),
             require_components({"score": 1.0, "correct": 0.0, "code": 1.0}, ["correct", "code"])]
    # what verl's RewardLoopManager.compute_rm_score and the agent loop do with the samples' dicts
    stacked = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    assert stacked["code"].tolist() == [None, 1.0]
    # the signature tells "does not apply" from every value
    assert len({reward_signature(signature_components(info, ["code"])) for info in
                ({"code": None}, {"code": 0.0}, {"code": 1.0})}) == 3
    with pytest.raises(ValueError, match="returned no 'code'"):
        signature_components({"correct": 1.0}, ["correct", "code"])


def test_batches_whose_first_response_returned_the_components_in_another_order_still_concatenate():
    # verl's agent loop names a batch's reward_extra_keys by its first sample's dict, and DataProto.concat refuses
    # batches whose names differ: verl's fully asynchronous trainer concatenates one batch per prompt group, the
    # legacy trainer's agent loop one per worker. The components go first, in the order of the reward keys.
    def group(*infos):
        infos = [require_components(dict(info), ["correct", "code"]) for info in infos]
        keys = list(infos[0])
        values = {key: np.array([info[key] for info in infos], dtype=object) for key in keys}
        return DataProto.from_dict(tensors={"rm_scores": torch.zeros(len(infos), 2)}, non_tensors=values,
                                   meta_info={"reward_extra_keys": keys})

    first = group({"score": 1.0, "correct": 1.0, "code": None}, {"score": 0.0, "correct": 0.0, "code": None})
    second = group({"code": 1.0, "score": 2.0, "correct": 1.0}, {"score": 1.0, "correct": 1.0, "code": None})
    batch = DataProto.concat([first, second])
    assert batch.meta_info["reward_extra_keys"] == ["correct", "code", "score"]
    assert batch.non_tensor_batch["code"].tolist() == [None, None, 1.0, None]


@pytest.mark.parametrize("gdpo, weights, filter_metric, message", [
    ({"conflict": "hard"}, None, None, None),
    ({"conflict": "maybe"}, None, None, r"algorithm.gdpo.conflict must be one of \('none', 'hard', 'snr'\)"),
    ({"conflict_threshold": 1.5}, None, None, "conflict_threshold must be at most 1"),
    ({"conflict_threshold": 0.5}, None, None, "is read by algorithm.gdpo.conflict=snr only, and conflict is none"),
    ({"conflict": "snr", "conflict_threshold": 0.5}, None, None, None),
    ({"baseline": "median"}, None, None, "baseline must be one of"),
    ({"adaptive_weights": "cv"}, None, None, "adaptive_weights must be one of"),
    ({}, {"correct": 1.0, "code": [[5, 1.0], [5, 2.0]]}, None, "steps of a schedule must increase"),
    ({}, {"correct": [[0, 0.0], [10, 1.0]], "code": [[0, 0.0], [20, 1.0]]}, None,
     "at step 0, where the schedules give: every weight is 0"),
    ({}, {"correct": [[0, 1.0], [10, -1.0]], "code": [[0, -1.0], [10, 1.0]]}, None, "at step 5"),
    ({"adaptive_weights": "saw"}, None, "score", "filter_groups.metric=score with algorithm.gdpo.adaptive_weights"),
    ({}, {"correct": 1.0, "code": [[0, 0.0], [10, 1.0]]}, "score", "filter_groups.metric=score with a scheduled"),
    ({}, {"correct": 1.0, "code": [[0, 0.0], [10, 1.0]]}, "gdpo_signature", None),
], ids=str)
def test_options_are_checked_before_ray_starts(gdpo, weights, filter_metric, message):
    config = OmegaConf.create({
        "algorithm": {**algorithm(**gdpo), "gdpo_reward_weights": weights,
                      "filter_groups": {"enable": filter_metric is not None, "metric": filter_metric}},
        "reward": {"reward_manager": {"name": "gdpo_verl", "source": "register"}},
        "trainer": {"use_v1": True},  # dynamic sampling: the V1 trainer's
    })
    if message is None:
        check_config(config)
    else:
        with pytest.raises(ValueError, match=message):
            check_config(config)


@pytest.mark.parametrize("option", ["conflict=snr", "adaptive_weights=saw"])
def test_an_option_between_components_is_refused_with_one_component(option):
    name, value = option.split("=")
    config = algorithm(**{name: value})
    config.gdpo_reward_keys = ["correct"]
    with pytest.raises(ValueError, match=f"algorithm.gdpo.{name}={value} works between reward components"):
        settings_from_config(config)


def test_the_legacy_trainers_own_component_statistics_are_taken_over_the_responses_a_component_applies_to():
    # verl's legacy fit logs gdpo/<key>/{mean,std,max,min} with np.mean over non_tensor_batch (NaN with a None);
    # the compute_timing_metrics wrapper, merged right after, gives them over the responses the component applies to
    from verl.trainer.ppo import ray_trainer

    from gdpo_verl.verl_adapter.trainer_hooks import REWARD_KEYS_KEY

    data, mask = batch()
    data.batch["responses"] = torch.zeros_like(mask)
    data.batch["attention_mask"] = torch.cat([torch.ones(8, 3, dtype=mask.dtype), mask], dim=1)
    data.meta_info[REWARD_KEYS_KEY] = ["correct", "code"]
    metrics = ray_trainer.compute_timing_metrics(batch=data, timing_raw={})
    assert metrics["gdpo/code/mean"] == pytest.approx(1.5 / 4) and metrics["gdpo/code/max"] == 1.0
    assert metrics["gdpo/code/min"] == 0.0 and "gdpo/correct/mean" not in metrics  # verl's own stands there


def test_a_per_token_component_that_is_none_for_a_response_does_not_apply_to_it():
    from gdpo_verl.verl_adapter.estimator import gather_rewards

    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    per_response = {"token_level_scores_fmt": np.array([[0.5, 0.5], None, [1.0], [0.0, 0.0, 0.25]], dtype=object)}
    rewards, applies = gather_rewards(["fmt"], mask, per_response, {})
    assert applies["fmt"].tolist() == [True, False, True, True]
    assert rewards["fmt"].sum(dim=1).tolist() == [1.0, 0.0, 1.0, 0.25]


def test_a_per_token_component_with_a_gap_is_refused_naming_the_fix():
    keys = ["u0_0_0", "u1_0_0"]
    for second in ({"code": None}, {}, {"token_level_scores_code": None}):
        infos = [{"reward_extra_info": {"token_level_scores_code": [1.0]}}, {"reward_extra_info": second}]
        with pytest.raises(ValueError, match="'code' is per token .* does not apply to some responses .* return "
                                             "one value per response"):
            step_inputs_from_fields(keys, {"extra_fields": infos}, ["code"])
    # in the reward worker, response by response: a None per-token list at once; a gap after a per-token one
    with pytest.raises(ValueError, match="is per token"):
        require_components({"token_level_scores_code": None}, ["code"])
    forms = {}
    require_components({"token_level_scores_code": [1.0]}, ["code"], forms)
    with pytest.raises(ValueError, match="is per token"):
        require_components({"score": 1.0, "code": None}, ["code"], forms)
    require_components({"code": None}, ["code"], {})  # one value per response: a gap is allowed


def test_a_step_where_no_component_applies_to_any_response_stops_naming_the_keys():
    data, _ = batch()
    data.non_tensor_batch["code"] = np.array([None] * 8, dtype=object)
    data.non_tensor_batch["correct"] = np.array([None] * 8, dtype=object)
    config = algorithm()
    with running(Step(settings_from_config(config), global_step=2)):
        with pytest.raises(ValueError, match=r"none of the GDPO reward components \['correct', 'code'\] applies"):
            compute_advantage(data, adv_estimator="gdpo", norm_adv_by_std_in_grpo=True, config=config)


def test_the_packaged_config_with_its_defaults_passes_the_option_checks():
    from importlib.resources import files

    declared = OmegaConf.load(files("gdpo_verl.config") / "gdpo" / "settings.yaml").algorithm
    declared.gdpo_reward_keys = ["correct", "length"]
    settings = settings_from_config(declared)  # every option given, at its default
    assert (settings.options.conflict, settings.options.baseline) == ("none", "mean")


@pytest.mark.parametrize("estimator", ["gdpo", "corrgrpo"])
def test_every_option_the_config_sets_reaches_the_computation(estimator):
    # each computed option (gdpo_verl/core/options.py) away from its default; CorrGRPO takes those not GDPO's own
    chosen = {"conditions": [{"reward": "code", "given": "correct", "at_least": 1}], "eps": 1e-3}
    if estimator == "gdpo":
        chosen |= {"batch_norm": "sequence", "baseline": "leave_one_out", "conflict": "snr",
                   "conflict_threshold": 0.3, "adaptive_weights": "saw"}
    config = algorithm(**chosen)
    config.adv_estimator, config.norm_adv_by_std_in_grpo = estimator, False
    settings = settings_from_config(config)
    assert all(getattr(settings.options, name) != DEFAULTS[name] for name in COMPUTED
               if estimator == "gdpo" or name not in GDPO_ONLY)
    data, mask = batch()
    _, parts, _ = gdpo_step(settings, mask, data.non_tensor_batch["uid"], data.non_tensor_batch, {}, None, 3)
    for name in COMPUTED:
        if estimator == "gdpo" or name not in GDPO_ONLY:
            assert getattr(parts.options, name) == getattr(settings.options, name), name
