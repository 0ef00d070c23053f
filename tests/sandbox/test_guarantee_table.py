"""The table of what holds each guarantee of the sandbox (gdpo_verl/sandbox/GUARANTEES.md), held to the code it
names: every module a row names exists, and every mechanism the row writes as code is in those modules. Read as
text: no sandbox is started."""

import re
from pathlib import Path

from gdpo_verl.sandbox.policy import ALLOWED, INTERPRETER

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / "gdpo_verl" / "sandbox"


def rows():
    for line in (SANDBOX / "GUARANTEES.md").read_text().splitlines():
        if line.startswith("| ") and not line.startswith("| guarantee"):
            guarantee, modules, mechanisms = (cell.strip() for cell in line.strip().strip("|").split(" | "))
            yield guarantee, re.findall(r"`([\w/]+\.py)`", modules), re.findall(r"`([^`]+)`", mechanisms)


def held(mechanism: str, source: str) -> bool:
    """Whether the modules' ``source`` holds ``mechanism`` as the table writes it."""
    if mechanism.endswith(".py"):  # a file: the test that shows it
        return any(ROOT.glob(f"tests/**/{mechanism}"))
    if " " in mechanism:  # a formula: each name in it
        return all(held(name, source) for name in re.findall(r"[A-Za-z_]\w*", mechanism) if "_" in name)
    name = mechanism.rstrip("*")
    if name.startswith("RLIMIT_"):  # prlimit's name for it
        return f'"{name[len("RLIMIT_"):].lower()}"' in source
    if re.fullmatch(r"[a-z][a-z0-9_]*", name) and "ALLOWED = (" in source:  # a system call, in a row of policy.py
        allowed = [call for call in (*ALLOWED, *INTERPRETER) if call == name or mechanism.endswith("*")
                   and call.startswith(name)]
        return not allowed or name in source  # refused by the filter's default, or what policy.py says of it
    if re.fullmatch(r"[a-z]+(\.[a-z_]+)+", name) and f"/proc/sys/{name.replace('.', '/')}" in source:  # a sysctl
        return True
    if name.startswith("/proc/"):  # a file of each process or thread: PID, TID as the code's fields
        return re.search(re.sub(r"[A-Z]{3}", lambda _: r"\{[^}]+\}", re.escape(name)), source) is not None
    return all(part in source for part in re.split(r"[()]", name) if part)


def test_every_row_names_modules_that_exist_and_mechanisms_they_hold():
    table = list(rows())
    assert len(table) >= 20
    for guarantee, modules, mechanisms in table:
        assert modules, f"{guarantee}: no module named"
        assert [module for module in modules if not (SANDBOX / module).is_file()] == [], guarantee
        source = "\n".join((SANDBOX / module).read_text() for module in modules)
        assert [mechanism for mechanism in mechanisms if not held(mechanism, source)] == [], guarantee


def test_a_mechanism_the_modules_do_not_hold_is_found_out():
    assert not held("memory.oom.group", "memory.max")
    assert not held("RLIMIT_STACK", '"as"')
    assert not held("/proc/PID/task/TID/io", 'open(f"/proc/{pid}/task/{tid}/stat")')
    assert not held("memory_mb * processes + swap_mb", "memory_mb processes")
    policy = (SANDBOX / "policy.py").read_text()
    assert held("ptrace", policy) and held("process_vm_*", policy)  # refused by the filter's default
    assert not held("ptrace", "a row that does not name policy.py")
