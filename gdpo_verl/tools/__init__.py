"""The ``gdpo-verl`` command and what it runs: ``cli`` (the parser), ``demo``, ``doctor``, ``curves`` and
``plots`` (figures of records and of verl's logs), ``evaluation`` (scoring for ``scripts/evaluate.py``),
``data_files`` (the data scripts' input files), ``tiny_model`` and ``check_run`` (the CPU training run's model and
its verdict).
verl itself is reached only through ``gdpo_verl.verl_adapter``.
"""
