"""``gdpo-verl doctor``: is this environment ready for GDPO training with verl?

Each check prints one line: OK, WARN (not needed for everything: what it is needed for and how to get
it) or FAIL (GDPO will not work: what to do). The exit code is 1 when any check fails.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from importlib.metadata import version

from gdpo_verl.verl_adapter.for_tools.environment import (
    Check,
    check_fresh_process,
    check_ray_worker,
    check_transfer_queue,
    check_verl_version,
    check_vllm,
    check_vllm_cpu_gemm,
    installed,
)


def run_checks(ray_worker: bool = True) -> list[Check]:
    checks: list[Callable[[], Check]] = [check_verl_version, check_fresh_process, check_transfer_queue]
    if ray_worker:
        checks.append(check_ray_worker)
    checks += [check_vllm, check_gpus, check_math_verify]
    if installed("vllm-cpu"):
        checks.append(check_vllm_cpu_gemm)
    return [_run(check) for check in checks]


def _run(check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as exc:  # reported as a failed check, with its reason, never hidden
        return Check("FAIL", check.__name__.removeprefix("check_").replace("_", " "), f"{type(exc).__name__}: {exc}")


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
