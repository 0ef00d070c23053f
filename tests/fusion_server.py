"""A stand-in for a Sandbox Fusion server, for tests of the coding reward's sandbox=fusion.

The real server ships as a container image (github.com/bytedance/SandboxFusion) that cannot be pulled on a machine
without a container registry, so the tests speak to this one instead. It answers POST run_code as Sandbox Fusion
does (the request and response models of its client package, sandbox-fusion 0.3.7: RunCodeRequest ->
RunCodeResponse with status Success / Failed / SandboxError and a run_result of status Finished / Error /
TimeLimitExceeded), running each program in gdpo-verl's local bubblewrap sandbox with the request's run_timeout and
memory_limit_MB. ``faults`` holds scripted answers given first, one per request: an HTTP status code, ``"cut"`` (an
answer whose connection closes halfway), a JSON value to answer as is, or one of the broken answers of ``BROKEN``
(a body sent as is, with its length), ``"length²"`` (``PRINTED_1`` with a Content-Length of the Unicode digit ²),
``"drip"`` (headers, then a body of one space every ``DRIP_S`` seconds, forever) and ``"drip status"`` (the status
line itself, a byte every ``DRIP_S`` seconds, forever).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gdpo_verl.sandbox import ERROR, OK, OUTPUT_LIMIT, TIMEOUT, Limits, Sandbox

BROKEN = {
    "deep": b'{"status": "Success", "run_result": ' + b"[" * 1000 + b"]" * 1000 + b"}",
    "digits": b'{"status": "Failed", "run_result": {"status": "Finished", "return_code": ' + b"7" * 5000 + b"}}",
    "not json": b"<html><body>502 Bad Gateway</body></html>",
}
# a clean run of print(1), as the server answers it
PRINTED_1 = {"status": "Success", "message": "", "compile_result": None, "executor_pod_name": None, "files": {},
             "run_result": {"status": "Finished", "execution_time": 0.01, "return_code": 0, "stdout": "1\n",
                            "stderr": ""}}
DRIP_S = 0.3


class FusionServer:
    def __init__(self) -> None:
        self.faults: deque = deque()
        self.requests: list[dict] = []
        self._sandboxes: dict[tuple, Sandbox] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    fault = server.faults.popleft() if server.faults else None
                if isinstance(fault, int):
                    self.send_error(fault)
                    return
                if fault == "cut":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b'{"status": "Succ')
                    self.close_connection = True
                    return
                if fault == "drip":
                    self.drip(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n", b"")
                    return
                if fault == "drip status":
                    self.drip(b"", b"HTTP/1.0 200 OK")
                    return
                if isinstance(fault, str) and fault in BROKEN:
                    data = BROKEN[fault]
                elif fault == "length²":
                    data = json.dumps(PRINTED_1).encode()
                else:
                    data = json.dumps(fault if fault is not None else server.run_code(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "²" if fault == "length²" else str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def drip(self, start: bytes, rest: bytes) -> None:
                """``start`` at once, then ``rest`` and spaces after it, a byte every DRIP_S seconds, until the
                client hangs up or the server closes."""
                self.close_connection = True
                try:
                    self.wfile.write(start)
                    for byte in itertools.chain(rest, itertools.repeat(ord(" "))):
                        if server._closed.wait(DRIP_S):
                            return
                        self.wfile.write(bytes([byte]))
                except OSError:
                    pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_port}/run_code"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> FusionServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closed.set()
        self._http.shutdown()
        self._http.server_close()

    def run_code(self, body: dict) -> dict:
        if body.get("language") != "python":
            return {"status": "SandboxError", "message": f"language {body.get('language')!r} not in this stand-in"}
        key = (float(body.get("run_timeout", 10)), int(body.get("memory_limit_MB", 1024)))
        with self._lock:
            if key not in self._sandboxes:
                self._sandboxes[key] = Sandbox("local", Limits(wall_s=key[0], memory_mb=key[1], output_kb=65536),
                                               slots=8)
            sandbox = self._sandboxes[key]
        outcome = sandbox.run(body["code"], body.get("stdin") or "")
        if outcome.status not in (OK, ERROR, TIMEOUT, OUTPUT_LIMIT):
            return {"status": "SandboxError", "message": outcome.why}
        run = {"status": {TIMEOUT: "TimeLimitExceeded"}.get(outcome.status, "Finished"),
               "execution_time": outcome.seconds, "return_code": outcome.exit_code,
               "stdout": outcome.stdout, "stderr": outcome.stderr}
        return {"status": "Success" if outcome.status == OK else "Failed", "message": "", "compile_result": None,
                "run_result": run, "executor_pod_name": None, "files": {}}
