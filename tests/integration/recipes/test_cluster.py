"""recipes/cluster on a real local Ray cluster: head.sh on loopback, a job through submit.sh.

The cluster uses Ray 2.60's token authentication, as a real one does; the job checks that "gdpo" resolves
to this plugin inside it and that the recipe knobs set on the client reached it.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "recipes" / "cluster"

JOB = (
    "import os, verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
    "print('resolved in job:', fn.__module__ + '.' + fn.__qualname__)\n"
    "print('knobs in job:', os.environ.get('MODEL'), os.environ.get('NNODES'))\n"
)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


def stop_cluster(ray_port: int) -> None:
    """Stop this test's head and everything it started, and nothing else: ``ray stop`` would end every Ray on the
    machine (the CPU training runs that the suite runs beside this test among them). Each of the head's own
    processes names its GCS address (on whichever address Ray chose) or port; its workers end with its raylet."""
    marks = (f":{ray_port} ", f":{ray_port}\0", f"--gcs_server_port={ray_port}")
    own = [p for p in psutil.process_iter(["cmdline"]) if any(m in "\0".join(p.info["cmdline"] or ()) + "\0" for m in marks)]
    family = set()
    for parent in own:
        try:
            family |= {parent, *parent.children(recursive=True)}
        except psutil.NoSuchProcess:  # ended meanwhile
            pass
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=60)
    assert not alive, f"processes of the test's Ray head still running: {alive}"


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


@pytest.mark.parametrize("script", ["head.sh", "worker.sh", "submit.sh", "slurm.sbatch"])
def test_cluster_scripts_are_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(CLUSTER / script)], capture_output=True).returncode == 0


def test_worker_without_a_head_address_says_what_to_set():
    env = environment()
    env.pop("HEAD_ADDRESS", None)
    result = subprocess.run(["bash", str(CLUSTER / "worker.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0
    assert "set HEAD_ADDRESS" in result.stderr
