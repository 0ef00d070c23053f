"""GDPO config keys read from verl's algorithm config: defaults, and an error for each misconfiguration."""

import logging

import pytest
from omegaconf import OmegaConf

from gdpo_verl.verl_adapter.settings import check_config, settings_from_config


def algorithm(**keys):
    base = {"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False}
    return OmegaConf.create(base | keys)


def test_defaults():
    settings = settings_from_config(algorithm(gdpo_reward_keys=["correct", "length"]))
    assert settings.reward_keys == ("correct", "length")
    assert settings.weights == {"correct": 1.0, "length": 1.0}
    assert (settings.options.norm_by_std, settings.options.batch_norm, settings.options.eps) == (True, "token", 1e-6)


def test_weights_as_list_or_mapping_and_options():
    keys = ["correct", "length"]
    as_list = settings_from_config(algorithm(gdpo_reward_keys=keys, gdpo_reward_weights=[1.0, 0.25]))
    as_map = settings_from_config(
        algorithm(
            gdpo_reward_keys=keys,
            gdpo_reward_weights={"length": 0.25, "correct": 1},
            norm_adv_by_std_in_grpo=False,
            gdpo={"batch_norm": "sequence", "eps": 1e-4},
        )
    )
    assert as_list.weights == as_map.weights == {"correct": 1.0, "length": 0.25}
    assert (as_map.options.norm_by_std, as_map.options.batch_norm, as_map.options.eps) == (False, "sequence", 1e-4)


def test_verl_algo_config_dataclass_is_accepted():
    from verl.trainer.config import AlgoConfig

    settings = settings_from_config(
        AlgoConfig(adv_estimator="gdpo", gdpo_reward_keys=["a", "b"], gdpo_reward_weights=[2.0, 1.0])
    )
    assert settings.weights == {"a": 2.0, "b": 1.0}


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({}, r"gdpo_reward_keys is not set.*\+algorithm.gdpo_reward_keys=\[correct,length\]"),
        ({"gdpo_reward_keys": "correct"}, "must be a list, not the string 'correct'"),
        ({"gdpo_reward_keys": []}, "gdpo_reward_keys is empty"),
        ({"gdpo_reward_keys": ["a", ""]}, "non-empty strings"),
        ({"gdpo_reward_keys": ["a", "b", "a"]}, r"lists \['a'\] more than once"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": [1.0]}, r"has 1 value\(s\) \[1.0\] but"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": [1.0, 1.0, 1.0]}, "one weight per key"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": "1.0"}, "must be a list aligned"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": {"a": 1.0, "c": 1.0}}, r"unknown: \['c'\]"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": [1.0, float("inf")]}, "'b' must be a finite"),
        ({"gdpo_reward_keys": ["a"], "norm_adv_by_std_in_grpo": "yes"}, "must be true or false"),
        ({"gdpo_reward_keys": ["a"], "gdpo": {"batchnorm": "token"}}, r"unknown option\(s\) algorithm.gdpo.batchnorm \(did you mean 'batch_norm'\?\)"),
        ({"gdpo_reward_keys": ["a"], "gdpo": {"batch_norm": "group"}}, "algorithm.gdpo.batch_norm must be one of"),
        ({"gdpo_reward_keys": ["a"], "gdpo": {"eps": -1.0}}, "algorithm.gdpo.eps must be"),
        ({"gdpo_reward_keys": ["a"], "gdpo": "sequence"}, "algorithm.gdpo must be a mapping"),
        ({"gdpo_reward_keys": ["a"], "use_kl_in_reward": True}, "use_kl_in_reward=True is not supported.*use_kl_loss"),
        (
            {"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weight": [1.0, 0.25]},
            r"unknown GDPO key\(s\) algorithm.gdpo_reward_weight \(did you mean 'gdpo_reward_weights'\?\)",
        ),
        ({"gdpo_reward_key": ["a"]}, r"unknown GDPO key\(s\) algorithm.gdpo_reward_key \(did you mean 'gdpo_reward_keys'\?\)"),
        # a typo that does not start with "gdpo" is caught too
        (
            {"gdpo_reward_keys": ["a", "b"], "gpdo_reward_weights": [1.0, 0.25]},
            r"unknown GDPO key\(s\) algorithm.gpdo_reward_weights \(did you mean 'gdpo_reward_weights'\?\)",
        ),
        ({"gdpo_reward_keys": ["a"], "use_kl_in_reward": "false"}, "use_kl_in_reward must be true or false"),
    ],
)
def test_misconfiguration_is_rejected_with_the_fix(keys, message):
    with pytest.raises(ValueError, match=message):
        settings_from_config(algorithm(**keys))


def test_missing_config_is_rejected():
    with pytest.raises(ValueError, match="needs verl's algorithm config"):
        settings_from_config(None)


def whole_config(estimator, weights, reward_kwargs, path="pkg://gdpo_verl.rewards.math_length"):
    return OmegaConf.create({
        "algorithm": {"adv_estimator": estimator, "gdpo_reward_keys": ["correct", "length"], "gdpo_reward_weights": weights},
        "reward": {"custom_reward_function": {"path": path, "reward_kwargs": reward_kwargs}},
    })


@pytest.mark.parametrize("estimator", ["gdpo", "grpo"])  # under grpo the keys ask for the gdpo/ metrics only
def test_weights_in_gdpo_and_in_the_summed_score_must_agree_for_this_packages_rewards(estimator):
    with pytest.raises(ValueError, match=r"length: 0.5 in algorithm.gdpo_reward_weights, 1 in reward_kwargs.length_weight"):
        check_config(whole_config(estimator, [1.0, 0.5], {}))
    with pytest.raises(ValueError, match="correct: 1 in algorithm.gdpo_reward_weights, 2 in reward_kwargs.correct_weight"):
        check_config(whole_config(estimator, [1.0, 1.0], {"correct_weight": 2.0}))
    check_config(whole_config(estimator, [1.0, 0.5], {"length_weight": 0.5}))
    check_config(whole_config(estimator, None, {}))  # all 1 on both sides


def test_the_weight_check_leaves_other_reward_functions_alone(tmp_path):
    # a user's own reward: gdpo-verl cannot know how its score is weighted
    (tmp_path / "my_reward.py").write_text("def compute_score(**kwargs):\n    return {'score': 0.0}\n")
    check_config(whole_config("gdpo", [1.0, 0.5], {}, path=str(tmp_path / "my_reward.py")))
    with pytest.raises(ValueError, match="length_weight must be a finite number"):
        check_config(whole_config("gdpo", [1.0, 0.5], {"length_weight": "half"}))


def test_an_unusable_dump_dir_is_refused_before_ray_starts(tmp_path):
    (tmp_path / "a_file").write_text("")
    for dump_dir, message in [
        (tmp_path / "a_file", "is a file, not a directory"),
        (tmp_path / "a_file" / "records", "a_file is a file, not a directory"),
    ]:
        config = OmegaConf.create({"algorithm": algorithm(gdpo_reward_keys=["correct"], gdpo={"dump_dir": str(dump_dir)})})
        with pytest.raises(ValueError, match=message):
            check_config(config)
    config = OmegaConf.create({"algorithm": algorithm(gdpo_reward_keys=["correct"], gdpo={"dump_dir": str(tmp_path / "new" / "records")})})
    check_config(config)  # a directory still to be made is fine, and nothing is created before training
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("index", r"verl stores the dataset row's index \(extra_info.index\) under it"),
        ("uid", r"it is verl's group id of each prompt"),
        ("score", r"it is verl's summed reward"),
        ("acc", r"verl's reward managers store the summed reward under it when compute_score returns a plain number"),
        ("gdpo_signature", r"it is gdpo-verl's hash of the reward components"),
        ("data_source", r"it is a per-sample field that verl's dataset or rollout fills"),
        ("priority", r"verl stores each sample's sampling priority under it"),
        ("__num_turns__", r"it is a per-sample field"),
    ],
)
@pytest.mark.parametrize("estimator", ["gdpo", "grpo"])  # under grpo the keys ask for the gdpo/ metrics only
def test_names_that_are_no_reward_component_are_refused_at_start_up(key, what, estimator):
    # verl stores these per sample too (the index and priority as numbers): GDPO would train on them.
    config = OmegaConf.create({"algorithm": algorithm(adv_estimator=estimator, gdpo_reward_keys=["correct", key])})
    with pytest.raises(ValueError, match=rf"algorithm.gdpo_reward_keys lists '{key}', which is no reward component: "
                                         rf"{what}.*List the components that compute_score returns") as refused:
        check_config(config)
    assert ("rename it there" in str(refused.value)) == (key != "score")  # verl requires 'score' to be the sum


def test_a_negative_weight_is_allowed_and_said_once_at_start_up(caplog):
    config = OmegaConf.create({"algorithm": algorithm(gdpo_reward_keys=["correct", "length"],
                                                      gdpo_reward_weights=[1.0, -0.5])})
    with caplog.at_level(logging.WARNING, logger="gdpo_verl"):
        settings = check_config(config)
        settings_from_config(config.algorithm)  # what every step reads: no second line
    assert settings.weights == {"correct": 1.0, "length": -0.5}
    warnings = [record.getMessage() for record in caplog.records if record.name == "gdpo_verl"]
    assert len(warnings) == 1
    assert "algorithm.gdpo_reward_weights has a negative weight (length: -0.5)" in warnings[0]
    assert "make its weight positive" in warnings[0]

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gdpo_verl"):
        check_config(OmegaConf.create({"algorithm": algorithm(gdpo_reward_keys=["correct", "length"],
                                                              gdpo_reward_weights=[1.0, 0.5])}))
    assert not [record for record in caplog.records if record.name == "gdpo_verl"]
