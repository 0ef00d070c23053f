"""The paper's coding rewards (section 4.3): pass rate, a length reward conditioned on passing, and a bug reward.

Point verl at it with ``reward.custom_reward_function.path=pkg://gdpo_verl.rewards.coding`` and the "gdpo_verl"
reward manager (it passes the response's token count as ``extra_info["response_length"]``). Options go in
``+reward.custom_reward_function.reward_kwargs.<name>``.

The program is the last fenced Python block (```` ```python ... ``` ````) of the answer part of the response (after
``</think>`` for reasoning models). It runs once per test case, in a sandbox (``gdpo_verl.sandbox``:
bubblewrap, no network, a read-only system, limits per test case on CPU, memory, processes, file size, output and
wall clock) that compiles it once and runs each test case in a process forked from that state, nothing passing
from one test case to the next (``Session``), or with ``sandbox=fusion`` on the Sandbox Fusion server of verl's
``reward.sandbox_fusion`` settings (``gdpo_verl/sandbox/fusion.py``), scored the same way. Every test case
counts (none is left out of ``pass_rate``'s denominator); once ``stop_after_timeouts`` of a response's runs ran out
of time, the cases not yet started are not run and fail.

The ground truth is the Eurus-2-RL-Data / PRIME JSON test format (a str, or the parsed dict): ``{"inputs": [...],
"outputs": [...]}`` runs the program with each input as its stdin and compares its stdout with the output;
with ``"fn_name"`` the program defines that function (or a ``class Solution`` method) and each input holds its
arguments (one JSON value per line, or a list), compared with the output's JSON value.

``compute_score`` returns:
    score          pass_rate_weight * pass_rate + length_weight * length (+ no_bug_weight * no_bug with objectives=3)
    pass_rate      the fraction of test cases whose output matched (a run that errs, times out or writes too much
                   fails its test case)
    length         1 when the response has at most ``max_length`` tokens AND every test case passed (the paper's
                   conditioned length reward, section 4.2.1), else 0
    no_bug         1 when the program ran clean on every test case: it exited 0 within its limits, whatever it
                   printed. 0 when it does not parse, raises, exits non-zero, crashes, times out or writes past
                   the output bound on any test case, and 0 when the response holds no program (no program is not
                   a clean one: otherwise the bug reward would pay for writing no code)
    code_found     1 when a fenced Python block was found
    verify_failed  1 when the answer could not be checked because of the checker itself (the sandbox could not
                   start a run, or no sandbox slot came free in time): every other key is then 0 and the failure is
                   logged with its reason; never scored as a wrong answer
    response_length, test_cases, tests_passed, timeouts (runs stopped at the wall clock or the CPU limit),
    tests_not_run (left out once ``stop_after_timeouts`` of the response's runs ran out of time): for the logs

Whether a run's output answers its test case: ``gdpo_verl.rewards.coding_outputs``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from gdpo_verl.answers.where import THINK_MODES, answer_part
from gdpo_verl.core.checks import one_of, shown, whole_number
from gdpo_verl.rewards.coding_outputs import UNREADABLE, call_passed, read_json, same_output
from gdpo_verl.rewards.common import response_length
from gdpo_verl.rewards.kwargs import WHERE, Kwarg, read, tokens, weight
from gdpo_verl.rewards.needs import RewardNeeds
from gdpo_verl.sandbox import ISOLATIONS, MODES, OK, TIMEOUT, UNAVAILABLE, Limits, Outcome, Sandbox, Session
from gdpo_verl.sandbox.fusion import FUSION, SETTINGS, FusionSandbox, FusionSettings

logger = logging.getLogger("gdpo_verl")

OBJECTIVES = (2, 3)
# The limits of each test case's run, options too: Limits (gdpo_verl/sandbox/limits.py) declares and checks them.
LIMIT_OPTIONS = ("wall_s", "cpu_s", "memory_mb", "processes", "file_mb", "output_kb")
SANDBOXES = (*MODES, FUSION)
# Limits a Sandbox Fusion request has no field for (memory is verl's reward.sandbox_fusion.memory_limit_mb there).
NOT_REMOTE = ("cpu_s", "memory_mb", "processes", "file_mb", "python", "isolation")


def _objectives(value: Any, what: str) -> int:
    if value not in OBJECTIVES or isinstance(value, bool):
        raise ValueError(f"{what} must be 2 (pass + length) or 3 (+ bug); got {shown(value)}.")
    return int(value)


def _sandbox_mode(value: Any, what: str) -> str:
    if value not in SANDBOXES:
        raise ValueError(f"{what} must be one of {SANDBOXES} ('none': limits without isolation, for trusted machines "
                         f"only; 'fusion': a Sandbox Fusion server at {SETTINGS}.url); got {shown(value)}.")
    return value


def _path_or_none(value: Any, what: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{what} must be the path of a python executable, or null; got {shown(value)}.")
    return value


def _settings_or_none(value: Any, what: str) -> Mapping | None:
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"{what} must be verl's reward.sandbox_fusion settings, or null; got {shown(value)}.")
    return value


def _slots_or_none(value: Any, what: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be a whole number of test cases run at once, 1 or more (or null: this reward "
                         f"worker's share of the node's cores); got {shown(value)}.")
    return value


# The options (reward.custom_reward_function.reward_kwargs), each with its default, check and meaning; the limits of
# a test case's run (LIMIT_OPTIONS) are options too.
KWARGS = {
    "max_length": Kwarg(4000, tokens, "the token budget of the length reward (the paper: 4000)."),
    "objectives": Kwarg(3, _objectives, "2: pass_rate and length; 3: and no_bug (the paper's two settings)."),
    "think": Kwarg("required", one_of(*THINK_MODES), "where the answer part begins, as for the math reward."),
    "pass_rate_weight": Kwarg(1.0, weight, "the weight of pass_rate in score; the recipes pass the weights of "
                                           "algorithm.gdpo_reward_weights here too."),
    "length_weight": Kwarg(1.0, weight, "the weight of length in score."),
    "no_bug_weight": Kwarg(1.0, weight, "the weight of no_bug in score (objectives=3)."),
    "sandbox": Kwarg("local", _sandbox_mode, "where programs run: local (bubblewrap), none (limits only: trusted "
                                             "machines) or fusion (a Sandbox Fusion server)."),
    "python": Kwarg(None, _path_or_none, "the python that runs the programs (null: the sandbox's default)."),
    "sandbox_fusion": Kwarg(None, _settings_or_none, "verl's reward.sandbox_fusion settings (url, max_concurrent, "
                                                     "memory_limit_mb) for sandbox=fusion; the gdpo_verl reward "
                                                     "manager passes them from the config."),
    "isolation": Kwarg("strict", one_of(*ISOLATIONS), "strict: a user id and a cgroup per slot (root and a "
                                                      "writable cgroup); relaxed: without them (docs/coding.md)."),
    "slots": Kwarg(None, _slots_or_none, "test cases run at once by a reward worker (null: its share of the "
                                         "node's cores)."),
    "stop_after_timeouts": Kwarg(1, lambda value, what: whole_number(value, f"{what} (0: never stop)", minimum=0),
                                 "once this many of a response's test cases ran out of time, its test cases not "
                                 "yet started are not run and fail (0: run all)."),
}

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)

# Runs a call-based test: the solution's file, then the function named in the test, with the arguments read as
# JSON from stdin; prints the marker given as its second argument and the result as JSON on one line (after anything
# the solution printed). A run that exits 0 without that line (the solution ended the process) is not clean.
_CALL_HARNESS = '''
import json, sys
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)  # an honest result may be an integer of any length
_args = json.loads(sys.stdin.read())
_source = open("solution.py").read()
_namespace = {"__name__": "solution"}
exec(compile(_source, "solution.py", "exec"), _namespace)
_name, _marker = sys.argv[1], sys.argv[2]
if _name in _namespace:
    _function = _namespace[_name]
else:
    _function = getattr(_namespace["Solution"](), _name)
_result = _function(*_args)
print()
print(_marker + json.dumps(_result))
'''


class CodingReward:
    """``compute_score`` with its own sandboxes (one per sandbox mode and limits asked for, each with a pool of
    threads as wide as it runs programs at once) and its own count of answers it could not check. The "gdpo_verl"
    reward manager makes one for itself (``compute_score.reward_class``).

    Args:
        workers: sandbox slots, test cases run at once in local sandboxes (a response takes one slot, and more
            when they are free); default: the cores this process may use. A Sandbox Fusion server takes
            ``reward.sandbox_fusion.max_concurrent`` at once.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or len(os.sched_getaffinity(0))
        self.failures = 0
        self._sandboxes: dict[tuple, tuple[Sandbox | FusionSandbox, ThreadPoolExecutor]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> CodingReward:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            made = list(self._sandboxes.values())
        for runner, pool in made:
            pool.shutdown(wait=True)
            if isinstance(runner, Sandbox):
                runner.close()

    def prepare(self, **kwargs: Any) -> None:
        """Make and check the sandbox that calls with these reward_kwargs will use (the "gdpo_verl" reward manager
        does it when it starts, before any program runs, with ``slots`` its share of the node's cores unless the
        kwargs set it); raises ``SandboxUnavailable`` naming the problem."""
        options = read(KWARGS, kwargs, more=LIMIT_OPTIONS)
        if options["slots"] is not None:
            self.workers = options["slots"]
        self._sandbox_of(options, kwargs)

    def _sandbox_of(self, options: Mapping[str, Any],
                    given: Mapping[str, Any]) -> tuple[Sandbox | FusionSandbox, ThreadPoolExecutor]:
        """The sandbox of the options ``read`` gave from the call's ``given`` keyword arguments."""
        limits = Limits(**{name: options[name] for name in LIMIT_OPTIONS if name in options})
        explicit = {name for name, value in given.items() if name != "python" or value}
        return self._sandbox(options["sandbox"], options["python"], limits, options["sandbox_fusion"], explicit,
                             options["isolation"])

    def sandbox(self, mode: str = "local", python: str | None = None, limits: Limits | None = None,
                sandbox_fusion: Any = None, given: set[str] = frozenset(),
                isolation: str = "strict") -> Sandbox | FusionSandbox:
        """The sandbox of these settings, made and checked (``check``) on first use. ``sandbox_fusion``: verl's
        ``reward.sandbox_fusion`` settings, for ``mode="fusion"`` only; ``given``: the options set explicitly (in
        that mode, a limit Sandbox Fusion cannot apply is refused, not ignored); ``isolation``: see ``Sandbox``."""
        return self._sandbox(mode, python, limits, sandbox_fusion, given, isolation)[0]

    def _sandbox(self, mode: str, python: str | None, limits: Limits | None, sandbox_fusion: Any,
                 given: set[str], isolation: str = "strict") -> tuple[Sandbox | FusionSandbox, ThreadPoolExecutor]:
        _sandbox_mode(mode, f"{WHERE}.sandbox")
        fusion = None
        if mode == FUSION:
            if sandbox_fusion is None:
                raise ValueError(f"{WHERE}.sandbox=fusion runs programs on the Sandbox Fusion server at verl's "
                                 f"{SETTINGS}.url, which is not set; set it (and {SETTINGS}.max_concurrent, "
                                 f".memory_limit_mb as needed).")
            unsupported = sorted(set(given) & set(NOT_REMOTE))
            if unsupported:
                raise ValueError(f"{WHERE} {unsupported}: a Sandbox Fusion server cannot apply these (its run_code "
                                 f"request takes a run timeout, wall_s, and memory, {SETTINGS}.memory_limit_mb); "
                                 "drop them, or use sandbox=local.")
            fusion = FusionSettings.from_mapping(sandbox_fusion)
        elif sandbox_fusion is not None:
            raise ValueError(f"{SETTINGS}.url is set but {WHERE}.sandbox is {mode!r}: programs would not run there. "
                             f"Set {WHERE}.sandbox=fusion to use the server, or unset {SETTINGS}.url.")
        limits = limits or Limits()
        key = (mode, python, limits, fusion, isolation)
        with self._lock:
            if key not in self._sandboxes:
                runner = FusionSandbox(fusion, limits) if fusion else Sandbox(mode, limits, python, slots=self.workers,
                                                                             isolation=isolation)
                runner.check()
                self._sandboxes[key] = (runner, ThreadPoolExecutor(runner.slots, thread_name_prefix="gdpo-coding"))
            return self._sandboxes[key]

    def __call__(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: Any,
        extra_info: dict | None = None,
        **kwargs: Any,
    ) -> dict[str, float]:
        """Score one response; see the module docstring for the keys, ``KWARGS`` for the options and ``Limits`` for
        ``wall_s``, ``cpu_s``, ``memory_mb``, ``processes``, ``file_mb`` and ``output_kb`` (per test case run)."""
        options = read(KWARGS, kwargs, more=LIMIT_OPTIONS)
        max_length, objectives = options["max_length"], options["objectives"]
        weights = [options["pass_rate_weight"], options["length_weight"], options["no_bug_weight"]]
        tokens = response_length(extra_info)
        cases = parse_tests(ground_truth)
        runner, pool = self._sandbox_of(options, kwargs)
        code = extract_code(solution_str, options["think"])

        result = {"response_length": float(tokens), "test_cases": float(len(cases.inputs)),
                  "code_found": float(code is not None), "tests_not_run": 0.0}
        if code is None:
            return _scored(result, passed=0, clean=False, timeouts=0, short=tokens <= max_length,
                           weights=weights, objectives=objectives)
        stop = _Stop(options["stop_after_timeouts"])
        program = code if cases.fn_name is None else f"open('solution.py', 'w').write({code!r})\n{_CALL_HARNESS}"
        if isinstance(runner, Sandbox):
            ran = _run_in_sessions(runner, pool, program, cases, stop)
        else:
            ran = list(pool.map(lambda case: stop.run(partial(runner.run, program), cases, case),
                                range(len(cases.inputs))))
        outcomes = [entry for entry in ran if entry is not None]
        failed = [outcome for outcome, _, _ in outcomes if outcome.status == UNAVAILABLE]
        if failed:
            self.failures += 1
            logger.warning("gdpo-verl coding: could not check a response, scored 0 with verify_failed=1: %s. %d so "
                           "far in this reward worker.", failed[0].why, self.failures)
            zero = dict.fromkeys(("score", "pass_rate", "length", "no_bug", "tests_passed", "timeouts"), 0.0)
            return {**result, **zero, "verify_failed": 1.0}
        passed = sum(matched for _, matched, _ in outcomes)
        clean = all(ran_clean for _, _, ran_clean in outcomes) and len(outcomes) == len(ran)
        timeouts = sum(out_of_time(outcome) for outcome, _, _ in outcomes)
        result["tests_not_run"] = float(len(ran) - len(outcomes))
        return _scored(result, passed=passed, clean=clean, timeouts=timeouts, short=tokens <= max_length,
                       weights=weights, objectives=objectives)


def out_of_time(outcome: Outcome) -> bool:
    """The run hit its wall clock or its CPU limit (``TIMEOUT``): in a sandbox of ours both are measured by the host,
    whatever the program did on the way (a program that catches SIGXCPU and exits 0 is out of time); a Sandbox
    Fusion run has no CPU limit, only its timeout."""
    return outcome.status == TIMEOUT


class _Stop:
    """Runs one response's test cases until ``limit`` of them ran out of time (0: no limit); a case not started
    by then is not run (``None``): a program too slow for its inputs costs about one time limit per slot, not one
    per test case."""

    def __init__(self, limit: int) -> None:
        self.limit, self.count = limit, 0
        self._lock = threading.Lock()

    def run(self, run: Callable[..., Outcome], cases: Cases, case: int) -> tuple | None:
        with self._lock:
            if self.limit and self.count >= self.limit:
                return None
        entry = _run_case(run, cases, case)
        if out_of_time(entry[0]):
            with self._lock:
                self.count += 1
        return entry


def _scored(result: dict, *, passed: int, clean: bool, timeouts: int, short: bool, weights: list[float],
            objectives: int) -> dict[str, float]:
    count = int(result["test_cases"])
    pass_rate = passed / count
    length = float(short and passed == count)
    no_bug = float(clean and bool(result["code_found"]))
    score = weights[0] * pass_rate + weights[1] * length + (weights[2] * no_bug if objectives == 3 else 0.0)
    return {**result, "score": score, "pass_rate": pass_rate, "length": length, "no_bug": no_bug,
            "tests_passed": float(passed), "timeouts": float(timeouts), "verify_failed": 0.0}


class Cases:
    """Parsed test cases: ``inputs`` and ``outputs`` (strings for stdin/stdout tests; argument lists and expected
    values for call-based ones) and ``fn_name`` (None for stdin/stdout)."""

    def __init__(self, inputs: list, outputs: list, fn_name: str | None) -> None:
        self.inputs, self.outputs, self.fn_name = inputs, outputs, fn_name


def parse_tests(ground_truth: Any) -> Cases:
    """The Eurus/PRIME JSON test format, as a str or parsed; a clear error for anything else (a data error)."""
    what = "the coding ground truth (reward_model.ground_truth)"
    if isinstance(ground_truth, (str, bytes)):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as error:
            raise ValueError(f"{what} is not JSON: {error}; expected {{'inputs': [...], 'outputs': [...]}}.") from None
    if not isinstance(ground_truth, Mapping) or "inputs" not in ground_truth or "outputs" not in ground_truth:
        raise ValueError(f"{what} must hold 'inputs' and 'outputs' (and optionally 'fn_name'); got "
                         f"{str(ground_truth)[:200]!r}.")
    inputs, outputs = list(ground_truth["inputs"]), list(ground_truth["outputs"])
    if not inputs or len(inputs) != len(outputs):
        raise ValueError(f"{what} has {len(inputs)} inputs and {len(outputs)} outputs; it needs at least one test "
                         "case and one output per input.")
    fn_name = ground_truth.get("fn_name") or None
    if fn_name is None:
        if not all(isinstance(value, str) for value in inputs + outputs):
            raise ValueError(f"{what}: stdin/stdout test cases must be strings (no fn_name was given).")
        return Cases(inputs, outputs, None)
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise ValueError(f"{what}: fn_name must be a Python identifier; got {fn_name!r}.")
    arguments = [_arguments(value, what) for value in inputs]
    expected = [_expected(value, what) for value in outputs]
    return Cases(arguments, expected, fn_name)


def _expected(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    read = read_json(value)
    if read is UNREADABLE:
        raise ValueError(f"{what}: a call-based output is not a JSON value: {value[:100]!r}.")
    return read


def _arguments(value: Any, what: str) -> list:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            return [json.loads(line) for line in value.split("\n") if line.strip()]
        except json.JSONDecodeError as error:
            raise ValueError(f"{what}: a call-based input is not one JSON value per line: {error}.") from None
    raise ValueError(f"{what}: a call-based input must be a list of arguments or JSON lines; got {value!r:.100}.")


def extract_code(text: str, think: str = "required") -> str | None:
    """The last fenced Python block of the answer part; None if there is none, if it is blank, or if there is no
    ``</think>`` when it is required."""
    answer = answer_part(text, think)
    blocks = _FENCE.findall(answer) if answer is not None else []
    return blocks[-1] if blocks and blocks[-1].strip() else None


def _run_in_sessions(runner: Sandbox, pool: ThreadPoolExecutor, program: str, cases: Cases, stop: _Stop) -> list:
    """Run a response's test cases in sessions of ``runner`` (the program compiled once per session, each test case
    a process forked from it): one that waits for a slot, run here, and another, in ``pool``, whenever a slot is free
    and what is left would take longer than starting a session costs (as measured on this response: slow test cases
    spread over the free cores at once, quick ones stay in one session); each session takes the next test case not
    yet taken until none is left."""
    ran: list = [None] * len(cases.inputs)
    following = iter(range(len(cases.inputs)))
    lock = threading.Lock()
    taken = [0]

    def take() -> int | None:
        with lock:
            case = next(following, None)
            taken[0] += case is not None
            return case

    def drain(session: Session) -> None:
        with session:
            while (case := take()) is not None:
                ran[case] = stop.run(session.run, cases, case)

    helpers = []
    try:
        with runner.session(program) as first:
            began, done = time.monotonic(), 0
            while (case := take()) is not None:
                ran[case] = stop.run(first.run, cases, case)
                done += 1
                left = len(ran) - taken[0]
                per_case = (time.monotonic() - began - first.start_seconds) / done
                # one more session saves left x per_case x (1/sessions - 1/(sessions + 1)) and costs a start
                while (first.slot is not None and (sessions := len(helpers) + 1) < runner.slots
                       and left * per_case / (sessions * (sessions + 1)) > first.start_seconds):
                    helper = runner.session(program, wait=False)
                    if helper is None:  # no slot free
                        break
                    try:
                        helpers.append(pool.submit(drain, helper))
                    except BaseException:  # the pool is shut down: its slot back
                        helper.close()
                        raise
    finally:
        for helper in helpers:
            helper.result()
    return ran


def _run_case(run: Callable[..., Outcome], cases: Cases, case: int) -> tuple[Outcome, bool, bool]:
    """(the run, whether its test case passed, whether it ran clean); ``run(stdin, argv)`` runs the program (for
    call-based tests, the harness and the solution)."""
    if cases.fn_name is None:
        outcome = run(cases.inputs[case], ())
        return outcome, outcome.status == OK and same_output(outcome.stdout, cases.outputs[case]), outcome.status == OK
    marker = f"gdpo-result-{secrets.token_hex(8)}:"
    outcome = run(json.dumps(cases.inputs[case]), (cases.fn_name, marker))
    line = next((line for line in reversed(outcome.stdout.splitlines()) if line.startswith(marker)), None)
    if outcome.status != OK or line is None:
        return outcome, False, False
    return outcome, call_passed(line[len(marker):], cases.outputs[case]), True


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **options: Any) -> dict[str, float]:
    """verl's entry point; the options are ``KWARGS`` and the limits ``LIMIT_OPTIONS``. Under the "gdpo_verl" reward
    manager a ``CodingReward`` of the manager's own is called instead (``compute_score.reward_class``)."""
    with CodingReward() as reward:
        return reward(data_source, solution_str, ground_truth, extra_info, **options)


def check_node(**reward_kwargs: Any) -> None:
    """Start this reward's sandbox once with ``reward_kwargs``, as each reward worker will (``CodingReward.prepare``):
    raises what keeps it from running on this node."""
    with CodingReward(workers=1) as reward:
        reward.prepare(**reward_kwargs)


compute_score.reward_class = CodingReward  # read by gdpo_verl.verl_adapter.reward_manager
compute_score.needs = RewardNeeds(
    returns=("pass_rate", "length", "no_bug", "response_length", "test_cases", "code_found", "tests_not_run",
             "tests_passed", "timeouts", "verify_failed"),
    weights_in_score=True, node_check=check_node, options=partial(read, KWARGS, more=LIMIT_OPTIONS))
