"""Fixtures for every test, and the markers of each place (pyproject.toml declares the markers; scripts/test.sh
chooses its tiers by them)."""

import logging
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Where each marker applies: a folder or a file under tests/. cpu_training is set in each training run's module.
PLACES = {
    "verl": ("integration/", "e2e/"),
    "bfcl": ("bfcl/",),
    "sandbox": ("sandbox/", "unit/rewards/test_coding.py"),
    "timing": ("sandbox/test_own_time.py",),
}
# Files in those places that take none of their markers: read as text, or the quick tier's sandbox smoke test.
UNMARKED = ("sandbox/test_guarantee_table.py", "sandbox/test_smoke.py")


def markers_of(place: str) -> list[str]:
    """The markers of a test file at ``place`` (its path under tests/)."""
    if place in UNMARKED:
        return []
    return [marker for marker, places in PLACES.items() if any(place.startswith(where) for where in places)]


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker in markers_of(Path(item.fspath).resolve().relative_to(TESTS).as_posix()):
            item.add_marker(marker)


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
