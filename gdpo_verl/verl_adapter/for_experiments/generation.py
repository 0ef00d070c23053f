"""Generation with vLLM for the evaluations (scripts/evaluate*.py): responses to score."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any


def generate(
    model: str,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    *,
    samples: int = 16,
    temperature: float = 0.6,
    top_p: float = 0.95,
    max_tokens: int = 32768,
    tensor_parallel_size: int = 1,
    max_model_len: int | None = None,
    dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
) -> list[list[dict[str, Any]]]:
    """vLLM generation: per chat prompt, ``samples`` responses as {text, tokens}. ``max_model_len``: prompt and
    response tokens (default: the longest prompt's tokens + ``max_tokens``, so that no prompt is refused and no
    response cut short by the context). ``gpu_memory_utilization``: vLLM's (on its CPU build, the share of the
    machine's memory it takes)."""
    if not prompts:
        return []
    tokenizer = load_tokenizer(model)
    texts = [tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
             for prompt in prompts]
    if max_model_len is None:
        max_model_len = max(len(tokenizer(text)["input_ids"]) for text in texts) + max_tokens
    generator = ChatGenerator(model, tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
                              dtype=dtype, gpu_memory_utilization=gpu_memory_utilization, tokenizer=tokenizer)
    return generator.sample(texts, samples=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens)


def load_tokenizer(model: str):
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            "vLLM is needed for generation and is not importable here: install it on a GPU node "
            "(pip install -e '.[vllm]'), or score existing generations with --generations FILE."
        ) from exc
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


class ChatGenerator:
    """One vLLM engine kept for several rounds of generation (the multi-turn evaluations), with the model's chat
    template. ``max_model_len`` None: the model's own context."""

    def __init__(self, model: str, *, tensor_parallel_size: int = 1, max_model_len: int | None = None,
                 dtype: str = "auto", gpu_memory_utilization: float = 0.9, tokenizer: Any = None):
        from vllm import LLM

        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model)
        self.llm = LLM(model=model, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                       max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization)
        self.context = self.llm.llm_engine.model_config.max_model_len

    def sample(self, texts: Sequence[str], *, samples: int, temperature: float, top_p: float,
               max_tokens: int) -> list[list[dict[str, Any]]]:
        from vllm import SamplingParams

        params = SamplingParams(n=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens)
        outputs = self.llm.generate(list(texts), params)
        return [[{"text": o.text, "tokens": len(o.token_ids)} for o in output.outputs] for output in outputs]

    def greedy(self, chats: Sequence[Sequence[Mapping[str, str]]], max_tokens: int) -> list[str | None]:
        """A greedy answer to each chat, of at most ``max_tokens`` and no more than its context leaves; ``None``
        for a chat that leaves the answer no room."""
        from vllm import SamplingParams

        texts = [self.tokenizer.apply_chat_template(list(chat), add_generation_prompt=True, tokenize=False)
                 for chat in chats]
        room = [self.room(text) for text in texts]
        fits = [index for index, left in enumerate(room) if left > 0]
        outputs = self.llm.generate(
            [texts[index] for index in fits],
            [SamplingParams(temperature=0.0, max_tokens=min(max_tokens, room[index])) for index in fits],
        ) if fits else []
        answers: list[str | None] = [None] * len(texts)
        for index, output in zip(fits, outputs, strict=True):
            answers[index] = output.outputs[0].text
        return answers

    def room(self, text: str) -> int:
        """Tokens the context leaves an answer after ``text`` (0 or less: none). A text longer than the context
        times the most characters one token stands for cannot fit, and is not tokenized: a model's calls can make
        a result (and so the next prompt) of megabytes, which would cost seconds and gigabytes to tokenize."""
        if len(text) > self.context * self.max_token_chars:
            return 0
        return self.context - len(self.tokenizer(text)["input_ids"])

    @functools.cached_property
    def max_token_chars(self) -> int:
        """The most characters one token of the vocabulary decodes to, and one more (a lone token's decoding may
        drop the space it begins with)."""
        return 1 + max(len(self.tokenizer.decode([token])) for token in range(len(self.tokenizer)))
