"""Benchmark the advantage step: verl's built-in "gdpo", gdpo-verl's "gdpo", and verl's "grpo_vectorized".

All three run through verl's ``ray_trainer.compute_advantage`` on the same ``DataProto``: groups of 16
rollouts (the paper's n), K binary reward components stored per response as verl's reward step leaves
them, ragged response lengths up to T. Prints one table; ratios are measured side by side in one run.
gdpo-verl's time includes its ``gdpo/`` step metrics; the "metrics" columns time those alone.

    python scripts/bench_advantage.py                       # B in {1024, 8192, 32768}, T=1024, K in {2,3,5}
    python scripts/bench_advantage.py --device cuda
    python scripts/bench_advantage.py --batch-sizes 8192 --rewards 3

Time is the median of --repeats calls. Peak extra memory is what a call adds on top of its inputs, in
units of one (B, T) float32 tensor, the output itself included (so 1.0 = nothing but the output): on CPU
from the process's peak resident memory (Linux), on CUDA from torch's allocator.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

# Large frees must return to the OS for resident-memory peaks to mean anything: fix glibc's mmap threshold.
if sys.platform == "linux" and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import verl  # noqa: E402,F401  (loads the gdpo-verl entry point)
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

from gdpo_verl.advantage import gdpo_parts  # noqa: E402
from gdpo_verl.diagnostics import advantage_metrics  # noqa: E402
from gdpo_verl.verl_adapter import compute_gdpo_advantage  # noqa: E402

GROUP_SIZE = 16
PROMPT_LENGTH = 8
METHODS = ("verl builtin gdpo", "gdpo-verl gdpo", "verl grpo_vectorized")


def make_batch(batch_size: int, length: int, num_rewards: int, device: str, seed: int = 0) -> DataProto:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch_size,), generator=generator)
    response_mask = (torch.arange(length)[None] < lengths[:, None]).long()
    names = [f"reward_{k}" for k in range(num_rewards)]
    components = {name: torch.randint(0, 2, (batch_size,), generator=generator).float() for name in names}
    scores = torch.zeros(batch_size, length)
    scores[torch.arange(batch_size), lengths - 1] = sum(components.values())
    tensors = {
        "prompts": torch.zeros(batch_size, PROMPT_LENGTH, dtype=torch.long),
        "attention_mask": torch.cat([torch.ones(batch_size, PROMPT_LENGTH, dtype=torch.long), response_mask], 1),
        "response_mask": response_mask,
        "token_level_rewards": scores,
    }
    tensors = {key: value.to(device) for key, value in tensors.items()}
    non_tensors = {"uid": np.array([f"prompt-{i // GROUP_SIZE}" for i in range(batch_size)], dtype=object)}
    non_tensors |= {name: values.numpy() for name, values in components.items()}
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors), names


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak(device: str) -> int:
    """Reset the peak counter; return current usage."""
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return resident_bytes()


def peak(device: str) -> int:
    if device == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def run_method(method: str, data: DataProto, names: list[str], device: str, repeats: int) -> tuple[float, float]:
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    estimator = "grpo_vectorized" if method == "verl grpo_vectorized" else "gdpo"
    if estimator == "gdpo":
        builtin = method == "verl builtin gdpo"
        registry["gdpo"] = core_algos.compute_gdpo_outcome_advantage if builtin else compute_gdpo_advantage
    config = OmegaConf.create(
        {"adv_estimator": estimator, "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
         "gdpo_reward_keys": names}
    )
    output_bytes = data.batch["response_mask"].numel() * 4
    seconds, extra = [], []
    try:
        for _ in range(repeats):
            data.batch.pop("advantages", None)
            data.batch.pop("returns", None)
            before = reset_peak(device)
            start = time.perf_counter()
            compute_advantage(data, adv_estimator=estimator, config=config)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            extra.append((peak(device) - before) / output_bytes)
    finally:
        registry["gdpo"] = compute_gdpo_advantage
    data.batch.pop("advantages", None)
    data.batch.pop("returns", None)
    return statistics.median(seconds), max(extra)


def time_metrics(data: DataProto, names: list[str], device: str, repeats: int) -> float:
    """Median seconds of the ``gdpo/`` metrics computation alone, on the parts of one GDPO computation."""
    rewards = {name: torch.as_tensor(data.non_tensor_batch[name]).to(device) for name in names}
    parts = gdpo_parts(rewards, data.batch["response_mask"], data.non_tensor_batch["uid"])
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        advantage_metrics(parts)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def parse_sizes(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=parse_sizes, default=[1024, 8192, 32768], help="B values")
    parser.add_argument("--length", type=int, default=1024, help="T, the response length")
    parser.add_argument("--rewards", type=parse_sizes, default=[2, 3, 5], help="K values")
    parser.add_argument("--repeats", type=int, default=3, help="calls per cell; the median time is reported")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    if args.length < 1 or args.repeats < 1:
        parser.error("--length and --repeats must be at least 1")

    print(f"device {args.device}, torch {torch.__version__}, verl {verl.__version__}, "
          f"{torch.get_num_threads()} threads, T={args.length}, groups of {GROUP_SIZE}, median of {args.repeats}")
    header = (f"{'B':>6} {'K':>2} | " + " | ".join(f"{m + ' ms':>22}" for m in METHODS)
              + f" | {'builtin/ours':>12} | {'ours/grpo_vec':>13} | {'extra mem (B,T) builtin/ours/grpo':>34}"
              + f" | {'metrics ms':>10} | {'metrics/ours':>12}")
    print(header)
    print("-" * len(header))
    for batch_size in args.batch_sizes:
        for num_rewards in args.rewards:
            data, names = make_batch(batch_size, args.length, num_rewards, args.device)
            results = {method: run_method(method, data, names, args.device, args.repeats) for method in METHODS}
            times = [results[m][0] * 1e3 for m in METHODS]
            memory = "/".join(f"{results[m][1]:.2f}" for m in METHODS)
            metrics_ms = time_metrics(data, names, args.device, args.repeats) * 1e3
            print(f"{batch_size:>6} {num_rewards:>2} | " + " | ".join(f"{t:>22.1f}" for t in times)
                  + f" | {times[0] / times[1]:>11.1f}x | {times[1] / times[2]:>12.2f}x | {memory:>34}"
                  + f" | {metrics_ms:>10.2f} | {metrics_ms / times[1]:>11.1%}", flush=True)
            del data
    return 0


if __name__ == "__main__":
    sys.exit(main())
