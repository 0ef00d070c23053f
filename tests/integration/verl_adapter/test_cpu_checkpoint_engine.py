"""gdpo-verl's CPU checkpoint engine (``cpu_tcp``), the weight sync of the CPU runs of verl's trainers with rollout apart
from training, driven as verl's CheckpointEngineManager drives a backend: prepare on every worker, build_topology,
init_process_group, send on the actor side while every rollout worker receives, finalize. Here the workers are
engines in one process; tests/e2e/test_trainers.py runs it between Ray actors in real training runs."""

import asyncio

import pytest
import torch

import verl  # noqa: F401  (loads the entry point)
from verl.checkpoint_engine.base import CheckpointEngineRegistry

from gdpo_verl.verl_adapter.for_cpu_run.cpu_checkpoint_engine import BACKEND, METRICS, CpuTcpCheckpointEngine


def engines(actors, rollouts, bucket_size, **kwargs):
    """As verl makes them: the actor worker passes is_master (rank 0 or not), the rollout side leaves it unset."""
    actor = [CheckpointEngineRegistry.new(BACKEND, bucket_size=bucket_size, is_master=rank == 0, **kwargs)
             for rank in range(actors)]
    return actor, [CheckpointEngineRegistry.new(BACKEND, bucket_size=bucket_size, **kwargs) for _ in range(rollouts)]


def connect(actor, rollout):
    """What CheckpointEngineManager.build_process_group does before each weight update."""
    metadata = [engine.prepare() for engine in actor + rollout]
    actor_kwargs, rollout_kwargs = CpuTcpCheckpointEngine.build_topology(len(actor), len(rollout), metadata)
    for group, kwargs_lists in ((actor, actor_kwargs), (rollout, rollout_kwargs)):
        for rank, engine in enumerate(group):
            engine.init_process_group(**{key: values[rank] for key, values in kwargs_lists.items()})


def group(actors, rollouts, bucket_size, **kwargs):
    actor, rollout = engines(actors, rollouts, bucket_size, **kwargs)
    connect(actor, rollout)
    return actor, rollout


def sync(actor, rollout, weights):
    async def both():
        return await asyncio.gather(*(engine.send_weights(iter(weights)) for engine in actor),
                                    *(received(engine) for engine in rollout))

    return asyncio.run(both())


async def received(engine):
    return [(name, tensor) async for name, tensor in engine.receive_weights()]


def test_every_rollout_worker_receives_every_weight_bit_for_bit_in_any_dtype():
    weights = [(f"layer{i}.weight", torch.randn(3 + i, 7).to(dtype))
               for i, dtype in enumerate([torch.bfloat16, torch.float32, torch.float16, torch.bfloat16, torch.float64])]
    actor, rollout = group(2, 3, bucket_size=200)  # buckets smaller than most tensors: one tensor per message

    sent, idle, *got = sync(actor, rollout, weights)
    for engine in actor + rollout:
        engine.finalize()
    for copy in got:
        assert [name for name, _ in copy] == [name for name, _ in weights]
        for (_, tensor), (_, original) in zip(copy, weights):
            assert tensor.dtype == original.dtype and torch.equal(tensor, original)
    assert sent[f"{METRICS}/tensors"] == len(weights) and sent[f"{METRICS}/receivers"] == 3
    assert sent[f"{METRICS}/megabytes"] == pytest.approx(sum(w.nbytes for _, w in weights) / 2**20)
    assert idle == {}  # an actor rank other than 0 walks the weights (collective in FSDP) and sends nothing


def test_a_receiver_whose_sender_never_sends_stops_with_an_error_naming_it():
    actor, rollout = group(1, 1, bucket_size=1 << 20, timeout_s=0.5)
    with pytest.raises(RuntimeError, match=r"cpu_tcp: no weights from actor rank 0 on .* for 0\.5 s"):
        asyncio.run(received(rollout[0]))
    for engine in actor + rollout:
        engine.finalize()


def test_a_sender_whose_receiver_died_stops_with_an_error_and_the_next_update_works():
    weights = [("w", torch.ones(4))]
    actor, rollout = group(1, 1, bucket_size=1 << 20, timeout_s=0.5)
    rollout[0].finalize()  # the rollout worker's process died: its socket is gone
    with pytest.raises(RuntimeError, match=r"cpu_tcp: .*rollout worker.*0\.5 s; (it|they) stopped or"):
        asyncio.run(actor[0].send_weights(iter(weights)))
    # verl prepares every engine again for the next update (a new rollout worker in its place): nothing of the
    # failed one is left to take its buckets
    connect(actor, rollout)
    sent, got = sync(actor, rollout, weights)
    assert sent[f"{METRICS}/receivers"] == 1 and torch.equal(got[0][1], weights[0][1])


def test_a_bucket_size_of_zero_is_refused():
    with pytest.raises(ValueError, match="update_weights_bucket_megabytes must be positive"):
        CpuTcpCheckpointEngine(bucket_size=0)
