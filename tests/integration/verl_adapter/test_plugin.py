"""Registration through verl's plugin entry point, in fresh processes and in Ray workers."""

import logging
import os
import subprocess
import sys

import pytest
import ray

import verl  # noqa: F401
from verl.trainer.ppo import core_algos

from gdpo_verl.rewards.coding import check_node
from gdpo_verl.verl_adapter import cluster, plugin
from gdpo_verl.verl_adapter import compute_gdpo_advantage

RESOLVE = (
    "import verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
    "print('resolved:', fn.__module__ + '.' + fn.__qualname__)\n"
)
OURS = "gdpo_verl.verl_adapter.estimator.compute_gdpo_advantage"


def resolve_gdpo_in_this_process():
    from verl.trainer.ppo import core_algos as algos

    fn = algos.get_adv_estimator_fn("gdpo")
    return f"{fn.__module__}.{fn.__qualname__}"


def test_plain_import_verl_in_a_fresh_process_resolves_gdpo_to_this_plugin():
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert f"resolved: {OURS}" in result.stdout


def test_disabling_external_plugins_leaves_verl_builtin():
    # Documents the one way around the plugin: VERL_USE_EXTERNAL_PLUGINS=none.
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"}
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    assert "resolved: verl.trainer.ppo.core_algos.compute_gdpo_outcome_advantage" in result.stdout


HOOKS = (
    "import sys, verl\n"
    "print('trainer modules imported by import verl:', 'verl.trainer.ppo.v1.trainer_base' in sys.modules)\n"
    "from verl.utils import config\n"
    "from verl.trainer.ppo.v1 import trainer_base\n"
    "from verl.trainer.ppo import ray_trainer\n"
    "from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls\n"
    "wrapped = [hasattr(f, '__gdpo_verl_wraps__') for f in (config.validate_config, "
    "trainer_base.PPOTrainer._compute_advantage, ray_trainer.compute_data_metrics, ray_trainer.compute_advantage, "
    "ray_trainer.RayPPOTrainer.fit)]\n"
    "print('wrapped:', wrapped)\n"
    "print('manager:', get_reward_manager_cls('gdpo_verl').__module__)\n"
)


def test_trainer_hooks_are_installed_when_verl_imports_the_trainer_modules():
    result = subprocess.run([sys.executable, "-c", HOOKS], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    # import verl alone stays light: the trainer modules are wrapped when they are first imported.
    assert "trainer modules imported by import verl: False" in result.stdout
    assert "wrapped: [True, True, True, True, True]" in result.stdout
    assert "manager: gdpo_verl.verl_adapter.reward_manager" in result.stdout


@pytest.fixture(scope="module")
def ray_cluster():
    # Loopback only: the test cluster must not bind or reach the machine's network address.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


def test_ray_task_and_actor_resolve_gdpo_to_this_plugin(ray_cluster):
    @ray.remote
    def task():
        return resolve_gdpo_in_this_process()

    @ray.remote
    class Actor:
        def resolve(self):
            return resolve_gdpo_in_this_process()

    actor = Actor.remote()
    assert ray.get(task.remote(), timeout=180) == OURS
    assert ray.get(actor.resolve.remote(), timeout=180) == OURS


def test_the_node_check_tells_a_node_that_did_not_answer_from_one_without_the_plugin(ray_cluster, monkeypatch):
    # Before: a node whose check had not answered (a busy machine: the probe starts a Python worker and imports
    # verl) was reported as "gdpo-verl is not active ... Install gdpo-verl", though it was installed.
    assert [node.ok for node in cluster.require_plugin_on_every_node(timeout_s=300)] == [True]
    with pytest.raises(RuntimeError) as raised:
        cluster.require_plugin_on_every_node(timeout_s=0)  # ray.wait returns at once (0.001 s was once beaten)
    message = str(raised.value)
    assert "1 of 1 Ray nodes did not answer gdpo-verl's check in time" in message
    assert "not a sign that gdpo-verl is missing" in message and "GDPO_VERL_NODE_CHECK_TIMEOUT_S" in message
    assert "is not active" not in message and "Install gdpo-verl" not in message
    for bad in ("nan", "inf", "-1", "soon"):
        monkeypatch.setenv("GDPO_VERL_NODE_CHECK_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match=f"GDPO_VERL_NODE_CHECK_TIMEOUT_S='{bad}' is not a number of seconds"):
            cluster.require_plugin_on_every_node()


def test_every_node_starts_the_coding_sandbox_or_is_named_with_its_problem_and_fix(ray_cluster):
    # what main_ppo runs on every node before verl's TaskRunner starts, when the run trains on the coding reward
    checked = cluster.require_reward_on_every_node(check_node, {"wall_s": 5})
    assert [node.resolved for node in checked] == [cluster.SANDBOX_OK]
    with pytest.raises(RuntimeError) as raised:
        cluster.require_reward_on_every_node(check_node, {"python": "/no/python"})
    message = str(raised.value)
    assert message.startswith("the sandbox of the reward in gdpo_verl.rewards.coding cannot run on 1 of 1 Ray nodes")
    assert "SandboxUnavailable: sandbox on node " in message and "the interpreter /no/python is not an executable" in message


def test_a_check_right_after_a_timed_out_one_is_not_failed_by_the_worker_ray_kills_for_it(ray_cluster):
    # Before: the force-cancel of a probe that did not answer in time could end the worker Ray then handed the next
    # check's probe (1 in 15 here), and that check named the node as failing ("WorkerCrashedError").
    for _ in range(10):
        with pytest.raises(RuntimeError, match="did not answer"):
            cluster.require_plugin_on_every_node(timeout_s=0)  # ray.wait returns at once: 0.001 s was once beaten
        checked = cluster.require_reward_on_every_node(check_node, {"wall_s": 5})
    assert [node.resolved for node in checked] == [cluster.SANDBOX_OK]


def test_a_probe_that_kills_its_worker_every_time_is_reported_with_rays_error(ray_cluster):
    def dies():
        os._exit(3)

    (node,) = cluster._answers_on_nodes(dies, 300)
    assert node.answered and node.resolved.startswith("error: WorkerCrashedError: The worker died unexpectedly")


@pytest.fixture
def restore_registry():
    yield
    core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] = compute_gdpo_advantage


def test_register_is_idempotent_and_logs_the_replacement_once(restore_registry, caplog):
    core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] = core_algos.compute_gdpo_outcome_advantage
    with caplog.at_level(logging.INFO, logger="gdpo_verl"):
        plugin.register()
        plugin.register()
    assert core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] is compute_gdpo_advantage
    replaced = [r for r in caplog.records if "replaced" in r.getMessage()]
    assert len(replaced) == 1
    assert "compute_gdpo_outcome_advantage" in replaced[0].getMessage()


def test_gdpo_verl_warnings_reach_stderr_in_any_verl_process():
    # verl's TaskRunner prints nothing through the root logger; the plugin's own handler does.
    code = (
        "import logging\n"
        "import verl\n"
        "logging.getLogger().handlers.clear()\n"
        "logging.getLogger().setLevel(logging.CRITICAL)\n"
        "logging.getLogger('gdpo_verl').warning('a gdpo-verl warning')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("a gdpo-verl warning") == 1


def test_an_unknown_logging_level_refuses_gdpo_instead_of_leaving_verls_builtin():
    # verl passes over a plugin that fails to load: a typo in GDPO_VERL_LOGGING_LEVEL must not do that silently.
    script = RESOLVE + (
        "try:\n"
        "    fn(token_level_rewards=None, response_mask=None)\n"
        "except RuntimeError as exc:\n"
        "    print('refused:', exc)\n"
    )
    env = {**os.environ, "GDPO_VERL_LOGGING_LEVEL": "verbose"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    assert "GDPO_VERL_LOGGING_LEVEL='verbose' is not a logging level" in result.stderr
    assert "refused: algorithm.adv_estimator=gdpo: gdpo-verl failed to register" in result.stdout
    # a level in lower case is a level
    env["GDPO_VERL_LOGGING_LEVEL"] = "info"
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr
    assert f"resolved: {OURS}" in result.stdout
