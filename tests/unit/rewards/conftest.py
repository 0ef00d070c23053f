"""Fixtures for the rewards' tests."""

import pytest

from tests.unit.rewards.math_reward import REWARD


@pytest.fixture(scope="session")
def math_checker_processes():
    """The shared math reward's checker processes, started as a training run's reward is by its first batch, and
    stopped after the last test."""
    REWARD.start()
    yield
    REWARD.close()
