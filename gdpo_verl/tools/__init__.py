"""The ``gdpo-verl`` command and what it runs: ``cli`` (the parser), ``demo``, ``doctor``, ``curves`` and ``plots``
(figures of records and of verl's logs). What they ask of verl goes through ``gdpo_verl.verl_adapter`` (``batches``
for the demo, ``environment`` for the doctor).
"""
