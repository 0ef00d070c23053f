"""verl code the experiment scripts' library uses (``gdpo_verl.experiments``): ``generation``, vLLM generation."""
