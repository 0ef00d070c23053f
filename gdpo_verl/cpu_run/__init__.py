"""The CPU training run's harness (``scripts/train_cpu.sh`` and the learning study): what lets verl train on a
machine without a GPU, and what watches and judges such a run. Nothing here is used on a GPU cluster.

``cpu_platform``: the CPU platform verl loads in every process of the run (``VERL_USE_EXTERNAL_MODULES``).
``cpu_checkpoint_engine``: the ``cpu_tcp`` weight sync of the trainers with rollout apart from training.
``supervise``: the run's supervisor (imports nothing of verl). ``tiny_model``: the tiny model and tokenizer built
on the spot. ``check_run``: the run's verdict, from its outputs.
"""
