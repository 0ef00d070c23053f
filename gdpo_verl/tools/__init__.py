"""The ``gdpo-verl`` command and what it runs: ``cli`` (the parser), ``demo`` (with ``batches``: verl's advantage
stage on a rollout batch), ``doctor`` (with ``environment``: the checks of verl, Ray and vLLM), ``curves`` and
``plots`` (figures of records and of verl's logs).
"""
