"""verl code the ``gdpo-verl`` command uses (``gdpo_verl.tools``): ``batches``, verl's advantage stage on a rollout
batch (the demo); ``environment``, the doctor's checks of verl, Ray and vLLM."""
