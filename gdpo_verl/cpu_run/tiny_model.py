"""A tiny Llama model and a word-level tokenizer, built locally for the CPU training run (no hub).

The vocabulary is small and holds whole answer tokens such as ``\\boxed{4}``, so a freshly initialised model
(near-uniform next-token distribution) writes a correct final answer in some responses and stops early
(``<|im_end|>``) in some: both reward components of the math length-constrained reward vary within groups,
the GDPO advantages are not all zero, and one training step must change the weights.

A Llama, not a Qwen2: transformers 5 loads a ``qwen2`` model's tokenizer as ``Qwen2Tokenizer``, which rebuilds a
byte-level BPE from the vocabulary whatever ``tokenizer_config.json`` says, while a ``llama`` model's tokenizer
comes from ``tokenizer.json`` as written (vLLM and verl both load it through ``AutoTokenizer``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ANSWERS = ("2", "4", "9")
SPECIAL = ("<pad>", "<unk>", "<|im_end|>")
WORDS = (
    *(f"\\boxed{{{a}}}" for a in ANSWERS),
    "</think>",
    "the",
    "answer",
    "is",
    "so",
    "we",
    "get",
    "x",
    "=",
    "+",
    "1",
    "3",
    "user",
    "assistant",
    ":",
)
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def build_tokenizer(words: tuple[str, ...] = WORDS):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate((*SPECIAL, *words))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<|im_end|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build(out: Path, seed: int = 0, words: tuple[str, ...] = WORDS) -> Path:
    """Write a tiny LlamaForCausalLM (bf16 safetensors), its tokenizer and generation config to ``out``.

    ``seed`` initialises the weights; ``words`` is the vocabulary after the special tokens.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(words)
    tokenizer.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id).save_pretrained(out)
    return out


def warm_start(path: Path, examples: list[tuple[str, str]], steps: int, lr: float, seed: int,
               batch_size: int = 32) -> Path:
    """Train the model at ``path`` in place on ``examples`` ((prompt, response) pairs) for ``steps`` steps of
    AdamW: the loss is the response's tokens and the end token, after the prompt as the chat template writes it
    for generation (as verl's rollout sees it). Deterministic for a ``seed`` on one machine; written back as bf16.

    It trains on one thread: the model is tiny, and beside other work on the machine torch's threads wait on each
    other (the test suite's 150 steps took 267 s instead of 3 s beside a CPU training run; beside two busy
    processes 150 steps take 6 s on one thread, 15 s on two). The weights come out the same, bit for bit, on one
    thread or two (checked for the learning study's warm start)."""
    import torch
    from transformers import AutoTokenizer

    if not examples or steps < 1 or batch_size < 1:
        raise ValueError(f"a warm start needs examples, steps >= 1 and batch_size >= 1; got {len(examples)} "
                         f"example(s), steps={steps}, batch_size={batch_size}.")
    tokenizer = AutoTokenizer.from_pretrained(path)
    rows = []
    for prompt, response in examples:
        prompt_ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                                   tokenize=True)
        if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "input_ids"):
            prompt_ids = prompt_ids["input_ids"]
        response_ids = [*tokenizer(response, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
        rows.append((list(prompt_ids), response_ids))
    if tokenizer.unk_token_id in {token for prompt, response in rows for token in (*prompt, *response)}:
        raise ValueError("a warm-start example holds a word outside the model's vocabulary.")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _train(path, tokenizer, rows, steps, lr, seed, batch_size)
    finally:
        torch.set_num_threads(threads)
    return path


def _train(path: Path, tokenizer, rows: list[tuple[list[int], list[int]]], steps: int, lr: float, seed: int,
           batch_size: int) -> None:
    import random

    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    draw = random.Random(seed)
    model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        batch = [draw.choice(rows) for _ in range(batch_size)]
        width = max(len(prompt) + len(response) for prompt, response in batch)
        ids = torch.full((batch_size, width), tokenizer.pad_token_id)
        labels = torch.full((batch_size, width), -100)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        for row, (prompt, response) in enumerate(batch):
            tokens = prompt + response
            ids[row, :len(tokens)] = torch.tensor(tokens)
            labels[row, len(prompt):len(tokens)] = torch.tensor(response)
            mask[row, :len(tokens)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)


if __name__ == "__main__":
    print(json.dumps({"model": str(build(Path(sys.argv[1])))}))
