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
  whose parts disagree), and every answer this client cannot read (a malformed status line or header, a body that
  is not JSON or not an object, JSON nested past the interpreter's recursion limit, an integer too long to convert,
  a field of another type than ``run_code``'s): ``UNAVAILABLE``, which the reward reports as ``verify_failed``,
  never as a wrong answer. Its ``why`` names what was wrong (for an unreadable answer, the exception's type and
  message): whatever the server answers, ``run`` returns an ``Outcome`` and raises nothing.

Each try of a request has a total deadline, ``wall_s`` + ``REQUEST_SLACK_S`` on the host's monotonic clock, that
covers connecting (TLS included), sending, and the answer's status line, headers and body: every read and write on
its socket waits at most for the time left, so a server that drips its answer a byte at a time ends the try at the
deadline (``UNAVAILABLE``, "did not answer within N s", not tried again). With ``ATTEMPTS`` tries, ``RETRY_DELAY_S``
and then twice that apart, a whole request takes at most 3 × (``wall_s`` + 60 s) + 3 s, the host's look-up of the
server's name aside (bounded by the resolver's own timeouts). The request goes straight to the server over
``http.client`` (urllib's reads have no bound on their sum), so proxy variables (``http_proxy``) do not apply.

The server enforces its own isolation; of the local limits only the wall clock and memory are sent (CPU seconds,
processes and file size have no field in Sandbox Fusion's ``run_code`` request, so the coding reward refuses them in
this mode rather than ignore them). Python only: the programs are the model's Python blocks.
"""

from __future__ import annotations

import email.errors
import http.client
import io
import json
import signal
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gdpo_verl.sandbox.limits import Limits
from gdpo_verl.sandbox.outcome import (ERROR, OK, OUTPUT_LIMIT, TIMEOUT, UNAVAILABLE, Outcome, SandboxUnavailable,
                                       unavailable)

FUSION = "fusion"
SETTINGS = "reward.sandbox_fusion"

# Tries of one request when the server answers a 5xx (busy, a gateway timeout) or the connection fails or breaks; a
# try that ran out its own time is not repeated (that would multiply the wait).
ATTEMPTS = 3
RETRY_DELAY_S = 1.0
# Seconds a try may take beyond the run's own wall clock: the server's queue, start-up and the transfer.
REQUEST_SLACK_S = 60.0
# What Sandbox Fusion's server keeps of a run's stdout and of its stderr (its runners cut captured output there).
SERVER_OUTPUT_BYTES = 1 << 20
# Bytes sent or asked of the socket at a time.
CHUNK_BYTES = 1 << 16
# What reading and making sense of a broken or hostile server's answer can raise: a malformed status line or header
# (http.client.HTTPException, email's MessageError, ValueError), a body that is not UTF-8 or not JSON (UnicodeError,
# ValueError), JSON nested past the recursion limit (RecursionError), an integer past Python's digit limit
# (ValueError), fields of other types or values than run_code's (TypeError, LookupError, AttributeError,
# ArithmeticError, ValueError), the connection failing (OSError).
UNREADABLE = (RecursionError, ValueError, TypeError, LookupError, AttributeError, ArithmeticError,
              http.client.HTTPException, email.errors.MessageError, OSError)
# The exit codes a run can report: 0 to 255, or minus the signal that ended it.
EXIT_CODES = range(-255, 256)


def _address(url: str) -> tuple[str, int, str, bool] | None:
    """(host, port, the path and query to ask, whether TLS) of an http(s) ``url``; None if it names no host that
    can be looked up or its port is not a number."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        parts.hostname.encode("idna")  # as the name look-up encodes it
    except ValueError:
        return None
    tls = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port or (443 if tls else 80), path, tls


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
        if not isinstance(url, str) or not url.startswith(("http://", "https://")) or _address(url) is None:
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
        address = _address(settings.url)
        if address is None:
            raise ValueError(f"{SETTINGS}.url {settings.url!r} is not an http(s) address with a host")
        self._host, self._port, self._path, tls = address
        self._tls = ssl.create_default_context() if tls else None

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
        return self._request(json.dumps(request).encode(), started)

    def _request(self, body: bytes, started: float) -> Outcome:
        """The outcome of sending ``body``: tried again, up to ``ATTEMPTS`` times, while the server is busy or the
        connection fails; never after a try that ran out its own time (that would multiply the wait)."""
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(RETRY_DELAY_S * attempt)
            outcome, again = self._try(body, started)
            if not again:
                return outcome
        return replace(outcome, why=f"{outcome.why} (tried {ATTEMPTS} times)")

    def _try(self, body: bytes, started: float) -> tuple[Outcome, bool]:
        """One try, over by its deadline (``wall_s`` + ``REQUEST_SLACK_S`` from now, on the host's monotonic clock)
        whatever the server does: (its outcome, whether it is worth another try)."""
        seconds = self.limits.wall_s + REQUEST_SLACK_S
        deadline = time.monotonic() + seconds
        sock = None
        try:
            try:
                sock = _connect(self._host, self._port, deadline, self._tls)
                connection = http.client.HTTPConnection(self._host, self._port)
                connection.sock = _DeadlineSocket(sock, deadline)
                connection.request("POST", self._path, body, {"Content-Type": "application/json",
                                                              "Accept": "application/json"})
            except TimeoutError:
                return unavailable(self._late(seconds), time.monotonic() - started), False
            except (OSError, http.client.HTTPException) as error:  # no connection, or one that broke: asked again
                return unavailable(f"cannot reach {self.settings.url}: {error!r}", time.monotonic() - started), True
            return self._answer(connection, deadline, seconds, started)
        finally:
            if sock is not None:
                sock.close()

    def _answer(self, connection: http.client.HTTPConnection, deadline: float, seconds: float,
                started: float) -> tuple[Outcome, bool]:
        """Read the server's answer to the request sent on ``connection`` by ``deadline``, decode it and judge it:
        (the outcome, whether the try is worth another). All of the answer comes from the server, so any failure
        to read or make sense of it (status line, headers, body, JSON, the types of its fields: ``UNREADABLE``) is
        ``UNAVAILABLE`` with the exception's type and message, never raised."""
        url = self.settings.url
        raw = bytearray()
        try:
            response = connection.getresponse()
            if not 200 <= response.status < 300:
                why = f"HTTP {response.status} {response.reason[:100]} from {url}"
                return unavailable(why, time.monotonic() - started), response.status >= 500 or response.status == 429
            length = response.getheader("Content-Length")
            if length is not None and not (length.isascii() and length.isdigit()):
                raise ValueError(f"its Content-Length {length[:100]!r} is not a number of bytes")
            while len(raw) <= self.answer_bytes and (chunk := response.read1(CHUNK_BYTES)):
                raw += chunk
            if len(raw) > self.answer_bytes:
                return Outcome(OUTPUT_LIMIT, None, "", "", time.monotonic() - started,
                               f"wrote more than {self.output_bytes // 1024} KB"), False
            if length is not None and len(raw) < int(length):  # the connection closed halfway: asked again
                return unavailable(f"the answer from {url} was cut short ({len(raw)} of {length} bytes)",
                                   time.monotonic() - started), True
            return self._outcome(_checked(json.loads(raw)), time.monotonic() - started), False
        except TimeoutError:
            return unavailable(self._late(seconds), time.monotonic() - started), False
        except (ConnectionError, http.client.IncompleteRead, ssl.SSLError) as error:  # it broke: asked again
            return unavailable(f"the connection to {url} broke: {error!r}"[:500], time.monotonic() - started), True
        except UNREADABLE as error:
            began = f"; it began {bytes(raw[:100])!r}" if raw else ""
            why = f"{url} gave an answer this client cannot read: {type(error).__name__}: {str(error)[:300]}{began}"
            return unavailable(why, time.monotonic() - started), False

    def _late(self, seconds: float) -> str:
        return f"Sandbox Fusion at {self.settings.url} did not answer within {seconds:g} s"

    def _outcome(self, answer: dict, seconds: float) -> Outcome:
        status = answer.get("status")
        run, compiled = answer.get("run_result"), answer.get("compile_result")
        message = (answer.get("message") or "")[:300]
        if status == "SandboxError":
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion's own error: {message!r}")
        if status not in ("Success", "Failed"):
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion answered status {status!r}, which "
                                                                "this client does not know")
        if run is None:
            compiled = compiled or {}
            code = compiled.get("return_code")
            if status == "Failed" and compiled.get("status") == "Finished" and code is not None and code != 0:
                # not run: its compile step failed (the program's fault; "Error" there is the server's)
                return Outcome(ERROR, code, "", (compiled.get("stderr") or "")[-4000:], seconds,
                               f"did not compile (exit code {code})")
            return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion gave no run result: {message!r}")
        stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
        size = max(len(stdout.encode("utf-8", "surrogatepass")), len(stderr.encode("utf-8", "surrogatepass")))
        if size > self.limits.output_kb * 1024 or size >= SERVER_OUTPUT_BYTES:  # the server may have cut it there
            return Outcome(OUTPUT_LIMIT, None, stdout[:self.output_bytes], stderr[-4000:], seconds,
                           f"wrote more than {self.output_bytes // 1024} KB")
        code, ran = run.get("return_code"), run.get("status")
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: as the local sandbox reports it
        if ran == "TimeLimitExceeded":
            return Outcome(TIMEOUT, None, stdout, stderr[-4000:], seconds,
                           f"still running after {self.limits.wall_s:g} s (Sandbox Fusion's run_timeout)")
        if ran == "Finished" and status == "Success" and code == 0:
            return Outcome(OK, 0, stdout, stderr[-4000:], seconds)
        if ran == "Finished" and status == "Failed" and code is not None and code != 0:
            why = f"killed by {signal.Signals(code - 128).name}" if code - 128 in _SIGNALS else f"exit code {code}"
            return Outcome(ERROR, code, stdout, stderr[-4000:], seconds, why)
        # "Error": the server failed to run the command; or parts that disagree (Success with a failed run, Failed
        # with a clean one, no exit code): not a judgement of the program
        return Outcome(UNAVAILABLE, None, "", "", seconds, f"Sandbox Fusion answered run status {ran!r} (exit "
                                                            f"{code!r}) with status {status!r}: not a judgement of "
                                                            f"the program; {message!r}")


_SIGNALS = {int(value) for value in signal.Signals}
_JSON = {dict: "an object", list: "an array", str: "a string", int: "a whole number", float: "a number",
         bool: "true or false", type(None): "null"}


def _checked(answer: Any) -> dict:
    """``answer``, if every field this client reads has the type ``run_code``'s result gives it (Sandbox Fusion's
    RunCodeResponse: strings, objects, a whole number for an exit code, or null); else TypeError or ValueError
    naming the first field that does not."""
    if type(answer) is not dict:
        raise TypeError(f"the answer is {_kind(answer)}, not a run_code result (an object)")
    _expect("status", answer.get("status"), str, type(None))
    _expect("message", answer.get("message"), str, type(None))
    for name in ("compile_result", "run_result"):
        result = answer.get(name)
        _expect(name, result, dict, type(None))
        for field in ("status", "stdout", "stderr"):
            _expect(f"{name}.{field}", (result or {}).get(field), str, type(None))
        code = (result or {}).get("return_code")
        _expect(f"{name}.return_code", code, int, type(None))
        if code is not None and code not in EXIT_CODES:
            raise ValueError(f"{name}.return_code is not an exit code (-255 to 255)")
    return answer


def _expect(name: str, value: Any, *types: type) -> None:
    if type(value) not in types:  # the exact type: JSON's true is not a whole number
        raise TypeError(f"{name} is {_kind(value)}, not {' or '.join(_JSON[kind] for kind in types)}")


def _kind(value: Any) -> str:
    return _JSON.get(type(value), type(value).__name__)


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` on the host's monotonic clock; TimeoutError once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the try's deadline passed")
    return left


def _connect(host: str, port: int, deadline: float, tls: ssl.SSLContext | None) -> socket.socket:
    """A socket connected to ``host``:``port`` by ``deadline``, over TLS when ``tls`` is given (its handshake by
    then too): the host's addresses in turn, as ``socket.create_connection`` tries them, but all within the one
    deadline rather than a timeout each."""
    failure: OSError = OSError(f"no address for {host}")
    for family, kind, protocol, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, protocol)
        try:
            sock.settimeout(_left(deadline))
            sock.connect(address)
            if tls is None:
                return sock
            sock.settimeout(_left(deadline))  # the handshake as a whole, not each of its reads
            return tls.wrap_socket(sock, server_hostname=host)
        except OSError as error:
            sock.close()
            failure = error
    raise failure


class _DeadlineSocket:
    """A try's socket as http.client sees it: each send and receive waits at most until ``deadline`` (a socket's
    own timeout bounds each call, not their sum), so the try ends there however slowly the server reads or writes.
    ``close`` leaves the socket to the try, which closes it once the answer is read (http.client closes its
    connection as soon as it has the headers of an answer that is read to the connection's end)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            self._sock.settimeout(_left(self._deadline))
            view = view[self._sock.send(view[:CHUNK_BYTES]):]

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        pass


class _DeadlineReader(io.RawIOBase):
    """The receiving side of a ``_DeadlineSocket``: each read waits at most for the time left."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(_left(self._deadline))
        return self._sock.recv_into(buffer)
