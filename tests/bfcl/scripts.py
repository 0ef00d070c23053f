"""The evaluation scripts run by BFCL's tests: each script's main(argv) in the test's process (``run``), and the
scripted policy's answer that ends a turn (``DONE``)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "evaluate_bfcl.py"
# The scripted policy's answer without calls, which ends a turn (what a perfect policy says once it is done).
DONE = "<think> done </think>\n<response> done </response>"


def load_script(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(capsys, *arguments, script=SCRIPT) -> SimpleNamespace:
    """The script's main(argv) in this process (BFCL's package is imported once for the whole file)."""
    capsys.readouterr()
    returncode = load_script(script).main([str(argument) for argument in arguments])
    captured = capsys.readouterr()
    return SimpleNamespace(returncode=returncode, stdout=captured.out, stderr=captured.err)
