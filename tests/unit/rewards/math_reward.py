"""The one ``MathLengthReward`` (one checker pool) the math reward's tests share, as one reward manager holds one for
its lifetime; a test module that scores with it uses the ``math_checker_processes`` fixture (conftest.py)."""

from gdpo_verl.rewards.math_length import MathLengthReward

REWARD = MathLengthReward()
