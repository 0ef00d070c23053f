"""Generation with vLLM for the evaluations (scripts/evaluate*.py): responses to score."""

from __future__ import annotations

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
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise ValueError(
            "vLLM is needed for generation and is not importable here: install it on a GPU node "
            "(pip install -e '.[vllm]'), or score existing generations with --generations FILE."
        ) from exc
    from transformers import AutoTokenizer

    if not prompts:
        return []
    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = [tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
             for prompt in prompts]
    if max_model_len is None:
        max_model_len = max(len(tokenizer(text)["input_ids"]) for text in texts) + max_tokens
    llm = LLM(model=model, tensor_parallel_size=tensor_parallel_size, dtype=dtype, max_model_len=max_model_len,
              gpu_memory_utilization=gpu_memory_utilization)
    params = SamplingParams(n=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    outputs = llm.generate(texts, params)
    return [[{"text": o.text, "tokens": len(o.token_ids)} for o in output.outputs] for output in outputs]
