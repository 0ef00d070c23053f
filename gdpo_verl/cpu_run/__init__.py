"""The CPU training run's harness (``scripts/train_cpu.sh`` and the learning study), none of it verl's: ``supervise``,
the run's supervisor; ``tiny_model``, the tiny model and tokenizer built on the spot; ``check_run``, the run's
verdict, from its outputs. What lets verl itself train on a CPU speaks verl, so it lives in
``gdpo_verl.verl_adapter.for_cpu_run`` (``cpu_platform``, ``cpu_checkpoint_engine``). Nothing here is used on a GPU
cluster.
"""
