"""Load the tiny model in vLLM's CPU model runner, reload other weights into it the way verl's weight sync does,
and report what generation then uses. Run in .venv-cpu-training by tests/e2e/test_vllm_weight_reload.py.

    python tests/e2e/vllm_reload_probe.py OUT --gemm {native,fallback,onednn,sgl} [--dispatch {cpu-run,vllm}]

``--gemm`` makes vLLM's kernel choice the one it makes on a CPU with that path (``fallback``: neither oneDNN nor
AMX; ``onednn``: oneDNN without AMX; ``sgl``: AMX, where vLLM picks SGL for small weights and oneDNN for the
rest; ``native``: whatever this CPU gives); a path this CPU or this build cannot run exits 3 with the reason. ``--dispatch cpu-run`` (the default)
loads the CPU run's piece first (``cpu_platform.keep_vllm_linear_weights_reloadable``), ``vllm`` leaves vLLM's own
dispatch. Prints one JSON object: the kernel each linear layer uses, whether the reload raised, and the largest
difference between vLLM's prompt log-probabilities and those of the old and of the new weights (transformers,
float32).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

PROMPT = "user : so we get x = 1 + 3 the answer is \\boxed{4} </think> assistant :"
CANNOT_RUN = 3


def fail_cannot_run(reason: str) -> None:
    print(json.dumps({"cannot_run": reason}))
    sys.exit(CANNOT_RUN)


def force_gemm_path(gemm: str) -> None:
    """Make vLLM's dispatch see the capabilities of a CPU with the ``gemm`` path (before any model loads)."""
    import torch
    from vllm import _custom_ops as ops
    from vllm.model_executor.layers import utils

    if gemm == "native":
        return
    if gemm == "sgl":
        if not torch.cpu._is_amx_tile_supported():
            fail_cannot_run("this CPU has no AMX tiles (torch.cpu._is_amx_tile_supported() is False)")
        return  # vLLM's own choice on an AMX CPU: SGL for small weights, oneDNN above 1 MiB
    utils.check_cpu_sgl_kernel = lambda n, k, dtype: False
    if gemm == "fallback":
        ops._supports_onednn = False
        return
    if not ops._supports_onednn:
        fail_cannot_run("this vLLM build has no oneDNN GEMM (torch.ops._C.create_onednn_mm_handler)")
    try:
        ops.create_onednn_mm(torch.zeros(64, 64, dtype=torch.bfloat16).t(), 32)
    except RuntimeError as exc:
        fail_cannot_run(f"oneDNN cannot create a bf16 linear on this CPU: {exc}")


def kernel_of(layer) -> str:
    import torch

    linear = layer.cpu_linear
    if linear is torch.nn.functional.linear:
        return "torch linear (weight kept)"
    names = set(linear.__code__.co_names)
    for kernel in ("onednn_mm", "weight_packed_linear", "zentorch_linear_unary", "linear"):
        if kernel in names:
            return kernel
    return linear.__qualname__


def other_weights(path: Path):
    """The model's weights moved far from their initial values (norms kept), as a training step would."""
    import torch
    from safetensors.torch import load_file

    generator = torch.Generator().manual_seed(1)
    return {
        name: value if "norm" in name else torch.randn(value.shape, generator=generator).to(value.dtype) * 0.2
        for name, value in load_file(path / "model.safetensors").items()
    }


def reference_logprobs(path: Path, weights, token_ids: list[int]) -> list[float]:
    """log p(token_i | tokens_<i) for i >= 1 under transformers, float32."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    if weights is not None:
        model.load_state_dict({name: value.float() for name, value in weights.items()})
    with torch.no_grad():
        logits = model(torch.tensor([token_ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    return [logprobs[i - 1, token_ids[i]].item() for i in range(1, len(token_ids))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gemm", choices=("native", "fallback", "onednn", "sgl"), required=True)
    parser.add_argument("--dispatch", choices=("cpu-run", "vllm"), default="cpu-run")
    args = parser.parse_args()

    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # one process: the forced capabilities hold in the worker
    from gdpo_verl.cpu_run import tiny_model

    path = tiny_model.build(args.out / "model")
    force_gemm_path(args.gemm)
    if args.dispatch == "cpu-run":
        # the piece the CPU run loads in vLLM's worker
        import gdpo_verl.verl_adapter.for_cpu_run.cpu_platform  # noqa: F401

    from vllm import LLM, SamplingParams

    # a KV cache of a fixed size (vLLM's CPU build otherwise gives it a share of the machine's memory less this
    # process's own, which depends on the machine)
    llm = LLM(
        model=str(path), dtype="bfloat16", enforce_eager=True, max_model_len=64, max_num_seqs=4,
        max_num_batched_tokens=256, kv_cache_memory_bytes=1 << 28, distributed_executor_backend="uni", seed=0,
        worker_extension_cls="verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension",
    )
    token_ids = llm.get_tokenizer()(PROMPT)["input_ids"]
    sampling = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)

    def vllm_logprobs() -> list[float]:
        prompt_logprobs = llm.generate({"prompt_token_ids": token_ids}, sampling, use_tqdm=False)[0].prompt_logprobs
        return [prompt_logprobs[i][token_ids[i]].logprob for i in range(1, len(token_ids))]

    kernels = llm.apply_model(lambda model: {name: kernel_of(m) for name, m in model.named_modules()
                                             if hasattr(m, "cpu_linear")})[0]
    before = vllm_logprobs()
    new = other_weights(path)
    reload_error = None
    try:
        # verl's vLLMColocateWorkerExtension: load_weights per bucket, then process_weights_after_loading once.
        llm.collective_rpc("_update_weights", args=(list(new.items()),), kwargs={"peft_config": None,
                                                                                   "base_sync_done": False})
        llm.collective_rpc(_process_weights_after_loading)
    except Exception as exc:  # reported to the test, which asserts on it
        reload_error = f"{type(exc).__name__}: {exc}"
    old_reference = reference_logprobs(path, None, token_ids)
    new_reference = reference_logprobs(path, new, token_ids)
    after = vllm_logprobs() if reload_error is None else None

    def largest_difference(a, b):
        return None if a is None else max(abs(x - y) for x, y in zip(a, b))

    print(json.dumps({
        "kernels": kernels,
        "reload_error": reload_error,
        "before_vs_old": largest_difference(before, old_reference),
        "after_vs_new": largest_difference(after, new_reference),
        "after_vs_old": largest_difference(after, old_reference),
        "old_vs_new": largest_difference(old_reference, new_reference),
    }))
    return 0


def _process_weights_after_loading(worker) -> None:
    from vllm.model_executor.model_loader.utils import process_weights_after_loading

    runner = worker.model_runner
    process_weights_after_loading(runner.model, runner.vllm_config.model_config, worker.device)


if __name__ == "__main__":
    sys.exit(main())
