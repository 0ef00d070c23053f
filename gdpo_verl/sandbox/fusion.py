"""Run programs on a Sandbox Fusion server: the coding reward's ``sandbox=fusion``.

Sandbox Fusion (github.com/bytedance/SandboxFusion) is the remote code sandbox verl's own code scorers call; its
address and load limits are verl's settings ``reward.sandbox_fusion.url`` (the ``run_code`` endpoint),
``.max_concurrent`` (requests at once, per reward worker) and ``.memory_limit_mb`` (per run). ``FusionSandbox`` has
the interface of ``gdpo_verl.sandbox.Sandbox`` (``check``, ``run`` returning an ``Outcome``) so that the
coding reward scores a remote run exactly as a local one:

- the server ran the program and it exited 0 (``Success``, run ``Finished`` with code 0): ``OK``;
- it exited non-zero or crashed (``Failed``, run ``Finished`` with a non-zero code; a signal's negative code is
  reported as 128 + the signal, as locally): ``ERROR``;
- ``TimeLimitExceeded`` (the server's ``run_timeout`` is the reward's ``wall_s``): ``TIMEOUT``;
- stdout or stderr reaching the output bound: ``OUTPUT_LIMIT``. The bound is ``output_kb`` or the 1 MiB the server
  keeps of a run's output, whichever is smaller (output the server cut would otherwise be compared as if whole);
  an answer larger than the bound allows is not read past it;
- anything that says the program was not run or not judged (the server unreachable, an HTTP error after retries,
  ``SandboxError``, run status ``Error``, which the server gives when it failed to run the command, an answer
  whose parts disagree or that this client cannot read): ``UNAVAILABLE``, which the reward reports as
  ``verify_failed``, never as a wrong answer.

The server enforces its own isolation; of the local limits only the wall clock and memory are sent (CPU seconds,
processes and file size have no field in Sandbox Fusion's ``run_code`` request, so the coding reward refuses them in
this mode rather than ignore them). Python only: the programs are the model's Python blocks.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import ERROR, OK, OUTPUT_LIMIT, TIMEOUT, UNAVAILABLE, Outcome, SandboxUnavailable

FUSION = "fusion"
SETTINGS = "reward.sandbox_fusion"

# Attempts of one request when the server answers a 5xx (busy, a gateway timeout) or the connection fails; a request
# that ran out its own time is not repeated (that would multiply the wait).
ATTEMPTS = 3
RETRY_DELAY_S = 1.0
# Seconds a request may take beyond the run's own wall clock: the server's queue, start-up and the transfer.
REQUEST_SLACK_S = 60.0
# What Sandbox Fusion's server keeps of a run's stdout and of its stderr (its runners cut captured output there).
SERVER_OUTPUT_BYTES = 1 << 20


@dataclass(frozen=True)
class FusionSettings:
    """verl's ``reward.sandbox_fusion`` settings (``url``, ``max_concurrent``, ``memory_limit_mb``)."""

    url: str
    max_concurrent: int = 64
    memory_limit_mb: int = 1024

    @classmethod
    def from_mapping(cls, value: Any) -> FusionSettings:
        if isinstance(value, FusionSettings):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"{SETTINGS} must be a mapping with url, max_concurrent and memory_limit_mb; got {value!r}.")
        url = value.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"{SETTINGS}.url must be the http(s) address of a Sandbox Fusion server's run_code "
                             f"endpoint (for example http://sandbox-host:8080/run_code); got {url!r}.")
        numbers = {}
        for name in ("max_concurrent", "memory_limit_mb"):
            number = value.get(name)
            number = getattr(cls, name) if number is None else number
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ValueError(f"{SETTINGS}.{name} must be a whole number of at least 1; got {number!r}.")
            numbers[name] = number
        return cls(url, **numbers)


class FusionSandbox:
    """Runs Python programs on the Sandbox Fusion server of ``settings``; ``run`` may be called from up to ``slots``
    (``settings.max_concurrent``) threads at once, and the coding reward calls it from that many."""

    mode = FUSION

    def __init__(self, settings: FusionSettings, limits: Limits | None = None) -> None:
        self.settings = settings
        self.limits = limits or Limits()
        self.slots = settings.max_concurrent
        self.output_bytes = min(self.limits.output_kb * 1024, SERVER_OUTPUT_BYTES)
        # the answer holds stdout and stderr as JSON strings (up to 6 bytes a byte, escaped) and a little more
        self.answer_bytes = 2 * 6 * self.output_bytes + 65536

    def check(self) -> None:
        """Run ``print(1)`` on the server; raise ``SandboxUnavailable`` naming the node, the server and the fix."""
        outcome = self.run("print(1)", "")
        if outcome.status == OK and outcome.stdout.strip() == "1":
            return
        problem = outcome.why or f"{outcome.status} (exit {outcome.exit_code}) {outcome.stderr[-300:]!r}"
        raise SandboxUnavailable(
            f"sandbox on node {socket.gethostname()}: Sandbox Fusion at {self.settings.url} did not run a test "
            f"program: {problem}. Fix: start the server (or make it reachable from this node), and set {SETTINGS}.url "
            "to its run_code endpoint; or set the coding reward's sandbox=local (docs/coding.md)."
        )

    def run(self, code: str, stdin: str, argv: tuple[str, ...] = ()) -> Outcome:
        """Run ``code`` with ``stdin`` (and ``argv`` as ``sys.argv[1:]``: Sandbox Fusion takes no arguments, so the
        program sets them itself first)."""
        started = time.monotonic()
        if argv:
            code = f"import sys as _sys\n_sys.argv[1:] = {list(argv)!r}\ndel _sys\n{code}"
        request = {
            "code": code, "stdin": stdin, "language": "python",
            "compile_timeout": self.limits.wall_s, "run_timeout": self.limits.wall_s,
            "memory_limit_MB": self.settings.memory_limit_mb, "files": {}, "fetch_files": [],
        }
        answer, problem = self._post(json.dumps(request).encode())
        seconds = time.monotonic() - started
        if answer is None and problem == OUTPUT_LIMIT:
            return Outcome(OUTPUT_LIMIT, None, "", "", seconds, f"wrote more than {self.output_bytes // 1024} KB")
        if answer is None:
            return Outcome(UNAVAILABLE, None, "", "", seconds, problem)
        return self._outcome(answer, seconds)

    def _post(self, body: bytes) -> tuple[dict | None, str]:
        """(the server's JSON answer, "") or (None, the reason there is none; ``OUTPUT_LIMIT`` for an answer too
        large to hold output within the bound)."""
        timeout = self.limits.wall_s + REQUEST_SLACK_S
        problem = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(RETRY_DELAY_S * attempt)
            request = urllib.request.Request(self.settings.url, data=body, method="POST",
                                             headers={"Content-Type": "application/json", "Accept": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    raw = response.read(self.answer_bytes + 1)
                    expected = response.headers.get("Content-Length", "")
            except urllib.error.HTTPError as error:
                problem = f"HTTP {error.code} {error.reason} from {self.settings.url}"
                if error.code >= 500 or error.code == 429:  # busy or over capacity: asked again
                    continue
                return None, problem
            except (TimeoutError, socket.timeout):
                return None, f"no answer from {self.settings.url} within {timeout:g} s"
            except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
                if isinstance(getattr(error, "reason", None), TimeoutError):  # the connect timed out: as above
                    return None, f"no answer from {self.settings.url} within {timeout:g} s"
                # no connection, or one that broke (a reset, a cut answer): asked again
                problem = f"cannot reach {self.settings.url}: {getattr(error, 'reason', None) or error!r}"
                continue
            if len(raw) > self.answer_bytes:
                return None, OUTPUT_LIMIT
            if expected.isdigit() and len(raw) < int(expected):  # the connection closed halfway: asked again
                problem = f"the answer from {self.settings.url} was cut short ({len(raw)} of {expected} bytes)"
                continue
            try:
                answer = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return None, f"{self.settings.url} answered something that is not JSON: {raw[:200]!r}"
            if not isinstance(answer, dict):
                return None, f"{self.settings.url} answered {str(answer)[:200]!r}, not a run_code result"
            return answer, ""
        return None, f"{problem} (tried {ATTEMPTS} times)"

    def _outcome(self, answer: dict, seconds: float) -> Outcome:
        status = answer.get("status")
        run = answer.get("run_result") if isinstance(answer.get("run_result"), dict) else None
        compiled = answer.get("compile_result") if isinstance(answer.get("compile_result"), dict) else None
        message = str(answer.get("message") or "")[:300]
        if status == "SandboxError":
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion's own error: {message!r}")
        if status not in ("Success", "Failed"):
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion answered status {status!r}, which "
                                                                "this client does not know")
        if run is None:
            compiled = compiled or {}
            code = compiled.get("return_code")
            if status == "Failed" and compiled.get("status") == "Finished" and isinstance(code, int) and code != 0:
                # not run: its compile step failed (the program's fault; "Error" there is the server's)
                return Outcome(ERROR, code, "", str(compiled.get("stderr") or "")[-4000:], seconds,
                               f"did not compile (exit code {code})")
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion gave no run result: {message!r}")
        stdout, stderr = str(run.get("stdout") or ""), str(run.get("stderr") or "")
        size = max(len(stdout.encode("utf-8", "surrogatepass")), len(stderr.encode("utf-8", "surrogatepass")))
        if size > self.limits.output_kb * 1024 or size >= SERVER_OUTPUT_BYTES:  # the server may have cut it there
            return Outcome(OUTPUT_LIMIT, None, stdout[:self.output_bytes], stderr[-4000:], seconds,
                           f"wrote more than {self.output_bytes // 1024} KB")
        code, ran = run.get("return_code"), run.get("status")
        if isinstance(code, int) and not isinstance(code, bool) and code < 0:
            code = 128 - code  # killed by a signal: as the local sandbox reports it
        if ran == "TimeLimitExceeded":
            return Outcome(TIMEOUT, None, stdout, stderr[-4000:], seconds,
                           f"still running after {self.limits.wall_s:g} s (Sandbox Fusion's run_timeout)")
        if ran == "Finished" and status == "Success" and code == 0:
            return Outcome(OK, 0, stdout, stderr[-4000:], seconds)
        if ran == "Finished" and status == "Failed" and isinstance(code, int) and code != 0:
            why = f"killed by {signal.Signals(code - 128).name}" if code - 128 in _SIGNALS else f"exit code {code}"
            return Outcome(ERROR, code, stdout, stderr[-4000:], seconds, why)
        # "Error": the server failed to run the command; or parts that disagree (Success with a failed run, Failed
        # with a clean one, no exit code): not a judgement of the program
        return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion answered run status {ran!r} (exit "
                                                            f"{code!r}) with status {status!r}: not a judgement of "
                                                            f"the program; {message!r}")


_SIGNALS = {int(value) for value in signal.Signals}
