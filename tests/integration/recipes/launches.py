"""The recipes' DRY_RUN launches, composed by one process of verl's real entry points instead of one process each.

A recipe's DRY_RUN ends in ``python3 -m <verl entry point> ... --cfg job`` (recipes/launch.sh): about 8 s of importing
verl, then hydra composes and prints the config in a fraction of a second. test_recipes.py composes about 40 such
launches. So each recipe still runs for real in bash, but the ``python3`` first on its PATH is ``Launches.shim``: for
a verl entry point it hands the launch (its arguments, environment and working directory) to one long-lived process
of this environment's interpreter (``serve``) over a UNIX socket, and prints what that process answers, exiting with
its code; anything else runs the real interpreter. ``serve`` runs each launch as ``python -m`` runs it: the entry
point's module as ``__main__`` (runpy), with the launch's argv, environment and directory, and hydra's global state
cleared first. test_recipes.py checks that this prints exactly what the recipe's own process prints, for every
entry point the recipes launch.

    python launches.py serve SOCKET      the composing process (started by Launches)
    python -S launches.py launch ARGS    the client the shim execs (the standard library only)
"""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A launch composes in well under a second once verl is imported; the first waits for the import.
LAUNCH_TIMEOUT_S = 300
START_TIMEOUT_S = 120
# How often the composing process, waiting for a launch, looks whether the test process that started it is still
# there: it ends when that process has (a pytest worker killed cannot close it).
PARENT_CHECK_S = 10


def _send(connection: socket.socket, message: dict) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")


def _receive(connection: socket.socket) -> dict:
    chunks = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = connection.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the composing process closed the connection without an answer")
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def launch(argv: list[str]) -> int:
    """The shim's client: one launch handed to ``serve`` at $RECIPE_LAUNCHES_SOCKET; its output printed here."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(LAUNCH_TIMEOUT_S)
        connection.connect(os.environ["RECIPE_LAUNCHES_SOCKET"])
        _send(connection, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()})
        answer = _receive(connection)
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    return answer["code"]


def _compose(request: dict) -> dict:
    """One launch, as ``python -m MODULE ARGS`` runs it, in this process."""
    import contextlib
    import io
    import runpy
    import traceback

    from hydra.core.global_hydra import GlobalHydra

    flag, module, *arguments = request["argv"]
    assert flag == "-m", request["argv"]
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    GlobalHydra.instance().clear()
    sys.argv = [module, *arguments]  # runpy puts the module's file in argv[0], as python -m does
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        except BaseException:  # noqa: BLE001 - reported as the process would report it
            traceback.print_exc()
            code = 1
    return {"stdout": stdout.getvalue(), "stderr": stderr.getvalue(), "code": code}


def serve(path: str) -> None:
    parent = os.getppid()
    # the answers go over the socket; anything written to this process's stdout goes to its stderr
    os.dup2(2, 1)
    import verl.trainer.main_ppo  # noqa: F401 - imported once, for every launch

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen()
        server.settimeout(PARENT_CHECK_S)
        print("ready", file=sys.stderr, flush=True)
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                if os.getppid() != parent:
                    return  # the test process that started this one is gone
                continue
            with connection:
                connection.settimeout(LAUNCH_TIMEOUT_S)
                _send(connection, _compose(_receive(connection)))


class Launches:
    """The composing process and the ``python3`` shim: ``environment()`` is what a recipe runs with."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="recipe-launches-")
        folder = Path(self._folder.name)
        self.socket = folder / "launches.sock"
        self.shim = folder / "bin" / "python3"
        self.shim.parent.mkdir()
        self.shim.write_text(
            "#!/usr/bin/env bash\n"
            "# verl's entry points to the composing process (tests/integration/recipes/launches.py); anything else\n"
            "# to the real interpreter\n"
            'if [ "${1:-}" = -m ] && [[ "${2:-}" == verl.* ]]; then\n'
            f'    exec "{sys.executable}" -S "{Path(__file__).resolve()}" launch "$@"\n'
            "fi\n"
            f'exec "{sys.executable}" "$@"\n')
        self.shim.chmod(self.shim.stat().st_mode | stat.S_IXUSR)
        self._errors = folder / "serve.log"
        with open(self._errors, "w") as errors:
            self._process = subprocess.Popen([sys.executable, __file__, "serve", str(self.socket)],
                                             stdin=subprocess.DEVNULL, stdout=errors, stderr=errors)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "ready" not in self._errors.read_text().splitlines():
            if self._process.poll() is not None:
                raise RuntimeError(f"the composing process exited with code {self._process.returncode}:\n"
                                   f"{self._errors.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the composing process was not ready within {START_TIMEOUT_S} s:\n"
                                   f"{self._errors.read_text()[-3000:]}")
            time.sleep(0.1)

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PATH": f"{self.shim.parent}{os.pathsep}{base['PATH']}",
                "RECIPE_LAUNCHES_SOCKET": str(self.socket)}

    def close(self) -> None:
        self._process.kill()
        self._process.wait(timeout=60)
        self._folder.cleanup()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "launch":
        sys.exit(launch(sys.argv[2:]))
    else:
        sys.exit(f"launches.py: serve SOCKET | launch ARGS; got {sys.argv[1:]}")
