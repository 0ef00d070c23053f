"""gdpo-verl on a real multi-node Ray cluster (two raylets on this machine, token authentication on): "gdpo"
resolves to this plugin on every node; verl's V1 advantage stage run on a node other than the driver's reads
the components from TransferQueue and gives the driver's in-process result; a node that cannot import
gdpo-verl is refused by name before training, and so is one whose check process dies. multi_node_run.py
does it in a process of its own (its own Ray, away from the other tests' local one)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gdpo_verl.verl_adapter.for_tools.environment import OURS

SCRIPT = Path(__file__).with_name("multi_node_run.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    found = tmp_path_factory.mktemp("multi_node") / "results.jsonl"
    done = subprocess.run([sys.executable, str(SCRIPT), str(found)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    merged = {}
    for line in found.read_text().splitlines():
        merged.update(json.loads(line))
    return merged


def test_the_cluster_has_two_nodes_with_token_authentication(results):
    assert results["auth_mode"] == "token" and results["nodes"] == 2


def test_gdpo_resolves_to_the_plugin_on_every_node(results):
    assert len(results["resolved"]) == 2
    assert all(resolved == OURS for _, resolved in results["resolved"])


def test_the_v1_stage_on_another_node_matches_the_in_process_result(results):
    assert results["stage_node"] == results["worker_node"] != results["driver_node"]
    assert results["max_difference"] == 0.0
    assert "gdpo/correct/mean" in results["gdpo_metrics"]


def test_a_node_without_the_plugin_is_refused_by_name_with_the_fix(results):
    refused = results["refused"]
    assert refused is not None, "the cluster with a node lacking gdpo-verl was accepted"
    assert refused.startswith("gdpo-verl is not active on 1 of 3 Ray nodes")
    assert f"(id {results['bare_node'][:12]})" in refused
    assert "verl's built-in, not gdpo-verl" in refused
    assert "Install gdpo-verl in the Python environment Ray runs on each such node" in refused


def test_main_ppo_on_that_cluster_stops_before_its_task_runner_starts(results):
    assert results["main_ppo_connected"] and results["main_ppo_code"] != 0
    assert results["main_ppo_refused"] is not None, f"main_ppo did not run the node check:\n{results['main_ppo_tail']}"
    assert f"(id {results['bare_node'][:12]})" in results["main_ppo_refused"]
    assert not results["task_runner_started"], results["main_ppo_tail"]


def test_a_node_whose_worker_dies_in_the_check_is_named_with_what_happened(results):
    refused = results["crashed_refused"]
    assert refused is not None, "the cluster with a node whose check died was accepted"
    assert refused.startswith("gdpo-verl is not active on 1 of 3 Ray nodes")
    assert f"(id {results['crashing_node'][:12]}): error: " in refused
