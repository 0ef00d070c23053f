"""Fixtures shared by the tests that need a real Ray cluster with TransferQueue (verl's V1 storage)."""

import pytest
import ray
import transfer_queue as tq
from omegaconf import OmegaConf


@pytest.fixture(scope="module")
def transfer_queue():
    """A local Ray cluster on loopback with a TransferQueue controller and one storage unit.

    TransferQueue's storage units ask Ray for one CPU each (verl's config starts 8), so one unit keeps
    the cluster within 4 logical CPUs on a small machine.
    """
    ray.init(address="local", num_cpus=4, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()
