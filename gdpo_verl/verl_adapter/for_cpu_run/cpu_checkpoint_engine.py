"""A verl checkpoint engine that moves weights from the trainer to separate rollout servers over TCP, for CPU runs.

verl's trainers that keep rollout apart from training (``trainer.v1.trainer_mode=separate_async``, the experimental
``one_step_off_policy`` and ``fully_async_policy``) send the actor's weights to their rollout servers through a
checkpoint engine. verl 0.9.1 has none that runs without an accelerator: ``naive`` works only where actor and rollout
share a process (``trainer_separate_async.py`` refuses it), ``nccl``/``hccl`` need CUDA or Ascend devices,
``nixl`` and ``delta_sharded`` import cupy, ``mooncake`` and ``kimi_ckpt_engine`` need their RDMA libraries.

This one, registered as ``cpu_tcp`` through verl's own plugin setting
(``actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=``
``gdpo_verl.verl_adapter.for_cpu_run.cpu_checkpoint_engine``),
is what the CPU runs of those trainers use (``scripts/cpu_main_ppo.sh`` with ``TRAINER=...``). Each weight update:
every rollout worker binds a ZeroMQ PULL socket, and so does actor rank 0 for their acknowledgements (``prepare``);
actor rank 0 connects a PUSH socket to each worker and each worker one back (``init_process_group``); actor rank 0
sends the weights in buckets of ``update_weights_bucket_megabytes`` (``torch.save``d, so any dtype) and returns once
every worker has acknowledged the last; the other actor ranks walk the weight generator (producing a weight is
collective over the actor group). Either side that hears nothing from the other for ``timeout_s`` (default 600;
``checkpoint_engine.engine_kwargs.cpu_tcp.timeout_s``) stops with an error naming it. It is plain TCP: for GPU
clusters use verl's ``nccl`` backend.
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
    """Actor rank 0 pushes the weights to every rollout worker over TCP (ZeroMQ PUSH/PULL), bucket by bucket, and
    returns once each has acknowledged the last bucket.

    Args:
        bucket_size: bytes of weights per message.
        is_master: set by verl's actor worker (True on actor rank 0, False on the other actor ranks); left unset
            (None) by verl's rollout-side CheckpointEngineWorker.
        timeout_s: how long a receiver waits for the next bucket, and the sender for a receiver to take a bucket or
            acknowledge the last, before it stops with an error naming the other side.
    """

    def __init__(self, bucket_size: int, is_master: bool | None = None, timeout_s: float = 600.0) -> None:
        if bucket_size <= 0:
            raise ValueError(f"{BACKEND}: update_weights_bucket_megabytes must be positive, got {bucket_size} bytes")
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.timeout_s = float(timeout_s)
        self.context = zmq.Context.instance()
        self.rank: int | None = None
        self.pull: Any = None  # a receiver's buckets, or the sender's acknowledgements
        self.pushes: list[Any] = []  # the sender's, one per receiver; a receiver's one back to the sender
        self.receivers: list[str] = []
        self.sender = "actor rank 0"

    def _bind_pull(self, ip: str) -> int:
        self.pull = self.context.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        if is_valid_ipv6_address(ip):
            self.pull.setsockopt(zmq.IPV6, 1)
        return self.pull.bind_to_random_port(_endpoint(ip, "*").rsplit(":", 1)[0])

    def _connect_push(self, address: str) -> None:
        push = self.context.socket(zmq.PUSH)
        if address.startswith("tcp://["):
            push.setsockopt(zmq.IPV6, 1)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.IMMEDIATE, 1)  # nothing is queued for a peer that is not (or no longer) connected
        push.connect(address)
        self.pushes.append(push)

    # ---------------------------------------------------------------- topology, once per weight update
    def prepare(self) -> dict[str, Any]:
        """The sender (actor rank 0) binds the socket for the acknowledgements, each receiver (a rollout worker) the
        one for the buckets, and reports its address; the other actor ranks take no part. What a failed update left
        open is closed first."""
        self.finalize()
        ip = ray.util.get_node_ip_address().strip("[]")
        if self.is_master is False:
            return {"role": "idle"}
        return {"role": "sender" if self.is_master else "receiver", "ip": ip, "port": self._bind_pull(ip)}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]):
        actor_metadata, rollout_metadata = metadata[:actor_wg_world_size], metadata[actor_wg_world_size:]
        if not actor_metadata or actor_metadata[0].get("role") != "sender":
            raise RuntimeError(f"{BACKEND}: actor rank 0 is not the sender (is_master unset on it)")
        receivers = [_endpoint(item["ip"], item["port"]) for item in rollout_metadata]
        sender = actor_metadata[0]
        name = f"actor rank 0 on {sender['ip']}"
        actor_kwargs = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),
            "peers": [receivers] + [[]] * (actor_wg_world_size - 1),
            "sender": [name] * actor_wg_world_size,
        }
        rollout_kwargs = {
            "rank": list(range(1, rollout_world_size + 1)),
            "peers": [[_endpoint(sender["ip"], sender["port"])]] * rollout_world_size,
            "sender": [name] * rollout_world_size,
        }
        return actor_kwargs, rollout_kwargs

    def init_process_group(self, rank: int, peers: list[str], sender: str) -> None:
        """The sender connects to every receiver, each receiver back to the sender (for its acknowledgement)."""
        self.rank, self.sender = rank, sender
        self.receivers = list(peers) if rank == 0 else []
        for address in peers:
            self._connect_push(address)

    def finalize(self) -> None:
        for socket in [*self.pushes, self.pull]:
            if socket is not None:
                socket.close(linger=0)
        self.pushes, self.pull, self.rank, self.receivers = [], None, None, []

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
        await loop.run_in_executor(None, self._acknowledged)
        # verl logs what the sender returns with the step's metrics
        return {f"{METRICS}/tensors": count, f"{METRICS}/megabytes": total / 2**20,
                f"{METRICS}/receivers": len(self.pushes), f"{METRICS}/seconds": time.perf_counter() - start}

    def _send(self, bucket: list[tuple[str, torch.Tensor]], last: bool) -> None:
        buffer = io.BytesIO()
        torch.save({"weights": bucket, "last": last}, buffer)
        payload = buffer.getvalue()
        for push, receiver in zip(self.pushes, self.receivers):
            if not push.poll(int(self.timeout_s * 1000), zmq.POLLOUT):
                raise RuntimeError(f"{BACKEND}: the rollout worker at {receiver} took no weights for "
                                   f"{self.timeout_s:g} s; it stopped or its process died")
            push.send(payload, copy=False)

    def _acknowledged(self) -> None:
        """Every receiver said it has the last bucket."""
        for count in range(len(self.receivers)):
            if not self.pull.poll(int(self.timeout_s * 1000)):
                raise RuntimeError(f"{BACKEND}: {len(self.receivers) - count} of the {len(self.receivers)} rollout "
                                   f"workers did not confirm the weights within {self.timeout_s:g} s; they stopped "
                                   "or their processes died")
            self.pull.recv()

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
                await loop.run_in_executor(None, self._acknowledge)
                return

    def _acknowledge(self) -> None:
        """Tell the sender, which waits for every receiver's word, that the last bucket is here."""
        if not self.pushes[0].poll(int(self.timeout_s * 1000), zmq.POLLOUT):
            raise RuntimeError(f"{BACKEND}: could not confirm the weights to {self.sender} for {self.timeout_s:g} s; "
                               "the actor stopped or its process died")
        self.pushes[0].send(b"received")

    def _receive(self) -> dict:
        if not self.pull.poll(int(self.timeout_s * 1000)):
            raise RuntimeError(f"{BACKEND}: no weights from {self.sender} for {self.timeout_s:g} s; the actor stopped "
                               "or its process died")
        return torch.load(io.BytesIO(self.pull.recv(copy=True)), weights_only=True)
