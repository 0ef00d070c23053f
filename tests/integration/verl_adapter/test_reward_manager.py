"""The "gdpo_verl" reward manager, and verl's real V1 dynamic-sampling filter (ReplayBuffer) reading what
it writes, with real Ray and TransferQueue."""

import os
import time
import uuid
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
import transfer_queue as tq
from omegaconf import OmegaConf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import verl  # noqa: F401  (loads the entry point)
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
from verl.trainer.ppo.reward import _call_with_kwargs
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from gdpo_verl.verl_adapter.reward_manager import GdpoRewardManager, reward_signature
from gdpo_verl.verl_adapter.settings import SIGNATURE_KEY


WORDS = ["<pad>", "<eos>", "the", "answer", "is", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "?", "\\boxed{4}"]
PROMPT = [2, 3]


def tiny_tokenizer():
    """A word-level tokenizer built in place (no hub): one token per whitespace-separated word."""
    model = models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="?")
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")


def compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs):
    """A two-component reward: the last word equals the ground truth; at most 3 response tokens."""
    correct = float(solution_str.split()[-1] == ground_truth) if solution_str else 0.0
    length = float(extra_info["response_length"] <= 3)
    return {"score": correct + length, "correct": correct, "length": length, "seen": extra_info["response_length"]}


def manager(reward_keys=("correct", "length"), score=compute_score):
    config = OmegaConf.create(
        {"algorithm": {"gdpo_reward_keys": list(reward_keys) if reward_keys else None}, "reward": {}}
    )
    return GdpoRewardManager(config, tiny_tokenizer(), score)


def sample(text, ground_truth="4", width=8, extra_info=None):
    """One sample as the agent loop hands it to the reward loop: right-padded response of ``width``."""
    response = tiny_tokenizer().encode(text) if text else []
    responses = torch.zeros(1, width, dtype=torch.long)
    responses[0, : len(response)] = torch.tensor(response, dtype=torch.long)
    attention_mask = torch.zeros(1, len(PROMPT) + width, dtype=torch.long)
    attention_mask[0, : len(PROMPT) + len(response)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([PROMPT]),
            "responses": responses,
            "attention_mask": attention_mask,
        },
        non_tensors={
            "data_source": np.array(["test"], dtype=object),
            "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
            "extra_info": np.array([extra_info if extra_info is not None else {"index": 0}], dtype=object),
        },
    )


def score(reward_manager, data):
    return reward_manager.loop.run_until_complete(reward_manager.run_single(data))


def test_registered_in_verl_under_its_own_name():
    assert get_reward_manager_cls("gdpo_verl") is GdpoRewardManager
    assert get_reward_manager_cls("gdpo") is not GdpoRewardManager  # verl's own name is left alone


def test_compute_score_sees_the_true_response_length_in_tokens():
    result = score(manager(), sample("the answer is 4", width=8))
    info = result["reward_extra_info"]
    assert info["seen"] == 4  # 4 tokens, not the padded width 8 and not the character count
    assert (info["correct"], info["length"], result["reward_score"]) == (1.0, 0.0, 1.0)


def test_extra_info_shared_between_rollouts_is_not_written_to():
    shared = {"index": 7}
    reward_manager = manager()
    score(reward_manager, sample("4", extra_info=shared))
    score(reward_manager, sample("the answer is 5", extra_info=shared))
    assert shared == {"index": 7}


def test_signature_is_equal_exactly_when_all_components_are_equal():
    reward_manager = manager()
    signatures = {
        text: score(reward_manager, sample(text))["reward_extra_info"][SIGNATURE_KEY]
        for text in ["4", "5", "the answer is 4", "the answer is 5", "is 4"]
    }
    # (correct, length): "4" (1,1), "5" (0,1), "the answer is 4" (1,0), "the answer is 5" (0,0), "is 4" (1,1)
    assert signatures["4"] == signatures["is 4"]
    assert len({signatures[t] for t in ["4", "5", "the answer is 4", "the answer is 5"]}) == 4
    assert all(float(s).is_integer() and 0 <= s < 2**48 for s in signatures.values())
    assert reward_signature([1.0, 0.0]) == reward_signature([True, -0.0])


def through_worker(reward_manager, data):
    """``reward_manager``'s result for ``data`` as verl's RewardLoopWorker returns it (its compute_score, which every
    manager's result passes through on both trainers: where gdpo-verl holds the dict to the reward keys).
    The worker is made without __init__, which would load a tokenizer from the hub; its compute_score is verl's."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    worker = RewardLoopWorker.__new__(RewardLoopWorker)
    # a reward function of the user's: the worker hands each sample to the manager (no reward model)
    worker.config = OmegaConf.merge(reward_manager.config, {"reward": {"custom_reward_function": {"path": "test.py"}}})
    worker.reward_manager = reward_manager
    return reward_manager.loop.run_until_complete(worker.compute_score(data))


def test_a_misspelled_reward_key_stops_the_reward_worker_at_its_first_response_naming_what_it_returned():
    # before, the key was filled in as None (does not apply) and the run trained on the other component alone
    expected = (r"compute_score returned no 'lenght', which algorithm.gdpo_reward_keys=\['correct', 'lenght'\] names; "
                r"it returned \['correct', 'length', 'score', 'seen'\]. Did you mean 'length'\?")
    with pytest.raises(ValueError, match=expected):
        through_worker(manager(reward_keys=("correct", "lenght")), sample("4"))
    with pytest.raises(ValueError, match=expected):  # the manager alone refuses it too (its signature)
        score(manager(reward_keys=("correct", "lenght")), sample("4"))
    info = through_worker(manager(reward_keys=("length", "correct")), sample("4"))["reward_extra_info"]
    assert list(info)[:2] == ["length", "correct"]  # the components first, in the keys' order


def test_a_non_numeric_component_is_refused():
    def bad(**kwargs):
        return {"score": 1.0, "correct": "yes", "length": 1.0}

    with pytest.raises(ValueError, match=r"correct='yes'; GDPO needs a finite number"):
        score(manager(score=bad), sample("4"))


def test_without_reward_keys_no_signature_is_added():
    info = score(manager(reward_keys=None), sample("4"))["reward_extra_info"]
    assert SIGNATURE_KEY not in info


# ----------------------------------------------------------------------------- dynamic sampling in verl


def put_finished_group(partition, texts):
    """A finished prompt group in TransferQueue, scored by the gdpo_verl manager, as the agent loop stores it."""
    reward_manager = manager()
    uid = uuid.uuid4().hex
    tq.kv_batch_put(keys=[uid], partition_id=partition, tags=[{"is_prompt": True, "status": "pending", "global_steps": 0}])
    keys, fields, tags = [], [], []
    for session, text in enumerate(texts):
        result = score(reward_manager, sample(text))
        length = max(len(text.split()), 1)
        rm_scores = torch.zeros(length)
        rm_scores[-1] = result["reward_score"]
        keys.append(f"{uid}_{session}_0")
        fields.append({"rm_scores": rm_scores, "extra_fields": {"reward_extra_info": result["reward_extra_info"]}})
        tags.append({"status": "success", "global_steps": 0})
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(fields), tags=tags)
    tq.kv_put(key=uid, partition_id=partition, tag={"is_prompt": True, "status": "finished", "global_steps": 0})
    return uid


def filtered_groups(partition, metric, mode):
    """The groups verl's replay buffer of the V1 trainer's ``mode`` drops for dynamic sampling: ``ReplayBuffer``
    under ``sync``; under ``colocate_async`` and ``separate_async``, ``ReplayBufferAsync`` (the one verl's
    trainer_base builds for them), by the eviction reasons its ``sample`` acts on."""
    buffer = (ReplayBuffer if mode == "sync" else ReplayBufferAsync)(
        trainer_mode=mode,
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=8,  # verl's default (ppo_trainer.yaml); verl 0.10 refuses None
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        refill_fn=lambda count: count,
        filter_groups_metric=metric,
    )
    buffer._sync_metadata_from_transfer_queue()
    if mode == "sync":
        dropped, _ = buffer._dapo_filtered_keys(partition)
        return dropped
    _, dropped, _, _ = buffer._terminal_eviction_reasons(0, partition)
    assert buffer.get_sampleable_count(0, partition) == 3 - len(dropped)
    return dropped


@pytest.mark.parametrize("mode", ["sync", "colocate_async", "separate_async"])
def test_gdpo_signature_keeps_groups_whose_components_vary_and_drops_constant_ones(transfer_queue, mode):
    partition = f"dapo{uuid.uuid4().hex[:8]}"
    # (correct, length) = (1, 0) and (0, 1): the components vary, their sum (score) does not.
    constant_sum = put_finished_group(partition, ["the answer is 4", "5"])
    # (1, 1) twice: nothing varies.
    constant = put_finished_group(partition, ["4", "is 4"])
    # (1, 1) and (0, 0): everything varies.
    varying = put_finished_group(partition, ["4", "the answer is 5"])

    assert filtered_groups(partition, SIGNATURE_KEY, mode) == {constant}
    # The paper's choice, the summed reward, drops the constant-sum group as well.
    assert filtered_groups(partition, "score", mode) == {constant, constant_sum}
    assert varying not in filtered_groups(partition, "score", mode)


def test_per_token_components_are_padded_to_the_maximum_response_length():
    def per_token(solution_str, extra_info, **kwargs):
        n = extra_info["response_length"]
        return {"score": 1.0, "correct": 1.0, "token_level_scores_length": [0.5] * n}

    config = OmegaConf.create({"algorithm": {"gdpo_reward_keys": ["correct", "length"]}, "data": {"max_response_length": 6}})
    reward_manager = GdpoRewardManager(config, tiny_tokenizer(), per_token)
    info = score(reward_manager, sample("the answer is 4"))["reward_extra_info"]
    assert info["token_level_scores_length"] == [0.5, 0.5, 0.5, 0.5, 0.0, 0.0]
    assert info[SIGNATURE_KEY] == reward_signature([1.0, 2.0])  # the signature uses the summed per-token score

    def too_short(**kwargs):
        return {"score": 1.0, "correct": 1.0, "token_level_scores_length": [0.5]}

    with pytest.raises(ValueError, match=r"returned 1 values for 'token_level_scores_length' but the response has 4 tokens"):
        score(GdpoRewardManager(config, tiny_tokenizer(), too_short), sample("the answer is 4"))


def test_a_reward_function_that_hangs_fails_the_call_with_the_limit_named():
    def hangs(**kwargs):
        time.sleep(30)

    config = OmegaConf.create({"algorithm": {"gdpo_reward_keys": None, "gdpo": {"reward_timeout_s": 0.5}}, "reward": {}})
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"compute_score did not return within algorithm.gdpo.reward_timeout_s=0.5 s"):
        score(GdpoRewardManager(config, tiny_tokenizer(), hangs), sample("4"))
    assert time.monotonic() - start < 10


def test_a_reward_function_that_raises_reaches_the_caller_unchanged():
    def raises(**kwargs):
        raise KeyError("ground_truth")

    with pytest.raises(KeyError, match="ground_truth"):
        score(manager(score=raises), sample("4"))


@pytest.mark.parametrize("value", [0, -1, "10", True])
def test_a_bad_reward_timeout_is_refused(value):
    config = OmegaConf.create({"algorithm": {"gdpo_reward_keys": None, "gdpo": {"reward_timeout_s": value}}, "reward": {}})
    with pytest.raises(ValueError, match=r"algorithm.gdpo.reward_timeout_s \(seconds, or null\)"):
        GdpoRewardManager(config, tiny_tokenizer(), compute_score)


def test_verls_own_reward_manager_is_held_to_the_reward_keys_in_the_reward_worker():
    # verl's RewardLoopWorker with verl's "naive" manager, as with gdpo-verl's own above: None says a component does
    # not apply to a response; a key left out of the dict stops the worker

    def code_on_even_prompts(data_source, solution_str, ground_truth, extra_info, **kwargs):
        result = {"score": 1.0, "correct": 1.0, "code": None}
        if extra_info["index"] % 2 == 0:
            result["code"] = 0.5
        if extra_info["index"] == 3:
            del result["code"]
        return result

    config = OmegaConf.create({"algorithm": {"gdpo_reward_keys": ["correct", "code"]},
                               "reward": {"custom_reward_function": {"path": "test.py"}}})
    naive = get_reward_manager_cls("naive")(config, tiny_tokenizer(), code_on_even_prompts)
    outputs = [through_worker(naive, sample("4", extra_info={"index": i})) for i in (1, 2)]
    infos = [output["reward_extra_info"] for output in outputs]
    assert [info["code"] for info in infos] == [None, 0.5]
    # what verl's RewardLoopManager.compute_rm_score and the agent loop do next: stack by the first sample's keys
    assert np.array([info["code"] for info in infos]).tolist() == [None, 0.5]
    with pytest.raises(ValueError, match=r"returned no 'code'.*it returned \['correct', 'score'\]"):
        through_worker(naive, sample("4", extra_info={"index": 3}))


def test_the_readmes_example_reward_pasted_as_is_needs_the_gdpo_verl_manager_and_scores_through_it():
    # README, "Your rewards, your verl config": the reward a new user copies into my_reward.py, and the manager each
    # route sets
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    usage = readme[readme.index("### Your rewards, your verl config"):]
    source = usage[usage.index("```python\n") + len("```python\n"):usage.index("```", usage.index("```python\n") + 3)]
    pasted = {}
    exec(compile(source, "my_reward.py", "exec"), pasted)
    result = score(manager(score=pasted["compute_score"]), sample("the answer is \\boxed{4}", ground_truth="4"))
    info = result["reward_extra_info"]
    assert (info["correct"], info["length"], result["reward_score"]) == (1.0, 1.0, 2.0)
    assert SIGNATURE_KEY in info
    config = OmegaConf.create({"algorithm": {"gdpo_reward_keys": ["correct", "length"]}, "reward": {}})
    naive = get_reward_manager_cls("naive")(config, tiny_tokenizer(), pasted["compute_score"])
    with pytest.raises(KeyError, match="response_length"):  # why the README's second route names the manager
        naive.loop.run_until_complete(naive.run_single(sample("the answer is 4", ground_truth="4")))


@pytest.mark.parametrize(("workers", "slots"), [(8, None), (1, None), (8, 3)])
def test_the_coding_rewards_sandbox_takes_this_workers_share_of_the_nodes_cores(workers, slots):
    # verl starts reward.num_workers reward workers on a node; each one's sandbox runs at most its share of the node's
    # cores at once (outside Ray, as here: one node), unless reward_kwargs.slots (SANDBOX_SLOTS) says otherwise
    from gdpo_verl.rewards import coding

    reward_kwargs = {"sandbox": "none", **({"slots": slots} if slots else {})}
    config = OmegaConf.create({
        "algorithm": {"gdpo_reward_keys": ["pass_rate", "length"]},
        "reward": {"num_workers": workers, "custom_reward_function": {
            "path": "pkg://gdpo_verl.rewards.coding", "name": "compute_score", "reward_kwargs": reward_kwargs}}})
    verl_score = partial(_call_with_kwargs, coding.compute_score, reward_kwargs)
    reward_manager = GdpoRewardManager(config, tiny_tokenizer(), verl_score)
    try:
        reward = reward_manager.compute_score.args[0]
        cores = len(os.sched_getaffinity(0))
        assert reward.workers == (slots or max(1, cores // workers))
    finally:
        reward.close()
