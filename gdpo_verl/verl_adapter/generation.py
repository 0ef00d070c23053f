"""Generation with vLLM for the evaluation (scripts/evaluate.py): responses to score with the training reward."""

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
) -> list[list[dict[str, Any]]]:
    """vLLM generation: per chat prompt, ``samples`` responses as {text, tokens}."""
    try:
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise ValueError(
            "vLLM is needed for generation and is not importable here: install it on a GPU node "
            "(pip install -e '.[vllm]'), or score existing generations with --generations FILE."
        ) from exc
    llm = LLM(model=model, tensor_parallel_size=tensor_parallel_size, max_model_len=max_tokens + 2048)
    tokenizer = llm.get_tokenizer()
    texts = [tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False) for prompt in prompts]
    params = SamplingParams(n=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens)
    outputs = llm.generate(texts, params)
    return [[{"text": o.text, "tokens": len(o.token_ids)} for o in output.outputs] for output in outputs]
