"""Benchmark the advantage step: verl's built-in "gdpo", gdpo-verl's "gdpo", and verl's "grpo_vectorized".

All three run through verl's ``ray_trainer.compute_advantage`` on the same ``DataProto``: groups of 16
rollouts (the paper's n), K binary reward components stored per response as verl's reward step leaves
them, ragged response lengths up to T. Prints one table; ratios are measured side by side in one run.
gdpo-verl's time includes its ``gdpo/`` step metrics; the "metrics" columns time those alone.

    python scripts/bench_advantage.py                       # B in {1024, 8192, 32768}, T=1024, K in {2,3,5}
    python scripts/bench_advantage.py --device cuda
    python scripts/bench_advantage.py --batch-sizes 8192 --rewards 3
    python scripts/bench_advantage.py --v1-stage              # verl's V1 stage: gdpo vs grpo, B=8192, K=3

--v1-stage times verl's real V1 advantage stage instead (``PPOTrainer._compute_advantage`` with a local
Ray cluster and TransferQueue, samples written the way verl's agent loop writes them): "gdpo" on the
components against "grpo" on their sum, calls alternating, everything the stage does included (reading
the batch from TransferQueue, writing the advantages back).

Time is the median of --repeats calls. Peak extra memory is what a call adds on top of its inputs, in
units of one (B, T) float32 tensor, the output itself included (so 1.0 = nothing but the output): on CPU
from the process's peak resident memory (Linux), on CUDA from torch's allocator.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
from contextlib import nullcontext

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

from gdpo_verl.core.advantage import gdpo_parts  # noqa: E402
from gdpo_verl.core.diagnostics import advantage_metrics  # noqa: E402
from gdpo_verl.verl_adapter import compute_gdpo_advantage  # noqa: E402
from gdpo_verl.verl_adapter.estimator import Step, running  # noqa: E402
from gdpo_verl.verl_adapter.settings import settings_from_config  # noqa: E402

GROUP_SIZE = 16
PROMPT_LENGTH = 8
METHODS = ("verl builtin gdpo", "gdpo-verl gdpo", "verl grpo_vectorized", "gdpo-verl every option")
# "every option": GD2PO's snr masking, SAW's weights, the leave-one-out baseline, a weight schedule read at step 10,
# and the first component left out (None) for every fourth response, as a mixed-task batch has it.
EVERY_OPTION = {"conflict": "snr", "adaptive_weights": "saw", "baseline": "leave_one_out"}


def make_batch(
    batch_size: int, length: int, num_rewards: int, device: str, seed: int = 0
) -> tuple[DataProto, list[str]]:
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
    step, first = None, data.non_tensor_batch[names[0]]
    if method == "gdpo-verl every option":
        config.gdpo = EVERY_OPTION
        config.gdpo_reward_weights = {name: [[0, 0.5], [20, 1.0]] if k == 0 else 1.0 for k, name in enumerate(names)}
        step = Step(settings_from_config(config), global_step=10)
        mixed = first.astype(object)
        mixed[::4] = None
        data.non_tensor_batch[names[0]] = mixed
    output_bytes = data.batch["response_mask"].numel() * 4
    seconds, extra = [], []
    try:
        for _ in range(repeats):
            data.batch.pop("advantages", None)
            data.batch.pop("returns", None)
            before = reset_peak(device)
            start = time.perf_counter()
            with running(step) if step is not None else nullcontext():
                compute_advantage(data, adv_estimator=estimator, config=config)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            extra.append((peak(device) - before) / output_bytes)
    finally:
        registry["gdpo"] = compute_gdpo_advantage
        data.non_tensor_batch[names[0]] = first
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


def put_v1_samples(data: DataProto, names: list[str]):
    """Write ``data`` to TransferQueue as verl's agent loop does; return the stage's ``KVBatchMeta``."""
    import transfer_queue as tq
    from transfer_queue.metadata import KVBatchMeta
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    mask = data.batch["response_mask"]
    lengths = mask.sum(1).tolist()
    rewards = data.batch["token_level_rewards"]
    keys, fields, tags = [], [], []
    for row, length in enumerate(lengths):
        uid = data.non_tensor_batch["uid"][row]
        keys.append(f"{uid}_{row}_0")
        info = {name: float(data.non_tensor_batch[name][row]) for name in names}
        fields.append({
            "prompts": data.batch["prompts"][row],
            "responses": torch.zeros(length, dtype=torch.int64),
            "response_mask": mask[row, :length],
            "rm_scores": rewards[row, :length],
            "old_log_probs": torch.zeros(length),
            "uid": uid,
            "extra_fields": {"reward_extra_info": info, "min_global_steps": 0},
        })
        tags.append({"status": "success", "seq_len": PROMPT_LENGTH + length, "min_global_steps": 0,
                     "max_global_steps": 0})
    tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
    return KVBatchMeta(keys=keys, tags=tags, partition_id="train")


def check_v1_advantages(trainer, batch, data: DataProto, names: list[str]) -> None:
    """Run the "gdpo" stage once more and check that it wrote GDPO's advantages (a timing of a wrong result
    means nothing)."""
    import transfer_queue as tq

    from gdpo_verl.core.advantage import gdpo_advantage

    trainer._compute_advantage(batch, {})
    written = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["advantages"])
    written = written["advantages"].to_padded_tensor(0.0)
    rewards = {name: torch.as_tensor(data.non_tensor_batch[name]) for name in names}
    expected = gdpo_advantage(rewards, data.batch["response_mask"], data.non_tensor_batch["uid"])
    torch.testing.assert_close(written, expected[:, : written.shape[1]], rtol=1e-5, atol=1e-5)


def v1_stage(args: argparse.Namespace) -> int:
    """Time verl's V1 ``_compute_advantage`` under "gdpo" and under "grpo" on the summed reward."""
    import ray
    import transfer_queue as tq
    from hydra import compose, initialize_config_module
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    def stage(*overrides: str) -> PPOTrainerSync:
        # Created without __init__ (which would start GPU workers): _compute_advantage reads only self.config.
        trainer = object.__new__(PPOTrainerSync)
        with initialize_config_module("gdpo_verl.config", version_base=None):
            trainer.config = compose("gdpo_trainer", overrides=list(overrides))
        return trainer

    ray.init(address="local", num_cpus=4, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
    logging.getLogger("transfer_queue").setLevel(logging.ERROR)  # its thread-count notice, once per call
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        print(f"verl V1 advantage stage (Ray + TransferQueue), torch {torch.__version__}, verl {verl.__version__}, "
              f"{torch.get_num_threads()} threads, T={args.length}, groups of {GROUP_SIZE}, median of {args.repeats}")
        header = f"{'B':>6} {'K':>2} | {'gdpo ms':>9} | {'grpo ms':>9} | {'gdpo/grpo':>9}"
        print(header)
        print("-" * len(header))
        for batch_size in args.batch_sizes:
            for num_rewards in args.rewards:
                data, names = make_batch(batch_size, args.length, num_rewards, "cpu")
                batch = put_v1_samples(data, names)
                stages = {
                    "gdpo": stage(f"algorithm.gdpo_reward_keys=[{','.join(names)}]"),
                    "grpo": stage("algorithm.adv_estimator=grpo", "algorithm.gdpo_reward_keys=null"),
                }
                seconds = {name: [] for name in stages}
                for _ in range(args.repeats):  # alternate, so that drift in the machine hits both alike
                    for name, trainer in stages.items():
                        start = time.perf_counter()
                        trainer._compute_advantage(batch, {})
                        seconds[name].append(time.perf_counter() - start)
                check_v1_advantages(stages["gdpo"], batch, data, names)
                gdpo_ms, grpo_ms = (statistics.median(seconds[name]) * 1e3 for name in stages)
                print(f"{batch_size:>6} {num_rewards:>2} | {gdpo_ms:>9.1f} | {grpo_ms:>9.1f} | "
                      f"{gdpo_ms / grpo_ms:>8.2f}x", flush=True)
                tq.kv_clear(keys=batch.keys, partition_id="train")
    finally:
        tq.close()
        ray.shutdown()
    return 0


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
    parser.add_argument("--batch-sizes", type=parse_sizes, help="B values (default 1024,8192,32768)")
    parser.add_argument("--length", type=int, default=1024, help="T, the response length")
    parser.add_argument("--rewards", type=parse_sizes, help="K values (default 2,3,5)")
    parser.add_argument("--repeats", type=int, default=3, help="calls per cell; the median time is reported")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--v1-stage", action="store_true",
                        help="time verl's V1 advantage stage, gdpo against grpo (default B=8192, K=3)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    if args.length < 1 or args.repeats < 1:
        parser.error("--length and --repeats must be at least 1")
    if args.v1_stage:
        if args.device != "cpu":
            parser.error("--v1-stage runs on the CPU (TransferQueue holds the batch in Ray's object store)")
        args.batch_sizes, args.rewards = args.batch_sizes or [8192], args.rewards or [3]
        return v1_stage(args)
    args.batch_sizes, args.rewards = args.batch_sizes or [1024, 8192, 32768], args.rewards or [2, 3, 5]

    print(f"device {args.device}, torch {torch.__version__}, verl {verl.__version__}, "
          f"{torch.get_num_threads()} threads, T={args.length}, groups of {GROUP_SIZE}, median of {args.repeats}")
    header = (f"{'B':>6} {'K':>2} | " + " | ".join(f"{m + ' ms':>22}" for m in METHODS[:3])
              + f" | {'builtin/ours':>12} | {'ours/grpo_vec':>13} | {'extra mem (B,T) builtin/ours/grpo':>34}"
              + f" | {'metrics ms':>10} | {'metrics/ours':>12} | {'every option ms':>15} | {'every option/grpo_vec':>21}")
    print(header)
    print("-" * len(header))
    for batch_size in args.batch_sizes:
        for num_rewards in args.rewards:
            data, names = make_batch(batch_size, args.length, num_rewards, args.device)
            results = {method: run_method(method, data, names, args.device, args.repeats) for method in METHODS}
            times = [results[m][0] * 1e3 for m in METHODS]
            memory = "/".join(f"{results[m][1]:.2f}" for m in METHODS[:3])
            metrics_ms = time_metrics(data, names, args.device, args.repeats) * 1e3
            print(f"{batch_size:>6} {num_rewards:>2} | " + " | ".join(f"{t:>22.1f}" for t in times[:3])
                  + f" | {times[0] / times[1]:>11.1f}x | {times[1] / times[2]:>12.2f}x | {memory:>34}"
                  + f" | {metrics_ms:>10.2f} | {metrics_ms / times[1]:>11.1%} | {times[3]:>15.1f}"
                  + f" | {times[3] / times[2]:>20.2f}x", flush=True)
            del data
    return 0


if __name__ == "__main__":
    sys.exit(main())
