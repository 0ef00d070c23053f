"""``gdpo-verl doctor``: is this environment ready for GDPO training with verl?

Each check prints one line: OK, WARN (not needed for everything: what it is needed for and how to get
it) or FAIL (GDPO will not work: what to do). The exit code is 1 when any check fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

OURS = "gdpo_verl.verl_adapter.estimator.compute_gdpo_advantage"

# Run in a fresh interpreter: what a verl process (driver, TaskRunner, worker) sees at `import verl`.
RESOLVE = (
    "import verl\n"
    "from verl.trainer.ppo import core_algos\n"
    "from verl.trainer.ppo.v1 import trainer_base\n"
    "fn = core_algos.get_adv_estimator_fn('gdpo')\n"
    "hooked = hasattr(trainer_base.PPOTrainer._compute_advantage, '__gdpo_verl_wraps__')\n"
    "print('resolved:', fn.__module__ + '.' + fn.__qualname__, 'v1-hooked:', hooked)\n"
)


@dataclass(frozen=True)
class Check:
    status: str  # "OK", "WARN" or "FAIL"
    name: str
    detail: str


def run_checks(ray_worker: bool = True) -> list[Check]:
    checks: list[Callable[[], Check]] = [check_verl_version, check_fresh_process, check_transfer_queue]
    if ray_worker:
        checks.append(check_ray_worker)
    checks += [check_vllm, check_gpus, check_math_verify]
    return [_run(check) for check in checks]


def _run(check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as exc:  # reported as a failed check, with its reason, never hidden
        return Check("FAIL", check.__name__.removeprefix("check_").replace("_", " "), f"{type(exc).__name__}: {exc}")


def check_verl_version() -> Check:
    from gdpo_verl.plugin import SUPPORTED_VERL

    try:
        installed = version("verl")
    except PackageNotFoundError:
        return Check("FAIL", "verl", f"not installed: pip install 'verl{SUPPORTED_VERL}'")
    if Version(installed) not in SUPPORTED_VERL:
        return Check("FAIL", "verl", f"{installed} is installed; gdpo-verl supports verl{SUPPORTED_VERL}")
    return Check("OK", "verl", f"{installed} (supported: {SUPPORTED_VERL})")


def check_fresh_process() -> Check:
    name = '"gdpo" in a fresh `import verl`'
    result = subprocess.run([sys.executable, "-c", RESOLVE], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return Check("FAIL", name, f"the check failed: {last}")
    line = next((line for line in result.stdout.splitlines() if line.startswith("resolved:")), "")
    if f"resolved: {OURS} v1-hooked: True" in line:
        return Check("OK", name, "resolves to gdpo-verl; the V1 advantage stage is hooked")
    hint = "install gdpo-verl in this environment (pip install -e . from a checkout)"
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS")
    if policy is not None:
        hint = f"VERL_USE_EXTERNAL_PLUGINS={policy!r} keeps the plugin out: unset it or include gdpo_verl"
    return Check("FAIL", name, f"{line or 'nothing resolved'}; {hint}")


def check_ray_worker() -> Check:
    """In a Ray worker: of the cluster at RAY_ADDRESS if set, else of a local one on loopback."""
    import ray

    name = '"gdpo" in a Ray worker'
    address = os.environ.get("RAY_ADDRESS")

    @ray.remote(num_cpus=0)
    def resolve() -> str:
        from verl.trainer.ppo import core_algos

        fn = core_algos.get_adv_estimator_fn("gdpo")
        return f"{fn.__module__}.{fn.__qualname__}"

    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=1, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
    try:
        resolved = ray.get(resolve.remote(), timeout=300)
    finally:
        ray.shutdown()
    where = f"cluster {address}" if address else "a local Ray"
    if resolved == OURS:
        return Check("OK", name, f"resolves to gdpo-verl in {where}")
    return Check(
        "FAIL", name, f"resolves to {resolved} in {where}: install gdpo-verl on every node (or in the runtime env)"
    )


def check_transfer_queue() -> Check:
    if importlib.util.find_spec("transfer_queue") is None:
        return Check("FAIL", "TransferQueue", "missing; verl's V1 trainer needs it: pip install 'transferqueue>=0.1.11'")
    return Check("OK", "TransferQueue", version("transferqueue"))


def check_vllm() -> Check:
    if importlib.util.find_spec("vllm") is None:
        return Check("WARN", "vLLM", "not importable; rollouts and evaluation need it on GPU nodes: pip install -e '.[vllm]'")
    return Check("OK", "vLLM", version("vllm"))


def check_gpus() -> Check:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return Check("WARN", "GPUs", "none visible; training needs CUDA GPUs (the tests and tools run on CPU)")
    return Check("OK", "GPUs", f"{count} visible: {torch.cuda.get_device_name(0)}")


def check_math_verify() -> Check:
    if importlib.util.find_spec("math_verify") is None:
        return Check("WARN", "math-verify", "not importable; the math rewards and evaluation need it: pip install math-verify")
    return Check("OK", "math-verify", version("math-verify"))


def report(checks: list[Check]) -> int:
    for check in checks:
        print(f"{check.status:<4}  {check.name}: {check.detail}")
    failed = sum(check.status == "FAIL" for check in checks)
    print(f"{failed} failed, {sum(check.status == 'WARN' for check in checks)} warnings")
    return 1 if failed else 0
