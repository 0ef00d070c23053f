"""What the package writes to files and reads back, above the math: ``steps``, the per-step records of
``algorithm.gdpo.dump_dir`` (their format, writer and readers, and the ``gdpo/`` metrics of a recorded step) and of
verl's rollout dumps; ``jsonl``, JSON Lines reading that names the line and refuses a FIFO or a device (the records,
rollouts, generations and data files all read through it)."""
