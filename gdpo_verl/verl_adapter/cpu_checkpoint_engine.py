"""A verl checkpoint engine that moves weights from the trainer to separate rollout servers over TCP, for CPU runs.

verl's trainers that keep rollout apart from training (``trainer.v1.trainer_mode=separate_async``, the experimental
``one_step_off_policy`` and ``fully_async_policy``) send the actor's weights to their rollout servers through a
checkpoint engine. verl 0.9.1 has none that runs without an accelerator: ``naive`` works only where actor and rollout
share a process (``trainer_separate_async.py`` refuses it), ``nccl``/``hccl`` need CUDA or Ascend devices,
``nixl`` and ``delta_sharded`` import cupy, ``mooncake`` and ``kimi_ckpt_engine`` need their RDMA libraries.

This one, registered as ``cpu_tcp`` through verl's own plugin setting
(``actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=gdpo_verl.verl_adapter.cpu_checkpoint_engine``),
is what the CPU runs of those trainers use (``scripts/cpu_main_ppo.sh`` with ``TRAINER=...``). Each weight update:
every rollout worker binds a ZeroMQ PULL socket (``prepare``), actor rank 0 connects a PUSH socket to each
(``init_process_group``) and sends the weights in buckets of ``update_weights_bucket_megabytes`` (``torch.save``d, so
any dtype), the other actor ranks walk the weight generator (producing a weight is collective over the actor
group). A receiver that hears nothing for ``timeout_s`` (default 600) stops with an error naming the sender. It is
plain TCP: for GPU clusters use verl's ``nccl`` backend.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncGenerator, Generator
from typing import Any

import ray
import torch
import zmq
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry
from verl.utils.net_utils import is_valid_ipv6_address

BACKEND = "cpu_tcp"
METRICS = f"checkpoint_engine/{BACKEND}"  # what each weight update sent, with the step's metrics


def _endpoint(ip: str, port: int | str) -> str:
    return f"tcp://[{ip}]:{port}" if is_valid_ipv6_address(ip) else f"tcp://{ip}:{port}"


@CheckpointEngineRegistry.register(BACKEND)
class CpuTcpCheckpointEngine(CheckpointEngine):
    """Actor rank 0 pushes the weights to every rollout worker over TCP (ZeroMQ PUSH/PULL), bucket by bucket.

    Args:
        bucket_size: bytes of weights per message.
        is_master: actor rank 0 (set by verl's actor worker).
        timeout_s: how long a receiver waits for the next bucket before it stops with an error.
    """

    def __init__(self, bucket_size: int, is_master: bool = False, timeout_s: float = 600.0) -> None:
        if bucket_size <= 0:
            raise ValueError(f"{BACKEND}: update_weights_bucket_megabytes must be positive, got {bucket_size} bytes")
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.timeout_s = float(timeout_s)
        self.context = zmq.Context.instance()
        self.rank: int | None = None
        self.pull: Any = None
        self.pushes: list[Any] = []
        self.sender = "actor rank 0"

    # ---------------------------------------------------------------- topology, once per weight update
    def prepare(self) -> dict[str, Any]:
        """A receiver (a rollout worker) binds its PULL socket here and reports its address; actor workers report
        whether they are rank 0."""
        ip = ray.util.get_node_ip_address().strip("[]")
        if self.is_master:
            return {"master": True, "ip": ip}
        self.pull = self.context.socket(zmq.PULL)
        if is_valid_ipv6_address(ip):
            self.pull.setsockopt(zmq.IPV6, 1)
        port = self.pull.bind_to_random_port(_endpoint(ip, "*").rsplit(":", 1)[0])
        return {"master": False, "ip": ip, "port": port}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]):
        actor_metadata, rollout_metadata = metadata[:actor_wg_world_size], metadata[actor_wg_world_size:]
        if not actor_metadata or not actor_metadata[0].get("master"):
            raise RuntimeError(f"{BACKEND}: actor rank 0 is not the sender (is_master unset on it)")
        receivers = [_endpoint(item["ip"], item["port"]) for item in rollout_metadata]
        sender = f"actor rank 0 on {actor_metadata[0]['ip']}"
        actor_kwargs = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),
            "receivers": [receivers] + [[]] * (actor_wg_world_size - 1),
            "sender": [sender] * actor_wg_world_size,
        }
        rollout_kwargs = {
            "rank": list(range(1, rollout_world_size + 1)),
            "receivers": [[]] * rollout_world_size,
            "sender": [sender] * rollout_world_size,
        }
        return actor_kwargs, rollout_kwargs

    def init_process_group(self, rank: int, receivers: list[str], sender: str) -> None:
        self.rank, self.sender = rank, sender
        for address in receivers:
            push = self.context.socket(zmq.PUSH)
            if address.startswith("tcp://["):
                push.setsockopt(zmq.IPV6, 1)
            push.setsockopt(zmq.LINGER, 0)
            push.connect(address)
            self.pushes.append(push)

    def finalize(self) -> None:
        for socket in [*self.pushes, self.pull]:
            if socket is not None:
                socket.close(linger=0)
        self.pushes, self.pull, self.rank = [], None, None

    # ---------------------------------------------------------------- weights
    @torch.no_grad()
    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                           global_steps: int | None = None) -> dict:
        if self.rank is None:
            raise RuntimeError(f"{BACKEND}: send_weights before init_process_group")
        if self.rank < 0:  # not the sender: producing each weight is still collective over the actor group
            for _ in weights:
                pass
            return {}
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        bucket: list[tuple[str, torch.Tensor]] = []
        size = total = count = 0
        for name, weight in weights:
            tensor = weight.detach().to("cpu").contiguous()
            if bucket and size + tensor.nbytes > self.bucket_size:
                await loop.run_in_executor(None, self._send, bucket, False)
                bucket, size = [], 0
            bucket.append((name, tensor.clone()))
            size += tensor.nbytes
            total += tensor.nbytes
            count += 1
        await loop.run_in_executor(None, self._send, bucket, True)
        # verl logs what the sender returns with the step's metrics
        return {f"{METRICS}/tensors": count, f"{METRICS}/megabytes": total / 2**20,
                f"{METRICS}/receivers": len(self.pushes), f"{METRICS}/seconds": time.perf_counter() - start}

    def _send(self, bucket: list[tuple[str, torch.Tensor]], last: bool) -> None:
        buffer = io.BytesIO()
        torch.save({"weights": bucket, "last": last}, buffer)
        payload = buffer.getvalue()
        for push in self.pushes:
            if not push.poll(int(self.timeout_s * 1000), zmq.POLLOUT):
                raise RuntimeError(f"{BACKEND}: a rollout worker took no weights for {self.timeout_s:g} s; "
                                   "it stopped or its process died")
            push.send(payload, copy=False)

    @torch.no_grad()
    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        if self.pull is None:
            raise RuntimeError(f"{BACKEND}: receive_weights before prepare")
        loop = asyncio.get_running_loop()
        while True:
            message = await loop.run_in_executor(None, self._receive)
            for name, tensor in message["weights"]:
                yield name, tensor
            if message["last"]:
                return

    def _receive(self) -> dict:
        if not self.pull.poll(int(self.timeout_s * 1000)):
            raise RuntimeError(f"{BACKEND}: no weights from {self.sender} for {self.timeout_s:g} s; the actor stopped "
                               "or its process died")
        return torch.load(io.BytesIO(self.pull.recv(copy=True)), weights_only=True)
