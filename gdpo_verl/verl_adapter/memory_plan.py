"""The memory plan of a GPU run, printed before Ray starts: what one GPU holds while vLLM generates, and whether it
fits the card. A setup that cannot fit is stopped here, naming the fixes, instead of an hour in.

With verl's hybrid engine (rollout and training on the same GPUs), the actor's FSDP states stay on the GPU while vLLM
generates, unless offloaded: its fp32 parameters (4 bytes a parameter, ``fsdp_config.param_offload`` moves them to the
CPU) and Adam's two fp32 moments (8 bytes, ``fsdp_config.optimizer_offload``), each sharded over the training GPUs.
verl's engine frees the gradients when an update ends (``zero_grad_on_exit``) and keeps the reference model (KL) on
the CPU (``forward_only``: FSDP's ``CPUOffload``), so neither is counted. vLLM takes ``rollout.gpu_memory_utilization``
of the card for its weights (bf16, split over ``tensor_model_parallel_size``) and its KV cache, which must hold at
least one sequence of ``rollout.max_model_len`` tokens (the model's own context length when unset). Adam's moments
appear after the first update, so an unplanned run fails when vLLM wakes for step 2. Activations during the update
are not counted: they are freed before vLLM wakes, and bounded by ``ppo_max_token_len_per_gpu``.

The card: ``GPU_MEMORY_GB`` (default 80, an 80 GB A100 or H100), of which 99% is usable (what such a card reports).
The model's size is read from ``config.json`` in a local model directory, else from ``KNOWN_MODELS`` by name; a model
neither names (or whose config has another layout) is reported without a plan. The plan is arithmetic, not a
measurement: ``GDPO_VERL_MEMORY_PLAN=warn`` (recipes: ``MEMORY_PLAN=warn``) prints its problems and goes on.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gdpo_verl.verl_adapter.reward_config import config_value as _get

GIB = 1 << 30
CARD_ENV = "GPU_MEMORY_GB"
MODE_ENV = "GDPO_VERL_MEMORY_PLAN"
MODES = ("refuse", "warn")
DEFAULT_CARD_GB = 80.0
USABLE = 0.99
# CUDA context, NCCL buffers and allocator slack per GPU: an allowance, not a measurement.
ALLOWANCE_GIB = 2.0


@dataclass(frozen=True)
class ModelShape:
    parameters: float
    layers: int
    kv_heads: int
    head_dim: int
    context: int  # max_position_embeddings


# The paper's models (their config.json on the Hugging Face hub).
KNOWN_MODELS: dict[str, ModelShape] = {
    "deepseek-r1-distill-qwen-7b": ModelShape(7.62e9, 28, 4, 128, 131072),
    "deepseek-r1-distill-qwen-1.5b": ModelShape(1.78e9, 28, 2, 128, 131072),
    "qwen3-4b-instruct-2507": ModelShape(4.02e9, 36, 8, 128, 262144),
    "qwen2.5-1.5b-instruct": ModelShape(1.54e9, 28, 2, 128, 32768),
    "qwen2.5-3b-instruct": ModelShape(3.09e9, 36, 2, 128, 32768),
}


def shape_from_config(path: Path) -> ModelShape:
    """A decoder-only transformer's size from its Hugging Face ``config.json`` (Qwen2/Qwen3/Llama layouts)."""
    c = json.loads(path.read_text())
    hidden, layers, vocab = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim") or hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * c["intermediate_size"]
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings", False) else 2)
    return ModelShape(float(layers * (attention + mlp) + embeddings), layers, kv_heads, head_dim,
                      int(c.get("max_position_embeddings", 0)))


def model_shape(model_path: str) -> ModelShape | None:
    local = Path(model_path).expanduser() / "config.json"
    if local.is_file():
        try:
            return shape_from_config(local)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):  # another layout (a nested text_config, ...)
            return None
    return KNOWN_MODELS.get(Path(model_path.rstrip("/")).name.lower())


def card_gib() -> float:
    value = os.environ.get(CARD_ENV, "").strip() or str(DEFAULT_CARD_GB)
    try:
        gb = float(value)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb <= 0:
        raise ValueError(f"{CARD_ENV}={value!r}: set the memory of one GPU in GB, e.g. 80 (A100/H100 80GB) or 40.")
    return gb * USABLE


@dataclass(frozen=True)
class Plan:
    lines: list[str]
    problems: list[str]


def memory_plan(config: Any) -> Plan | None:
    """The plan for ``config``, or None where there is none to make (a CPU run, a model of unknown size)."""
    trainer = _get(config, "trainer")
    if str(_get(trainer, "device", "cuda")) == "cpu":
        return None
    arr = _get(config, "actor_rollout_ref")
    actor, rollout = _get(arr, "actor"), _get(arr, "rollout")
    model_path = str(_get(_get(arr, "model"), "path"))
    shape = model_shape(model_path)
    if shape is None:
        return Plan([f"gdpo-verl memory plan: none for {model_path!r} (its size is unknown here: point "
                     "actor_rollout_ref.model.path at a local directory with its config.json to get one)"], [])
    card = card_gib()
    gpus = int(_get(trainer, "nnodes")) * int(_get(trainer, "n_gpus_per_node"))
    mode = _get(_get(trainer, "v1"), "trainer_mode", "sync")
    colocated = bool(_get(arr, "hybrid_engine", True)) and mode != "separate_async"
    fsdp = _get(actor, "fsdp_config")
    param_offload, optimizer_offload = bool(_get(fsdp, "param_offload")), bool(_get(fsdp, "optimizer_offload"))
    n = shape.parameters
    parameters_gib = 0.0 if param_offload else n * 4 / gpus / GIB
    adam_gib = 0.0 if optimizer_offload else n * 8 / gpus / GIB
    utilization = float(_get(rollout, "gpu_memory_utilization"))
    vllm_gib = utilization * card if colocated else 0.0
    total = parameters_gib + adam_gib + vllm_gib + ALLOWANCE_GIB

    def offloaded(flag: bool) -> str:
        return "offloaded" if flag else ""

    lines = [
        f"gdpo-verl memory plan, per GPU ({gpus} training GPU(s) of {card:.1f} GiB usable, {CARD_ENV}="
        f"{card / USABLE:g}; {model_path}, {n / 1e9:.2f}e9 parameters), while vLLM generates:",
        f"  actor parameters (fp32)               {parameters_gib:5.1f} GiB {offloaded(param_offload)}",
        f"  Adam's moments (fp32, after step 1)   {adam_gib:5.1f} GiB {offloaded(optimizer_offload)}",
        f"  vLLM (gpu_memory_utilization {utilization:g})    {vllm_gib:5.1f} GiB"
        + ("" if colocated else " (rollout on GPUs of its own)"),
        f"  CUDA context, NCCL (allowance)        {ALLOWANCE_GIB:5.1f} GiB",
        f"  total                                {total:5.1f} GiB of {card:.1f}",
    ]
    problems = []
    if card - ALLOWANCE_GIB < total <= card:
        lines.append(f"  tight: {card - total:.1f} GiB to spare; fragmentation or a longer batch can tip it over "
                     "(OPTIMIZER_OFFLOAD=True or more GPUs leave room)")
    if total > card:
        fixes = []
        if not optimizer_offload:
            fixes.append(f"OPTIMIZER_OFFLOAD=True (actor_rollout_ref.actor.fsdp_config.optimizer_offload: "
                         f"-{adam_gib:.1f} GiB, slower updates)")
        if not param_offload:
            fixes.append(f"PARAM_OFFLOAD=True (actor_rollout_ref.actor.fsdp_config.param_offload: "
                         f"-{parameters_gib:.1f} GiB)")
        states = parameters_gib + adam_gib
        fitting = next((g for g in (2, 4, 8, 16, 32, 64) if g > gpus
                        and states * gpus / g + vllm_gib + ALLOWANCE_GIB <= card), None)
        if fitting:
            fixes.append(f"more training GPUs (NNODES x GPUS_PER_NODE = {fitting} fits)")
        if colocated:
            fitting_share = math.floor(max(0.0, (card - states - ALLOWANCE_GIB) / card) * 100) / 100
            fixes.append(f"a lower GPU_MEMORY_UTILIZATION (actor_rollout_ref.rollout.gpu_memory_utilization; "
                         f"{fitting_share:.2f} would fit, less room for the KV cache)")
        problems.append(f"the run needs {total:.1f} GiB per GPU and the card has {card:.1f}: it would run out of memory "
                        f"when vLLM wakes for step 2. Fixes: {'; '.join(fixes)}.")
    if colocated:
        tp = int(_get(rollout, "tensor_model_parallel_size", 1) or 1)
        max_len = _get(rollout, "max_model_len") or shape.context
        weights_gib = n * 2 / tp / GIB
        per_sequence_gib = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2 * int(max_len) / min(tp, shape.kv_heads) / GIB
        kv_room = vllm_gib - weights_gib - 1.0  # vLLM's activations and CUDA graphs: about 1 GiB
        lines.append(f"  vLLM's share: weights {weights_gib:.1f} GiB (tensor parallel {tp}), KV cache room "
                     f"{kv_room:.1f} GiB, one sequence of {max_len} tokens {per_sequence_gib:.2f} GiB")
        if per_sequence_gib > kv_room:
            problems.append(
                f"vLLM's KV cache room ({kv_room:.1f} GiB) cannot hold one sequence of max_model_len={max_len} tokens "
                f"({per_sequence_gib:.1f} GiB): vLLM would refuse to start after the actor loaded. Fixes: set "
                "actor_rollout_ref.rollout.max_model_len to prompt + response (the recipes do), raise "
                "GPU_MEMORY_UTILIZATION, or more tensor parallelism (TP).")
    return Plan(lines, problems)


def print_memory_plan(config: Any) -> None:
    """Print the plan; raise ValueError with its problems when the setup cannot fit (print them, with
    ``GDPO_VERL_MEMORY_PLAN=warn``)."""
    mode = os.environ.get(MODE_ENV, "").strip() or MODES[0]
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: set refuse (stop a setup the plan says cannot fit) or warn.")
    plan = memory_plan(config)
    if plan is None:
        return
    print("\n".join(plan.lines), flush=True)
    if plan.problems:
        message = ("gdpo-verl memory plan: " + " Also: ".join(plan.problems)
                   + f" (GPU memory per card: {CARD_ENV}, default {DEFAULT_CARD_GB:g}. The plan is arithmetic: where "
                   f"you know better, {MODE_ENV}=warn, recipes MEMORY_PLAN=warn, goes on.)")
        if mode == "warn":
            print(f"WARNING: {message}", flush=True)
            return
        raise ValueError(message)
