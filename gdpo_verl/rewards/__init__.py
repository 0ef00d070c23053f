"""Reward-side pieces: the reward manager registered as "gdpo_verl" (``manager``)."""
