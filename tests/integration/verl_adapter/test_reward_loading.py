"""verl loads this package's reward functions by package path, with their options from the config."""

import pytest
from omegaconf import OmegaConf

import verl  # noqa: F401  (loads the entry point)
from verl.trainer.ppo.reward import get_custom_reward_fn


def load(module, **reward_kwargs):
    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {
            "path": f"pkg://gdpo_verl.rewards.{module}", "name": "compute_score", "reward_kwargs": reward_kwargs,
        }}}
    )
    return get_custom_reward_fn(config)


def test_verl_loads_the_math_reward_by_package_path_with_reward_kwargs():
    fn = load("math_length", max_length=50, conditioned=True)
    result = fn(data_source="math", solution_str="</think> \\boxed{4}", ground_truth="4", extra_info={"response_length": 60})
    assert (result["correct"], result["length"]) == (1.0, 0.0)


def test_verl_loads_the_learning_study_reward():
    fn = load("learning_study", max_length=3)
    result = fn(data_source="s", solution_str="</think> \\boxed{4}", ground_truth="4", extra_info={"response_length": 3})
    assert result == {"score": 3.0, "correct": 1.0, "short": 1.0, "format": 1.0}
    with pytest.raises(ValueError, match="max_length"):
        load("learning_study", max_length=0)(data_source="s", solution_str="", ground_truth="4",
                                              extra_info={"response_length": 1})


def test_verl_loads_the_tool_calling_reward_with_its_options():
    truth = '<think> x </think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>'
    fn = load("tool_calling", correct_scale=1.0)
    result = fn(data_source="toolrl", solution_str="<think>y</think>", ground_truth=truth, extra_info={"response_length": 3})
    assert (result["format"], result["correct"]) == (0.0, -1.0)
