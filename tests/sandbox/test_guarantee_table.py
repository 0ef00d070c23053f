"""The table of what holds each guarantee of the sandbox (gdpo_verl/sandbox/GUARANTEES.md), held to the code it
names: every module a row names exists, and every mechanism the row writes as code is in those modules; and the order
in which each function applies its steps to a run, held to the function's code. Read as text: no sandbox is
started."""

import ast
import io
import re
import tokenize
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


def orders():
    """The document's ordered lists: (module, function or None for a whole program, the first code of each step)."""
    text = (SANDBOX / "GUARANTEES.md").read_text()
    for match in re.finditer(r"^### [^\n]*?`([\w/]+\.py)`(?: `([\w.]+)`)?\n\n(.*?)(?=^#|\Z)", text, re.M | re.S):
        steps = re.findall(r"^\d+\. `([^`]+)`", match.group(3), re.M)
        yield match.group(1), match.group(2), steps


def code_of(module: str, function: str | None) -> str:
    """The code of ``function`` (``Class.method`` too) in ``module``, or of the whole module, without its comments
    and docstrings."""
    source = (SANDBOX / module).read_text()
    tree = ast.parse(source)
    node = tree
    for name in function.split(".") if function else ():
        node = next(child for child in ast.walk(node)
                    if isinstance(child, (ast.FunctionDef, ast.ClassDef)) and child.name == name)
    docstrings = {(child.body[0].lineno, child.body[0].end_lineno) for child in ast.walk(node)
                  if isinstance(child, (ast.Module, ast.FunctionDef, ast.ClassDef)) and child.body
                  and isinstance(child.body[0], ast.Expr) and isinstance(child.body[0].value, ast.Constant)}
    lines = source.splitlines(keepends=True)
    first, last = (node.lineno, node.end_lineno) if function else (1, len(lines))
    kept = []
    for token in tokenize.generate_tokens(io.StringIO("".join(lines[first - 1:last])).readline):
        line = token.start[0] + first - 1
        if token.type == tokenize.COMMENT or any(start <= line <= end for start, end in docstrings):
            continue
        kept.append((token.start, token.string))
    return " ".join(string for _, string in kept)


def in_order(steps: list[str], code: str) -> list[str]:
    """The steps not found in ``code`` after the step before (empty when every step is there, in order)."""
    squeezed = re.sub(r"\s+", "", code)
    at, wrong = 0, []
    for step in steps:
        found = squeezed.find(re.sub(r"\s+", "", step), at)
        if found < 0:
            wrong.append(step)
        else:
            at = found
    return wrong


def test_each_function_applies_its_steps_in_the_documented_order():
    lists = list(orders())
    assert len(lists) >= 6 and all(steps for _, _, steps in lists)
    for module, function, steps in lists:
        assert in_order(steps, code_of(module, function)) == [], (module, function)


def test_a_step_out_of_order_or_missing_is_found_out():
    code = code_of("programs/interpreter.py", "_Confinement.confine")
    assert in_order(["_capset", "os.chdir(\"/work\")", "SIG_UNBLOCK"], code) == []
    assert in_order(["SIG_UNBLOCK", "_capset"], code) == ["_capset"]
    assert in_order(["_capset", "PR_SET_SECCOMP"], code) == ["PR_SET_SECCOMP"]
    # words only in a comment, or in a docstring, are not code
    assert in_order(["this user id"], code_of("programs/interpreter.py", "_serve")) == ["this user id"]
    assert in_order(["anything of the program"], code) == ["anything of the program"]
    assert "this user id" in (SANDBOX / "programs" / "interpreter.py").read_text()
