"""recipes/cluster on a real local Ray cluster: head.sh on loopback, a job through submit.sh.

The cluster uses Ray 2.60's token authentication, as a real one does; the job checks that "gdpo" resolves
to this plugin inside it and that the recipe knobs set on the client reached it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ray_cluster import free_port, stop_cluster

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "recipes" / "cluster"

JOB = (
    "import os, verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
    "print('resolved in job:', fn.__module__ + '.' + fn.__qualname__)\n"
    "print('knobs in job:', os.environ.get('MODEL'), os.environ.get('NNODES'))\n"
)


def environment(**extra):
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}


@pytest.fixture(scope="module")
def head():
    ray_port, dashboard_port = free_port(), free_port()
    env = environment(HEAD_IP="127.0.0.1", RAY_PORT=str(ray_port), DASHBOARD_HOST="127.0.0.1",
                      DASHBOARD_PORT=str(dashboard_port), NUM_CPUS="2", NUM_GPUS="0")
    # the dashboard agent's HTTP port on a free one: its default (52365) may be taken by another Ray on this machine
    # (a CPU training run beside this test), and then the head takes no jobs
    agent = f"--dashboard-agent-listen-port={free_port()}"
    started = subprocess.run(["bash", str(CLUSTER / "head.sh"), agent], capture_output=True, text=True, env=env,
                             timeout=300)
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    assert f"RAY_ADDRESS=http://127.0.0.1:{dashboard_port}" in started.stdout
    yield f"http://127.0.0.1:{dashboard_port}"
    stop_cluster(ray_port)


def test_a_job_submitted_to_the_cluster_runs_with_the_plugin_active(head):
    env = environment(RAY_ADDRESS=head, WORKING_DIR="", MODEL="/models/tiny", NNODES="2")
    env.pop("RAY_AUTH_MODE", None)  # submit.sh must set token mode itself
    result = subprocess.run(
        ["bash", str(CLUSTER / "submit.sh"), sys.executable, "-c", JOB],
        capture_output=True, text=True, env=env, timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "resolved in job: gdpo_verl.verl_adapter.estimator.compute_gdpo_advantage" in output
    assert "knobs in job: /models/tiny 2" in output


def test_submit_without_arguments_or_with_a_missing_recipe_exits_2(head):
    env = environment(RAY_ADDRESS=head)
    usage = subprocess.run(["bash", str(CLUSTER / "submit.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert usage.returncode == 2 and "usage: submit.sh" in usage.stderr
    missing = subprocess.run(
        ["bash", str(CLUSTER / "submit.sh"), "recipes/none.sh"], capture_output=True, text=True, env=env, timeout=60
    )
    assert missing.returncode == 2 and "recipe recipes/none.sh not found" in missing.stderr


@pytest.mark.parametrize("script", ["head.sh", "worker.sh", "submit.sh", "slurm.sbatch", "node_ip.sh"])
def test_cluster_scripts_are_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(CLUSTER / script)], capture_output=True).returncode == 0


def test_worker_without_a_head_address_says_what_to_set():
    env = environment()
    env.pop("HEAD_ADDRESS", None)
    result = subprocess.run(["bash", str(CLUSTER / "worker.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0
    assert "set HEAD_ADDRESS" in result.stderr


def test_a_recipe_submitted_with_the_default_upload_passes_every_check_before_ray_in_the_job(head, tmp_path):
    # the checkout uploaded as the job's working directory (submit.sh's default), the recipe launched there with
    # CHECK=1: verl's validate_config, gdpo-verl's checks and the memory plan run in the job, which stops before Ray
    env = environment(RAY_ADDRESS=head, CHECK="1", GPUS_PER_NODE="4", CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    result = subprocess.run(["bash", str(CLUSTER / "submit.sh"), "recipes/math_length/r1_1.5b_gdpo.sh"], cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "[validate_config] All configuration checks passed successfully!" in output
    assert "gdpo-verl memory plan, per GPU (4 training GPU(s)" in output  # the knob set here reached the job
    assert "stopped before Ray starts" in output
    assert not (tmp_path / "ckpt").exists()  # a check writes nothing


# What launch.sh relies on to put the run's TENSORBOARD_DIR into verl's TaskRunner under `ray job submit`: the job's
# environment carries the root (a knob), the driver's ray.init (verl's run_ppo, from ray_kwargs.ray_init.runtime_env)
# the run's own directory, and RAY_OVERRIDE_JOB_RUNTIME_ENV=1 (set by launch.sh) makes the driver's win in every
# actor. Also: the cluster variables set on the client (WANDB_*, HF_*, NCCL_*) reach the actors.
RUNTIME_ENV_JOB = (
    "import os, ray\n"
    "ray.init(runtime_env={'env_vars': {'TENSORBOARD_DIR': '/logs/project/experiment'}})\n"
    "@ray.remote\n"
    "def seen():\n"
    "    return [os.environ.get(k) for k in ('TENSORBOARD_DIR', 'WANDB_API_KEY', 'HF_HOME', 'NCCL_SOCKET_IFNAME')]\n"
    "print('in an actor:', ray.get(seen.remote()))\n"
)


def test_the_runs_tensorboard_dir_and_the_cluster_variables_reach_the_jobs_actors(head):
    env = environment(RAY_ADDRESS=head, WORKING_DIR="", TENSORBOARD_DIR="/logs", WANDB_API_KEY="k3y",
                      HF_HOME="/hf", NCCL_SOCKET_IFNAME="ib0", RAY_OVERRIDE_JOB_RUNTIME_ENV="1")
    result = subprocess.run(["bash", str(CLUSTER / "submit.sh"), "env", "RAY_OVERRIDE_JOB_RUNTIME_ENV=1",
                             sys.executable, "-c", RUNTIME_ENV_JOB],
                            capture_output=True, text=True, env=env, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "in an actor: ['/logs/project/experiment', 'k3y', '/hf', 'ib0']" in output


SRUN = """#!/usr/bin/env bash
# Slurm's srun for a test: runs the command here, as the node the test plays; a node named ghost* is unreachable.
node=""
while [ $# -gt 0 ]; do
    case "$1" in
        -w) node=$2; shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
if [[ "$node" == ghost* ]]; then echo "srun: error: $node: unreachable" >&2; exit 1; fi
exec "$@"
"""
SCONTROL = """#!/usr/bin/env bash
# scontrol show hostnames A,B: one a line
[ "$1 $2" = "show hostnames" ] && tr ',' '\\n' <<< "$3"
"""


@pytest.mark.parametrize("nodes", ["node0", "node0,ghost1"])
def test_slurm_script_starts_ray_waits_for_every_node_and_runs_the_recipe(tmp_path, nodes):
    """slurm.sbatch as far as this machine allows: srun and scontrol stubs that run each node's command here, a real
    Ray head on the loopback interface (NETWORK_INTERFACE=lo), the recipe's driver with CHECK=1. A node that never
    joins ends the job within NODES_WAIT_S, naming the nodes."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    ray_port = free_port()
    env = environment(RECIPE="recipes/math_length/r1_1.5b_gdpo.sh", CHECK="1", SLURM_JOB_NODELIST=nodes,
                      SLURM_JOB_NUM_NODES=str(nodes.count(",") + 1), RAY_PORT=str(ray_port), NETWORK_INTERFACE="lo",
                      NODES_WAIT_S="25" if "ghost" in nodes else "180", NUM_CPUS="2", DASHBOARD_HOST="127.0.0.1", DASHBOARD_PORT=str(free_port()),
                      RAY_START_ARGS=f"--dashboard-agent-listen-port={free_port()}", HOME=str(tmp_path),
                      CHECKPOINT_DIR=str(tmp_path / "ckpt"))
    env["PATH"] = f"{stubs}{os.pathsep}{env['PATH']}"
    env.pop("RAY_ADDRESS", None)
    log = tmp_path / "slurm.out"
    try:
        # to a file, as Slurm writes it: the head's `ray start --block` keeps the output open after the script ends
        with open(log, "w") as out:
            code = subprocess.run(["bash", str(CLUSTER / "slurm.sbatch")], cwd=ROOT, stdout=out, stderr=out, env=env,
                                  timeout=300).returncode
    finally:
        stop_cluster(ray_port)
    output = log.read_text()
    if "ghost" in nodes:
        assert code == 1, output[-3000:]
        assert "1 of 2 nodes (node0 ghost1) joined Ray within NODES_WAIT_S=25 s" in output
        assert "stopped before Ray starts" not in output
    else:
        assert code == 0, output[-3000:]
        assert "all 1 nodes joined Ray at 127.0.0.1:" in output
        assert "stopped before Ray starts" in output


def test_a_network_interface_without_an_address_is_refused_naming_the_interfaces_there_are():
    env = environment(NETWORK_INTERFACE="no-such-interface0")
    env.pop("HEAD_IP", None)
    result = subprocess.run(["bash", str(CLUSTER / "head.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert "NETWORK_INTERFACE=no-such-interface0 has no IPv4 address" in result.stderr and "lo (127.0.0.1" in result.stderr
