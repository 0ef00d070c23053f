"""The walls of the package: only gdpo_verl/verl_adapter/ imports verl, Ray, TransferQueue, hydra, omegaconf
or vLLM; the core imports torch, numpy and the standard library; the reward functions import no torch."""

import ast
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
