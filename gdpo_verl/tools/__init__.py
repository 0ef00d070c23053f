"""The ``gdpo-verl`` command and what it runs: ``cli`` (the parser), ``demo``, ``doctor``, ``curves`` and
``plots`` (figures of records and of verl's logs), ``evaluation`` (scoring for ``scripts/evaluate.py``).
verl itself is reached only through ``gdpo_verl.verl_adapter``.
"""
