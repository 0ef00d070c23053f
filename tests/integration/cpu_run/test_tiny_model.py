"""gdpo_verl/cpu_run/tiny_model.py: the learning study's warm start trains the answer after the prompt as the chat
template writes it for generation (what verl's rollout feeds the model)."""

import pytest
import torch
from transformers import AutoTokenizer, LlamaForCausalLM

from gdpo_verl.rewards import learning_study
from gdpo_verl.cpu_run import tiny_model


def answer_probabilities(path):
    """For each prompt of the task, the probability the model gives its own number's \\boxed{} right after
    ``</think>``, among the three \\boxed{} tokens."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    think = tokenizer.convert_tokens_to_ids(learning_study.THINK)
    boxed = [tokenizer.convert_tokens_to_ids(token) for token in learning_study.BOXED]
    shares = []
    for prompt, answer in learning_study.prompts():
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True)["input_ids"]
        with torch.no_grad():
            probabilities = torch.softmax(model(torch.tensor([[*ids, think]])).logits[0, -1], dim=-1)[boxed]
        shares.append((probabilities / probabilities.sum())[learning_study.ANSWERS.index(answer)].item())
    return shares


def test_warm_start_teaches_the_answer_after_the_generation_prompt(tmp_path, monkeypatch):
    path = tiny_model.build(tmp_path / "model", seed=5, words=learning_study.WORDS)
    before = answer_probabilities(path)
    assert max(before) < 0.6  # a fresh model does not read the number
    monkeypatch.setattr(learning_study, "WARM_RIGHT", 1.0)
    tiny_model.warm_start(path, learning_study.warm_start_examples(512, seed=5), steps=150, lr=3e-3, seed=5)
    assert min(answer_probabilities(path)) > 0.9
    assert LlamaForCausalLM.from_pretrained(path).dtype == torch.bfloat16  # written back as built


def test_warm_start_refuses_words_outside_the_vocabulary(tmp_path):
    path = tiny_model.build(tmp_path / "model", seed=5, words=learning_study.WORDS)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        tiny_model.warm_start(path, [("x = 4", "\\boxed{4} banana")], steps=1, lr=1e-3, seed=0)


def test_warm_start_refuses_no_examples_or_no_steps(tmp_path):
    path = tiny_model.build(tmp_path / "model", seed=5, words=learning_study.WORDS)
    for examples, steps in (([], 10), ([("x = 4", "\\boxed{4}")], 0)):
        with pytest.raises(ValueError, match="a warm start needs examples, steps >= 1"):
            tiny_model.warm_start(path, examples, steps=steps, lr=1e-3, seed=0)
