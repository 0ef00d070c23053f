"""Fixtures for every test."""

import logging

import pytest


@pytest.fixture(autouse=True)
def gdpo_verl_log_reaches_caplog():
    """Where verl is imported, gdpo-verl's plugin gives the "gdpo_verl" logger a stderr handler of its own and
    stops it propagating to the root logger (gdpo_verl/verl_adapter/plugin.py); pytest's caplog listens on the
    root logger, so it propagates during each test."""
    logger = logging.getLogger("gdpo_verl")
    propagate = logger.propagate
    logger.propagate = True
    yield
    logger.propagate = propagate
