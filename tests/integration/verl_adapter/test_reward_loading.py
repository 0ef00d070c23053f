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


def score_a_program_once(manager):
    """The manager's coding reward on a program that passes one of its two test cases; the reward closed after."""
    try:
        return manager.compute_score(
            data_source="apps", solution_str="</think>```python\nprint(int(input()) + 1)\n```",
            ground_truth='{"inputs": ["1", "2"], "outputs": ["2", "4"]}', extra_info={"response_length": 9})
    finally:
        manager.compute_score.args[0].close()


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


def test_each_reward_manager_owns_the_math_reward_it_calls():
    # The math reward keeps state (its checker processes, its count of answers not checked): each manager gets an
    # instance of its own, made by the manager from the function verl loaded, with verl's reward_kwargs kept.
    from gdpo_verl.rewards.math_length import MathLengthReward, compute_score
    from gdpo_verl.verl_adapter.reward_manager import GdpoRewardManager

    loaded = load("math_length", max_length=50, timeout_s=0.001)
    config = OmegaConf.create({"algorithm": {}, "reward": {}})
    first, second = (GdpoRewardManager(config, None, loaded).compute_score for _ in range(2))
    rewards = [first.args[0], second.args[0]]
    assert all(isinstance(reward, MathLengthReward) for reward in rewards) and rewards[0] is not rewards[1]
    assert loaded.args[0] is compute_score  # verl's own wrapping is left as it was
    try:
        # 5000! takes longer than 1 ms to check: counted by the manager's reward that scored it, not the other
        result = first(data_source="math", solution_str="</think> \\boxed{5000!}", ground_truth="1",
                       extra_info={"response_length": 60})
        assert (result["verify_failed"], result["length"]) == (1.0, 0.0)
        assert [reward.failures for reward in rewards] == [1, 0]
    finally:
        for reward in rewards:
            reward.close()
    plain = load("learning_study", max_length=3)
    assert GdpoRewardManager(config, None, plain).compute_score is plain  # no state kept: called as verl loaded it


def test_the_coding_reward_runs_through_verl_and_each_manager_checks_its_sandbox_when_it_starts():
    from gdpo_verl.rewards.coding import CodingReward
    from gdpo_verl.sandbox import SandboxUnavailable
    from gdpo_verl.verl_adapter.reward_manager import GdpoRewardManager

    config = OmegaConf.create({"algorithm": {}, "reward": {}})
    manager = GdpoRewardManager(config, None, load("coding", max_length=50, objectives=2, wall_s=5))
    reward = manager.compute_score.args[0]
    assert isinstance(reward, CodingReward) and len(reward._sandboxes) == 1  # made and checked at the start
    result = score_a_program_once(manager)
    assert (result["pass_rate"], result["length"], result["no_bug"], result["score"]) == (0.5, 0.0, 1.0, 0.5)
    # a node whose sandbox cannot run: the manager does not start, with the node's problem named
    with pytest.raises(SandboxUnavailable, match="sandbox on node .*: the interpreter /no/python is not an executable"):
        GdpoRewardManager(config, None, load("coding", python="/no/python"))


def test_the_reward_manager_gives_the_coding_reward_verls_sandbox_fusion_settings():
    # verl passes reward.sandbox_fusion only to its own scorers; the manager hands it to the coding reward, which
    # then runs every test case on that server
    from tests.fusion_server import FusionServer
    from gdpo_verl.verl_adapter.reward_manager import GdpoRewardManager

    with FusionServer() as server:
        loaded = load("coding", max_length=50, objectives=2, wall_s=5, sandbox="fusion")
        config = OmegaConf.create({"algorithm": {}, "reward": {
            "custom_reward_function": {"path": "pkg://gdpo_verl.rewards.coding",
                                       "reward_kwargs": {"max_length": 50, "objectives": 2, "wall_s": 5,
                                                         "sandbox": "fusion"}},
            "sandbox_fusion": {"url": server.url, "max_concurrent": 2, "memory_limit_mb": 768}}})
        result = score_a_program_once(GdpoRewardManager(config, None, loaded))
    assert (result["pass_rate"], result["no_bug"], result["verify_failed"]) == (0.5, 1.0, 0.0)
    # the start-up check, then one request per test case, each with verl's memory limit
    assert server.requests[0]["code"] == "print(1)"
    assert sorted(request["stdin"] for request in server.requests[1:]) == ["1", "2"]
    assert {request["memory_limit_MB"] for request in server.requests} == {768}
