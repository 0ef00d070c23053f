"""BFCL-v3's multi-turn calls executed, and multi-turn answers judged, by BFCL's own code, in BFCL's environment.

BFCL runs a model's calls with Python's ``eval`` on strings the model wrote (``execute_multi_turn_func_call``), in
the process that keeps the simulated environments (file system, trading bot, ...). Two things are held here instead:

- **Only calls of a listed function are run.** ``eval`` is replaced, in BFCL's executor module only, by
  ``run_call``: a string is run only when it is a call of a public method of the instances BFCL keeps for the
  caller (the model's own environments when the model's calls run, the ground truth's when the checker runs the
  ground truth's) with literal arguments (what ToolRL's decoding writes: ``name(key=value, ...)``), or a literal.
  The string is compiled first, so it fails as ``eval`` would fail it (a repeated keyword, say). A name that is not
  such a method raises the ``NameError`` that ``eval`` raises for an undefined name, so BFCL reports it as it
  would; any other expression (a builtin such as ``open``, an attribute, a nested call, the other side's
  instances) is not run and BFCL reports "not run". Everything else is BFCL's: the instances, the method prefixes,
  the refused names, the result strings, the checker.
- **Every execution has a budget the kernel enforces.** Each runs in a child forked for it, under ``RLIMIT_CPU``
  and ``RLIMIT_AS``, and is killed at a wall-clock deadline; what it answers is at most ``OUTPUT_MB``. BFCL's
  calls take microseconds and answer kilobytes; a call such as ``power(base=10, exponent=10**12)`` would hold
  BFCL's own runner forever, and a few dozen file-system calls can grow a listing to gigabytes. An execution over
  its budget has no result: the conversation is *undecided* (reported as such, see ``score``), never a result BFCL
  did not give.

A child replays the conversation's earlier steps on fresh instances before the new step (the environments are
seeded, so the replay reaches the state BFCL's long-lived instances would hold), so no state outlives a child and
the process that forks never runs a model's call.

``python -m gdpo_verl.experiments.bfcl_execution serve`` is the executor that ``evaluate_bfcl.py generate`` starts
for multi-turn questions: JSON lines on stdin (``{"id", "steps"}``), one JSON line answered per request
(``{"results": [...]}``, or ``{"over": why}`` for an execution past its budget or one that failed: the question's
undecided), after a first ``{"ready": release}`` line.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gdpo_verl.experiments.bfcl_multi_turn import MULTI_TURN_CATEGORIES, decode_execute

# The last release of bfcl-eval whose data and scoring are BFCL v3's (the next, 2025.8.25, is BFCL v4): the one
# this executor runs and gdpo_verl/experiments/bfcl.py reads the data of.
BFCL_RELEASE = "2025.8.5"

# An execution's budget: BFCL's calls take microseconds, its environments a few megabytes, and a result of BFCL's
# ground truth at most 70 KB (multi_turn_long_context_113).
CPU_S = 5
MEMORY_MB = 1024
WALL_S = 10.0
OUTPUT_MB = 16
# A child's exit codes for the budgets it meets itself (its memory at RLIMIT_AS, its answer's size), and for a
# failure it could not describe.
EXIT_RAISED, EXIT_OVER_MEMORY, EXIT_OVER_OUTPUT = 1, 3, 4

# The instance names the running execute_multi_turn_func_call may reach (set by its wrapper in executor_module).
_reachable: frozenset[str] = frozenset()


class OverBudget(BaseException):
    """An execution past its memory budget: a BaseException, so that BFCL's ``except Exception`` around each call
    does not turn it into a result."""


class NotRun(Exception):
    """A call string that is not a listed function's call with literal arguments: BFCL reports it as the call's
    error."""


def bfcl_root() -> None:
    """BFCL writes result folders under its project root when imported: that root goes to a temporary folder."""
    if "BFCL_PROJECT_ROOT" not in os.environ:
        import atexit
        import shutil
        import tempfile

        root = tempfile.mkdtemp(prefix="bfcl-root-")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        os.environ["BFCL_PROJECT_ROOT"] = root


@functools.cache
def executor_module():
    """BFCL's multi-turn executor module, its environments imported, its ``eval`` replaced by ``run_call`` and its
    ``execute_multi_turn_func_call`` (the checker's too) wrapped to say which instances its calls may reach: those
    BFCL names for the model name it is given. Done once a process; a forked child inherits it."""
    bfcl_root()
    import importlib

    try:
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils
    except ImportError as exc:
        raise ValueError(f"BFCL's package is not importable here ({exc}); run this in BFCL's environment "
                         "(bash scripts/setup_bfcl_env.sh)") from exc
    for path in multi_turn_utils.CLASS_FILE_PATH_MAPPING.values():
        importlib.import_module(path)
    execute = multi_turn_utils.execute_multi_turn_func_call

    @functools.wraps(execute)
    def reaching_its_own(func_call_list, initial_config, involved_classes, model_name, test_entry_id,
                         long_context=False, is_evaL_run=False):
        global _reachable
        name = model_name + ("_eval" if is_evaL_run else "")  # BFCL's instance names, as it writes them
        prefix = f"{name.replace('-', '_').replace('.', '_').replace('/', '_')}_{test_entry_id}_"
        _reachable = frozenset(f"{prefix}{class_name.lower()}_instance" for class_name in involved_classes)
        try:
            return execute(func_call_list, initial_config, involved_classes, model_name, test_entry_id,
                           long_context=long_context, is_evaL_run=is_evaL_run)
        finally:
            _reachable = frozenset()

    multi_turn_utils.execute_multi_turn_func_call = multi_turn_checker.execute_multi_turn_func_call = reaching_its_own
    multi_turn_utils.eval = lambda source: run_call(source, vars(multi_turn_utils), _reachable)
    return multi_turn_utils


def literal(node: ast.AST) -> Any:
    """A literal's value, as ``eval`` computes it; a name raises ``eval``'s NameError; anything else is not run."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        raise NameError(f"name '{node.id}' is not defined")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        values = [literal(element) for element in node.elts]
        return values if isinstance(node, ast.List) else tuple(values) if isinstance(node, ast.Tuple) else set(values)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {literal(key): literal(value) for key, value in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    raise NotRun(f"not run: only a listed function's call with literal arguments is run, not {type(node).__name__}")


def run_call(source: str, namespace: Mapping[str, Any], reachable: frozenset[str]) -> Any:
    """What BFCL's ``eval(func_call)`` returns, for a call of a public method of an instance in ``reachable`` (the
    name BFCL prefixed) with literal arguments, or a literal; see the module's docstring."""
    compile(source, "<string>", "eval")  # compiled, not run: every SyntaxError eval would raise, as eval's
    tree = ast.parse(source, "<string>", "eval").body
    if not isinstance(tree, ast.Call):
        return literal(tree)
    function = tree.func
    if isinstance(function, ast.Name):
        raise NameError(f"name '{function.id}' is not defined")
    if not (isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name)
            and function.value.id in reachable and function.value.id in namespace
            and not function.attr.startswith("_")):
        raise NotRun("not run: only a listed function's call with literal arguments is run")
    if any(isinstance(argument, ast.Starred) for argument in tree.args) or any(
            keyword.arg is None for keyword in tree.keywords):
        raise NotRun("not run: only a listed function's call with literal arguments is run")
    method = getattr(namespace[function.value.id], function.attr, None)
    if not inspect.ismethod(method):  # a public attribute that is not a method (a file system's root, say)
        raise NotRun("not run: only a listed function's call with literal arguments is run")
    args = [literal(argument) for argument in tree.args]
    kwargs = {keyword.arg: literal(keyword.value) for keyword in tree.keywords}
    try:
        return method(*args, **kwargs)
    except MemoryError:
        raise OverBudget("the call ran out of its memory budget") from None


def bounded(function: Callable[..., Any], *args: Any, cpu_s: int = CPU_S, memory_mb: int = MEMORY_MB,
            wall_s: float = WALL_S) -> tuple[str, Any]:
    """``function(*args)`` in a forked child under ``RLIMIT_CPU`` (``cpu_s``) and ``RLIMIT_AS`` (``memory_mb`` over
    the child's start), killed at ``wall_s``: ``("ok", its JSON-able value)``, ``("over", why)`` past a budget,
    or ``("raised", what)`` when it raised or died otherwise. What the child prints is dropped: its answer is the
    pipe's.

    Which budget ended it is what the kernel reports, never a usage read back: the wall clock is this process's
    kill; the CPU budget is the kernel's ``SIGXCPU`` at the soft limit (nothing in the child handles it: the model's
    calls run only listed methods); memory is the child's ``MemoryError`` at ``RLIMIT_AS`` (BFCL's or ours), answered
    by the exit code ``EXIT_OVER_MEMORY`` alone, since a child at its memory limit may not build another answer;
    output is ``EXIT_OVER_OUTPUT``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = EXIT_RAISED
        try:
            os.close(read_end)
            quiet = os.open(os.devnull, os.O_WRONLY)  # what it prints (BFCL's, or the warnings compiling a call
            os.dup2(quiet, 1)                         # emits: 200 a call, replayed every later step) goes nowhere
            os.dup2(quiet, 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU's default action dumps a core
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
            with open("/proc/self/statm") as statm:
                start = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (start + (memory_mb << 20),) * 2)
            try:
                data = json.dumps({"ok": function(*args)}).encode()
            except (OverBudget, MemoryError):
                os._exit(EXIT_OVER_MEMORY)
            except Exception as exc:  # reported to the parent, which names it
                data = json.dumps({"raised": f"{type(exc).__name__}: {str(exc)[:1000]}"}).encode()
            if len(data) > OUTPUT_MB << 20:
                os._exit(EXIT_OVER_OUTPUT)
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
            code = 0
        except MemoryError:  # building or writing the answer at the memory limit
            code = EXIT_OVER_MEMORY
        except BaseException:
            code = EXIT_RAISED
        os._exit(code)
    os.close(write_end)
    chunks, size, deadline, timed_out = [], 0, time.monotonic() + wall_s, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > OUTPUT_MB << 20:  # more than a child that checked its answer writes
                os.kill(pid, signal.SIGKILL)
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status, _ = os.wait4(pid, 0)
    if timed_out:
        return "over", f"past its wall-clock budget ({wall_s:g} s)"
    if size > OUTPUT_MB << 20 or os.WIFEXITED(status) and os.WEXITSTATUS(status) == EXIT_OVER_OUTPUT:
        return "over", f"over its output budget ({OUTPUT_MB} MB)"
    if os.WIFSIGNALED(status):
        signal_number = os.WTERMSIG(status)
        if signal_number == signal.SIGXCPU:
            return "over", f"over its CPU budget ({cpu_s} s)"
        return "raised", f"the execution's process died of signal {signal.Signals(signal_number).name}"
    if os.WEXITSTATUS(status) == EXIT_OVER_MEMORY:
        return "over", f"over its memory budget ({memory_mb} MB)"
    try:
        (kind, value), = json.loads(b"".join(chunks)).items()
    except ValueError:
        return "raised", f"the execution's process exited ({os.WEXITSTATUS(status)}) without a result"
    return kind, value


def load_entries(category: str) -> dict[str, dict[str, Any]]:
    """BFCL's questions of a multi-turn category by id, with their ground truth."""
    bfcl_root()
    from bfcl_eval import utils
    from bfcl_eval.constants import eval_config

    name = f"BFCL_v3_{category}.json"
    truth = {entry["id"]: entry["ground_truth"]
             for entry in utils.load_file(eval_config.POSSIBLE_ANSWER_PATH / name)}
    return {entry["id"]: {**entry, "ground_truth": truth[entry["id"]]}
            for entry in utils.load_file(eval_config.PROMPT_PATH / name)}


def replay(entry: Mapping[str, Any], steps: Sequence[Sequence[str]]) -> list[str]:
    """The results of the last of ``steps`` (each a list of call strings), run by BFCL's executor after the steps
    before it, on instances fresh from the question's initial state."""
    utils = executor_module()
    category = entry["id"].rsplit("_", 1)[0]
    results: list[str] = []
    for step in steps:
        results, _ = utils.execute_multi_turn_func_call(
            list(step), entry["initial_config"], entry["involved_classes"], "gdpo_verl", entry["id"],
            long_context="long_context" in category or "composite" in category, is_evaL_run=False)
    return results


def check(entry: Mapping[str, Any], turns: Sequence[Sequence[str]]) -> dict[str, str | bool]:
    """BFCL's ``multi_turn_checker`` on one question's responses (per turn, per step), decoded as BFCL's runner
    decodes them: steps that fail to decode, or decode to no call, are left out."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    executor_module()
    decoded = []
    for turn in turns:
        steps = []
        for response in turn:
            try:
                calls = decode_execute(response)
            except ValueError:
                continue
            if calls:
                steps.append(calls)
        decoded.append(steps)
    category = entry["id"].rsplit("_", 1)[0]
    result = multi_turn_checker(decoded, entry["ground_truth"], dict(entry), category, "gdpo_verl")
    return {"valid": bool(result["valid"]), "error_type": str(result.get("error_type", ""))}


def judge(entry: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[bool | None, str]:
    """BFCL's verdict on one multi-turn conversation (``{turns: [[step response, ...], ...]}``, and ``error`` or
    ``undecided`` where it stopped), and its error type; ``None`` when it cannot be decided: an execution past its
    budget, in the conversation or in the checker's replay of it, or a checker that failed on the answer. The
    decoding and the checker run in a ``bounded`` child: nothing an answer holds stops the scoring."""
    if record.get("undecided"):
        return None, f"undecided: {record['undecided']}"
    if record.get("error"):
        return False, "multi_turn:inference_error"
    turns = record.get("turns")
    if not isinstance(turns, list) or not all(
            isinstance(turn, list) and all(isinstance(step, str) for step in turn) for turn in turns):
        raise ValueError(f"multi-turn question {entry['id']}: turns must be lists of response texts")
    if len(turns) != len(entry["ground_truth"]):
        return False, "multi_turn:force_terminated"
    executor_module()  # imported once here, not in each child
    kind, value = bounded(check, entry, turns)
    if kind == "over":
        return None, f"undecided: BFCL's checker, replaying the answer, went {value}"
    if kind == "raised":
        return None, f"undecided: BFCL's checker failed on the answer: {value}"
    return value["valid"], "" if value["valid"] else value["error_type"]


def serve() -> int:
    """The executor ``evaluate_bfcl.py generate`` talks to: see the module's docstring. Its answers go to a copy
    of standard output taken first; anything else written to standard output, here or in a child, goes to the
    error output, so the protocol holds only answers."""
    stdin, stdout = sys.stdin, os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    executor_module()
    entries: dict[str, dict[str, Any]] = {}
    for category in MULTI_TURN_CATEGORIES:
        entries.update(load_entries(category))
    print(json.dumps({"ready": BFCL_RELEASE}), file=stdout, flush=True)
    for line in stdin:
        request = json.loads(line)
        entry = entries.get(request.get("id"))
        if entry is None:
            print(json.dumps({"raised": f"no multi-turn question {request.get('id')!r} in BFCL's data"}),
                  file=stdout, flush=True)
            continue
        kind, value = bounded(replay, entry, request["steps"])
        answer = {"results": value} if kind == "ok" else {
            "over": value if kind == "over" else f"failed ({value})"}  # the question's undecided, either way
        print(json.dumps(answer), file=stdout, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python -m gdpo_verl.experiments.bfcl_execution serve")
    sys.exit(serve())
