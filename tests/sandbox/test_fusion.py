"""The coding reward with sandbox=fusion: programs run on a Sandbox Fusion server and score as they do locally.

The server here is tests/fusion_server.py, a stand-in that speaks Sandbox Fusion's run_code API (the real server is a
container image this machine cannot pull) and runs each program in the local bubblewrap sandbox.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from gdpo_verl.sandbox import fusion as sandbox_fusion
from gdpo_verl.rewards.coding import CodingReward
from gdpo_verl.sandbox import UNAVAILABLE, Limits, SandboxUnavailable
from tests.fusion_server import PRINTED_1, FusionServer

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the stand-in server runs programs under bubblewrap")

ADD = json.dumps({"inputs": ["1 2\n", "3 4\n", "10 -5\n"], "outputs": ["3\n", "7\n", "5\n"]})
CALL = json.dumps({"fn_name": "add", "inputs": ["1\n2", "3\n4"], "outputs": ["3", "7"]})
KEYS = ("pass_rate", "length", "no_bug", "verify_failed", "tests_passed", "timeouts", "tests_not_run", "code_found")

# (program, ground truth, response tokens): each scored locally and on the server
PROGRAMS = {
    "correct": ("a, b = map(int, input().split())\nprint(a + b)", ADD, 100),
    "correct but long": ("a, b = map(int, input().split())\nprint(a + b)", ADD, 5000),
    "wrong, no error": ("a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)", ADD, 100),
    "raises on one test": ("a, b = map(int, input().split())\nassert b > 0\nprint(a + b)", ADD, 100),
    "syntax error": ("print(", ADD, 100),
    "times out on one test": ("import time\na, b = map(int, input().split())\nif b < 0:\n    time.sleep(60)\n"
                              "print(a + b)", ADD, 100),
    "call-based, correct": ("def add(a, b):\n    return a + b", CALL, 100),
    "call-based, a method, wrong on one": ("class Solution:\n    def add(self, a, b):\n        return 3", CALL, 100),
    "call-based, exits itself": ("import os\ndef add(a, b):\n    os._exit(0)", CALL, 100),
    "no code": (None, ADD, 100),
}


@pytest.fixture(scope="module")
def server():
    with FusionServer() as server:
        yield server


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(sandbox_fusion, "RETRY_DELAY_S", 0.01)


@pytest.fixture(scope="module")
def reward():
    with CodingReward(workers=2) as reward:
        yield reward


def text(program):
    return "reasoning</think>" + (f"```python\n{program}\n```" if program is not None else "no code, sorry")


def on_server(reward, server, program, truth=ADD, tokens=100, **options):
    settings = {"url": server.url, "max_concurrent": 4, "memory_limit_mb": 512}
    return reward("apps", text(program), truth, {"response_length": tokens}, sandbox="fusion",
                  sandbox_fusion=settings, wall_s=4, **options)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_program_scores_the_same_on_sandbox_fusion_as_in_the_local_sandbox(reward, server, name):
    program, truth, tokens = PROGRAMS[name]
    local = reward("apps", text(program), truth, {"response_length": tokens}, wall_s=4, cpu_s=2)
    remote = on_server(reward, server, program, truth, tokens)
    assert {key: remote[key] for key in KEYS} == {key: local[key] for key in KEYS}
    assert remote["score"] == local["score"]


def test_every_test_case_is_sent_with_the_run_timeout_and_memory_limit(reward, server):
    # verl's own sandbox_fusion scorer judges only the first 10 test cases in its continuous mode; all 12 count here
    truth = json.dumps({"inputs": [f"{i}\n" for i in range(12)], "outputs": [f"{i * 2}\n" for i in range(12)]})
    before = len(server.requests)
    result = on_server(reward, server, "print(int(input()) * 2 if int(input() or 0) >= 0 else 0)", truth)
    sent = server.requests[before:]
    assert len(sent) == 12 and result["test_cases"] == 12.0
    assert {(r["language"], r["run_timeout"], r["memory_limit_MB"]) for r in sent} == {("python", 4, 512)}
    assert sorted(r["stdin"] for r in sent) == sorted(f"{i}\n" for i in range(12))


def test_a_busy_server_is_asked_again_and_a_server_that_stays_down_is_verify_failed(reward, server, caplog):
    correct = PROGRAMS["correct"][0]
    server.faults.extend([503, 429, "cut"])  # answers lost (busy, over capacity, a connection cut): asked again
    assert on_server(reward, server, correct)["pass_rate"] == 1.0
    server.faults.extend([503] * 9)  # every attempt of the 3 test cases lost: the response is not judged
    result = on_server(reward, server, correct)
    assert (result["verify_failed"], result["pass_rate"], result["no_bug"], result["score"]) == (1.0, 0.0, 0.0, 0.0)
    assert "HTTP 503" in caplog.text and "tried 3 times" in caplog.text


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"status": "SandboxError", "message": "executor pod lost"}, "Sandbox Fusion's own error: 'executor pod lost'"),
        ({"status": "Queued"}, "status 'Queued', which this client does not know"),
        ({"status": "Success", "message": ""}, "Sandbox Fusion gave no run result"),
        ({"status": "Failed", "run_result": {"status": "Killed"}}, "run status 'Killed'"),
        # Error: the server failed to run the command (a crash of the program comes back Finished, non-zero)
        ({"status": "Failed", "run_result": {"status": "Error", "stderr": "spawn failed"}}, "run status 'Error'"),
        ({"status": "Failed", "run_result": {"status": "Finished", "return_code": 0}}, "with status 'Failed'"),
        ({"status": "Success", "run_result": {"status": "Finished", "return_code": 1}}, "with status 'Success'"),
        ({"status": "Failed", "compile_result": {"status": "Error"}}, "Sandbox Fusion gave no run result"),
        ([1, 2], "not a run_code result"),
        ("deep", "RecursionError"),  # an answer that cannot be read: verify_failed, and the reward raises nothing
    ],
)
def test_an_answer_that_is_not_a_judgement_is_verify_failed_never_a_wrong_answer(reward, server, caplog, answer, why):
    server.faults.append(answer)
    result = on_server(reward, server, PROGRAMS["correct"][0])
    assert (result["verify_failed"], result["pass_rate"], result["no_bug"]) == (1.0, 0.0, 0.0)
    assert why in caplog.text


def test_output_past_the_bound_is_not_clean(reward, server):
    result = on_server(reward, server, "print('x' * 300_000)", output_kb=64)
    assert (result["pass_rate"], result["no_bug"], result["verify_failed"]) == (0.0, 0.0, 0.0)
    # the server keeps 1 MiB of output: reaching it is the output bound, whatever output_kb says (a cut output
    # would otherwise be compared as if whole); an answer too large for the bound is not read past it
    assert on_server(reward, server, "print('x' * (1 << 20))")["no_bug"] == 0.0
    server.faults.append({"status": "Success", "run_result": {"status": "Finished", "return_code": 0,
                                                              "stdout": "1\n" * 3_000_000}})
    assert on_server(reward, server, PROGRAMS["correct"][0])["no_bug"] == 0.0


def test_a_signal_the_server_reports_as_a_negative_code_is_a_crash_not_a_timeout(reward, server):
    killed = {"status": "Failed", "run_result": {"status": "Finished", "return_code": -9, "stdout": "", "stderr": ""}}
    server.faults.extend([killed] * 3)
    result = on_server(reward, server, PROGRAMS["correct"][0])
    assert (result["no_bug"], result["verify_failed"], result["timeouts"], result["tests_not_run"]) == (0.0, 0.0, 0.0, 0.0)
    fusion = reward.sandbox("fusion", None, sandbox_fusion={"url": server.url, "max_concurrent": 4,
                                                           "memory_limit_mb": 512})
    server.faults.append(killed)
    outcome = fusion.run("print(1)", "")
    assert (outcome.status, outcome.exit_code, outcome.why) == ("error", 137, "killed by SIGKILL")


def test_a_server_that_cannot_be_reached_stops_the_reward_at_its_start_naming_the_url_and_the_fix():
    with FusionServer() as gone:
        url = gone.url
    with CodingReward(workers=1) as reward, pytest.raises(SandboxUnavailable) as error:
        reward.prepare(sandbox="fusion", sandbox_fusion={"url": url})
    assert f"Sandbox Fusion at {url} did not run a test program: cannot reach {url}" in str(error.value)
    assert "reward.sandbox_fusion.url" in str(error.value) and str(error.value).startswith("sandbox on node ")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"sandbox": "fusion"}, "reward.sandbox_fusion.url, which is not set"),
        ({"sandbox_fusion": {"url": "http://x:1/run_code"}}, "reward.sandbox_fusion.url is set but "
                                                             "reward.custom_reward_function.reward_kwargs.sandbox is 'local'"),
        ({"sandbox": "fusion", "sandbox_fusion": {"url": "http://x:1/run_code"}, "cpu_s": 2},
         r"\['cpu_s'\]: a Sandbox Fusion server cannot apply these"),
        ({"sandbox": "fusion", "sandbox_fusion": {"url": "x:1/run_code"}}, "reward.sandbox_fusion.url must be the http"),
        ({"sandbox": "fusion", "sandbox_fusion": {"url": "http://x:1/run_code", "max_concurrent": 0}},
         "reward.sandbox_fusion.max_concurrent must be a whole number of at least 1"),
        ({"sandbox": "remote"}, "sandbox must be one of \\('local', 'none', 'fusion'\\)"),
    ],
)
def test_a_misconfigured_remote_sandbox_is_refused_before_any_program_runs(options, problem):
    with CodingReward(workers=1) as reward, pytest.raises(ValueError, match=problem):
        reward.prepare(**options)


def test_a_server_that_does_not_answer_in_time_costs_one_try_not_three(monkeypatch):
    # a connect that times out is not asked again, as an answer that does not come in time is not: a server that
    # swallows requests would otherwise hold each test case for three tries. (The connect is replaced here: a
    # connect timeout cannot be made to happen on demand on this machine.)
    left = []

    def never_connects(host, port, deadline, tls):
        left.append(deadline - time.monotonic())
        raise TimeoutError("timed out")

    monkeypatch.setattr(sandbox_fusion, "_connect", never_connects)
    fusion = sandbox_fusion.FusionSandbox(sandbox_fusion.FusionSettings("http://10.0.0.1:1/run_code"), Limits(wall_s=4))
    outcome = fusion.run("print(1)", "")
    assert (outcome.status, len(left)) == (UNAVAILABLE, 1) and 63 < left[0] <= 4 + sandbox_fusion.REQUEST_SLACK_S
    assert "Sandbox Fusion at http://10.0.0.1:1/run_code did not answer within 64 s" in outcome.why


def fusion_at(server, wall_s=4.0):
    return sandbox_fusion.FusionSandbox(sandbox_fusion.FusionSettings(server.url), Limits(wall_s=wall_s))


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        # JSON nested 1,000 deep, past the interpreter's recursion limit
        ("deep", "RecursionError: maximum recursion depth exceeded"),
        # an integer of 5,000 digits, past Python's limit on converting one
        ("digits", "ValueError: Exceeds the limit (4300 digits) for integer string conversion"),
        # a Content-Length of a Unicode digit, which str.isdigit takes for one and int refuses
        ("length²", "ValueError: its Content-Length '²' is not a number of bytes"),
        ("not json", "JSONDecodeError: Expecting value: line 1 column 1 (char 0); it began b'<html>"),
        ([1, 2], "TypeError: the answer is an array, not a run_code result (an object)"),
        ("Success", "TypeError: the answer is a string, not a run_code result (an object)"),
        ({"status": ["Success"]}, "TypeError: status is an array, not a string or null"),
        ({"status": "SandboxError", "message": {"pod": "lost"}}, "TypeError: message is an object, not a string"),
        ({"status": "Success", "run_result": "Finished"}, "TypeError: run_result is a string, not an object or null"),
        # fields of other types that would otherwise have been taken for output: a number or a list printed
        ({"status": "Success", "run_result": {"status": "Finished", "return_code": 0, "stdout": 1}},
         "TypeError: run_result.stdout is a whole number, not a string or null"),
        ({"status": "Success", "run_result": {"status": "Finished", "return_code": 0, "stdout": ["1\n"]}},
         "TypeError: run_result.stdout is an array, not a string or null"),
        ({"status": "Failed", "run_result": {"status": "Finished", "return_code": 0, "stderr": {"line": 1}}},
         "TypeError: run_result.stderr is an object, not a string or null"),
        # an exit code of true, a fraction or out of range, which would otherwise have been taken for a crash
        ({"status": "Failed", "run_result": {"status": "Finished", "return_code": True, "stdout": ""}},
         "TypeError: run_result.return_code is true or false, not a whole number or null"),
        ({"status": "Failed", "run_result": {"status": "Finished", "return_code": 1.5, "stdout": ""}},
         "TypeError: run_result.return_code is a number, not a whole number or null"),
        ({"status": "Failed", "run_result": {"status": "Finished", "return_code": -10**300, "stdout": ""}},
         "ValueError: run_result.return_code is not an exit code (-255 to 255)"),
        ({"status": "Failed", "compile_result": {"status": "Finished", "return_code": 1, "stderr": 7}},
         "TypeError: compile_result.stderr is a whole number, not a string or null"),
    ],
)
def test_an_answer_that_cannot_be_read_is_unavailable_naming_what_was_wrong_and_raises_nothing(server, answer, why):
    server.faults.append(answer)
    before = len(server.requests)
    outcome = fusion_at(server).run("print(1)", "")  # returns: nothing the server answers makes it raise
    assert (outcome.status, outcome.exit_code, outcome.stdout) == (UNAVAILABLE, None, "")
    assert outcome.why.startswith(f"{server.url} gave an answer this client cannot read: ") and why in outcome.why
    assert len(server.requests) == before + 1  # a malformed answer is not asked for again


@pytest.mark.parametrize("fault", ["drip", "drip status"])
def test_a_server_that_drips_its_answer_ends_the_try_at_its_deadline(server, monkeypatch, fault):
    # one byte every 0.3 s, forever: each read is within the socket's timeout, so only a deadline on the whole try
    # (wall_s + REQUEST_SLACK_S, here 1 + 0.5 s) ends it; whether the body drips or the status line itself
    monkeypatch.setattr(sandbox_fusion, "REQUEST_SLACK_S", 0.5)
    server.faults.append(fault)
    before = len(server.requests)
    started = time.monotonic()
    outcome = fusion_at(server, wall_s=1).run("print(1)", "")
    took = time.monotonic() - started
    assert (outcome.status, outcome.why) == (UNAVAILABLE, f"Sandbox Fusion at {server.url} did not answer within 1.5 s")
    assert 1.4 < outcome.seconds <= took < 1.5 + 0.5
    assert len(server.requests) == before + 1  # a try that ran out its own time is not repeated


def test_an_answer_with_every_field_run_code_gives_is_read(server):
    # the checks of the fields' types take what the server gives: nulls, and fields this client does not read
    server.faults.append(PRINTED_1)
    outcome = fusion_at(server).run("print(1)", "")
    assert (outcome.status, outcome.exit_code, outcome.stdout) == ("ok", 0, "1\n")
