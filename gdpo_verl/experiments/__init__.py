"""The library the experiment scripts share (``scripts/prepare_*.py``, ``scripts/evaluate*.py``): ``data_files``
(the data scripts' JSON, JSON Lines and parquet input), ``evaluation`` (scoring and the tables of the evaluate
scripts), ``bfcl`` (BFCL-v3's prompts and BFCL's own checker), ``bfcl_multi_turn`` (the multi-turn questions
played turn by turn, beside vLLM) and ``bfcl_execution`` (their calls run and judged by BFCL's code, in BFCL's
environment). Generation with vLLM is ``gdpo_verl.verl_adapter.for_experiments.generation``.
"""
