"""Run verl 0.9.1 on a machine with no accelerator: the pieces the CPU training run needs.

verl has no CPU platform, so this module adds one through verl's own extension points and is loaded in
every process of the run (driver and Ray workers) by verl itself:
``VERL_USE_EXTERNAL_MODULES=gdpo_verl.verl_adapter.for_cpu_run.cpu_platform``, and ``VERL_PLATFORM=cpu`` to select it.
Nothing here edits verl's files.

- ``PlatformCPU``: a ``verl.plugin.platform`` platform for the CPU: device "cpu" (also as the device id, which
  verl hands to ``.to()``), gloo, no CUDA IPC (so verl syncs weights to vLLM through shared memory). Its Ray
  resource stays "GPU": verl's resource pools ask Ray for GPUs, and the run starts Ray with one placeholder.
- ``torch.distributed.init_process_group`` accepts verl's backend string "cpu:gloo,cpu:gloo" as "cpu:gloo".
- verl's FSDP engine is picked with ``VERL_ENGINE_DEVICE=cuda`` (it is registered for cuda/npu only) and runs
  on whatever ``get_device_name()`` returns, here "cpu".
- vLLM's linear layers keep their weights and compute with torch's linear, on every CPU
  (``keep_vllm_linear_weights_reloadable``), so verl's weight sync can load new weights into them.
- The V1 replay buffer looks for finished rollouts every 0.1 s instead of 2 s (``poll_replay_buffer_often``).
- Each worker group's rendezvous port is looked for outside the ephemeral port range
  (``rendezvous_outside_ephemeral_ports``), where another Ray's connections could take it first.

docs/cpu-training.md lists each piece with the verl line that needs it.

Loaded by ``scripts/cpu_main_ppo.sh`` (the CPU training run and the learning study), never by a GPU run.
"""
from __future__ import annotations

import contextlib
import functools
import os
import random
from types import ModuleType
from typing import Any, Optional

import psutil
import torch
import torch.distributed

from verl.plugin.platform import platform_manager
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from gdpo_verl.verl_adapter.import_hooks import after_import


class _CpuDeviceModule(ModuleType):
    """``torch.cpu`` plus the ``torch.cuda`` functions verl calls on its device module.

    Cache and IPC calls do nothing; the memory counters read 0 (verl logs them as ``actor/perf/*memory*``;
    ``actor/perf/cpu_memory_used_gb`` is the real figure), and ``mem_get_info`` reports the machine's memory.
    """

    def __init__(self):
        super().__init__(f"{__name__}.device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        return None

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"


_DEVICE = _CpuDeviceModule()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl platform for training and rollout on the CPU."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        # verl passes this to .to(), torch.device() and tensor factories, where an int would mean an accelerator.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


_init_process_group = torch.distributed.init_process_group


@functools.wraps(_init_process_group)
def _init_process_group_on_cpu(*args: Any, **kwargs: Any) -> Any:
    # verl asks for backend f"cpu:gloo,{device}:{backend}", which on the CPU names "cpu" twice; torch refuses that.
    if kwargs.get("backend") == "cpu:gloo,cpu:gloo":
        kwargs["backend"] = "cpu:gloo"
    return _init_process_group(*args, **kwargs)


torch.distributed.init_process_group = _init_process_group_on_cpu


def keep_vllm_linear_weights_reloadable(utils: ModuleType) -> None:
    """Make vLLM's CPU build compute every 2-D linear weight with torch's linear and keep the weight.

    Why: where oneDNN, AMX (SGL) or zentorch is usable, vLLM packs each weight into its kernel at load time and,
    for linear layers, replaces ``layer.weight`` with an empty Parameter (``dispatch_cpu_unquantized_gemm``,
    ``remove_weight=True`` in ``vllm/model_executor/layers/linear.py``); verl's weight sync then calls
    ``load_weights`` every step and finds no ``weight_loader`` ("'Parameter' object has no attribute
    'weight_loader'"). torch's linear reads ``layer.weight`` at every call, so a reload is what generation uses,
    whichever kernels the CPU has. Other weights (3-D MoE experts, convolutions) keep vLLM's own dispatch.
    """
    vllm_dispatch = utils.dispatch_cpu_unquantized_gemm

    @functools.wraps(vllm_dispatch)
    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return vllm_dispatch(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    utils.dispatch_cpu_unquantized_gemm = dispatch


# A CPU step's rollouts finish in a fraction of a second; see poll_replay_buffer_often.
REPLAY_BUFFER_POLL_S = 0.1


def poll_replay_buffer_often(replay_buffer: ModuleType) -> None:
    """The V1 trainer's replay buffer looks for finished rollouts every ``poll_interval`` seconds, 2.0 in verl
    0.9.1 and no config key (``verl/trainer/ppo/v1/replay_buffer.py:144``): on the CPU that sleep was 80% of a
    training step. Only the cadence of the look changes."""
    verl_init = replay_buffer.ReplayBuffer.__init__

    @functools.wraps(verl_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        verl_init(self, *args, **kwargs)
        self.poll_interval = min(self.poll_interval, REPLAY_BUFFER_POLL_S)

    replay_buffer.ReplayBuffer.__init__ = __init__


# Where the run's torch.distributed rendezvous port is looked for (see rendezvous_outside_ephemeral_ports).
RENDEZVOUS_PORTS = (20000, 32000)
RENDEZVOUS_SPAN = 2000


def rendezvous_outside_ephemeral_ports(base: ModuleType) -> None:
    """verl picks each worker group's rendezvous port (torch.distributed's TCPStore) by binding port 0, closing it, and
    binding it again later in rank 0: the kernel gives port 0 from the ephemeral range, from which it also gives every
    outgoing connection its local port, so on a machine running other Ray clusters (the test suite's two workers) a
    connection took the port in between (EADDRINUSE, the run dead before its first step). verl's own
    ``master_port_range`` (no config key in verl 0.9.1) moves the search below the ephemeral range (32768 and up on
    Linux) and above Ray's worker ports (10002-19999), from a random start, so that two runs rarely look at the same
    ports."""
    verl_get = base.RayWorkerGroup._get_master_addr_port

    @functools.wraps(verl_get)
    def _get_master_addr_port(self: Any, pg: Any, bundle_index: int = 0, master_port_range: Any = None) -> Any:
        if master_port_range is None:
            start = random.randrange(*RENDEZVOUS_PORTS)
            master_port_range = [start, start + RENDEZVOUS_SPAN]
        return verl_get(self, pg, bundle_index=bundle_index, master_port_range=master_port_range)

    base.RayWorkerGroup._get_master_addr_port = _get_master_addr_port


# vLLM loads models in its worker processes, which import verl (and so this module) through verl's worker
# extension; patching on import reaches them without importing vLLM or the trainer into every process of the run.
after_import("vllm.model_executor.layers.utils", keep_vllm_linear_weights_reloadable)
after_import("verl.trainer.ppo.v1.replay_buffer", poll_replay_buffer_often)
after_import("verl.single_controller.ray.base", rendezvous_outside_ephemeral_ports)

if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu" and platform_manager._current_platform is not None:
    # Something resolved the platform while verl was importing, before this module registered "cpu".
    platform_manager.set_platform(PlatformCPU())
