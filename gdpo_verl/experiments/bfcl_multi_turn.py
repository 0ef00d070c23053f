"""BFCL-v3's multi-turn questions as ToolRL's BFCL handler holds the conversation (``benchmarks/BFCL/rlla_qwen.py``
in ToolRL, run by BFCL's prompting loop, ``inference_multi_turn_prompting``), written anew. Needs no BFCL: this runs
on the GPU node beside vLLM, and talks to BFCL's executor (``bfcl_execution.py``) in BFCL's environment.

Per question, turn by turn: the turn's user message joins the dialogue; the model answers; the calls of its last
``<tool_call>`` block, decoded as the handler's ``decode_execute`` does, are run by BFCL's executor and their results
join the dialogue; the model answers again, until an answer has no call (the turn ends) or 20 steps of a turn have
run calls (BFCL's ``MAXIMUM_STEP_LIMIT``: the question is force-terminated). Each step's prompt is the handler's:
ToolRL's system prompt with the question's tools, and the whole dialogue as one user message (``<user>``, the
model's answers, ``<obs>`` for each result, and after a result the handler's request to go on or answer). The
conversations advance together, one batch of generation a step.

What a conversation's record holds: ``{id, category, turns: [[response, ...] per turn]}``, with ``error`` (the
dialogue outgrew the model's context: BFCL's inference error, scored wrong) or ``undecided`` (an execution went
past its budget, ``bfcl_execution.py``) where it stopped early.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                         "multi_turn_long_context")
# BFCL's MAXIMUM_STEP_LIMIT (bfcl_eval.constants.default_prompts): a turn's steps that run calls, past which the
# question is force-terminated.
MAXIMUM_STEP_LIMIT = 20
# Wall-clock seconds a question's executions may take together in play (each is bounded by bfcl_execution.WALL_S):
# BFCL's calls take microseconds, so an honest question takes well under a second of them.
QUESTION_EXECUTION_S = 60.0

# The handler's user-turn suffix. Its _format_prompt also has a multi-turn wording behind turn_type="multi_turn",
# but BFCL's OSSHandler calls _format_prompt(messages, function), so the single-turn wording is what it sends.
USER_SUFFIX = (
    "\nIf there's no appropriate tools to apply or required parameters are missing, please directly inform me in "
    "your response without any tool call, or call the tool with the name as 'None'. Otherwise, you should use one "
    "or more necessary tool calls to complete the given task in this turn."
)
AFTER_RESULTS = (
    "\n<user> If you think you have completed the current task, or the task cannot be finished, please respond "
    "directly without additional tool calls. If you encounter an error during tool execution or the task remains "
    "unfinished, retry with the one or more necessary tool calls according to your thought and plan until "
    "completion. Based on the tool execution feedback, reflect on if understanding or selectioin of tool is wrong, "
    "what tool calling step is missing, and how to achieve the task goal from now on. </user>\n"
)


def decode_execute(response: str) -> list[str]:
    """The calls of a response as the handler's ``decode_execute`` writes them for BFCL's executor:
    ``name(key=repr(value), ...)`` for each JSON object a line of the last ``<tool_call>`` block (lines that do not
    parse, entries that are not objects and calls named "None" are left out); no block: ``[]``. A call whose name
    is not a string, or whose parameters are not an object (but a call named "None"), fails the whole response
    (ValueError), as the handler's does."""
    if "<tool_call>" not in response:
        return []
    calls = []
    for line in response.split("<tool_call>")[-1].split("</tool_call>")[0].strip().split("\n"):
        try:
            call = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(call, dict):
            continue
        name, parameters = call.get("name", ""), call.get("parameters", {})
        if not isinstance(name, str):
            raise ValueError(f"a call's name must be a string: {line[:200]!r}")
        if name.strip().lower() == "none":  # before its parameters are read, as the handler's
            continue
        if not isinstance(parameters, dict):
            raise ValueError(f"a call's parameters must be an object: {line[:200]!r}")
        try:
            calls.append(f"{name}({', '.join(f'{key}={value!r}' for key, value in parameters.items())})")
        except RecursionError:  # a value nested nearly as deep as JSON's parser goes: repr goes deeper
            raise ValueError(f"a call's parameters are nested too deep to write: {line[:200]!r}") from None
    return calls


def chat(system: str, messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The handler's [system, user] chat for one step: the dialogue so far as one user message, as valid Unicode
    (``unicode_text``) whatever the model wrote into its calls and their results."""
    user = "**Dialogue Records History**\n"
    for index, message in enumerate(messages):
        if message["role"] == "user":
            user += f"<user> {message['content'].strip()}{USER_SUFFIX} </user>\n"
        elif message["role"] == "tool":
            user += (f"<obs> You have made the tool call {message['name'].strip()}. Execution returns: "
                     f"{message['content'].strip()} </obs>\n")
            if index == len(messages) - 1:
                user += AFTER_RESULTS
        elif message["role"] == "assistant":
            user += f"\n{message['content'].strip()}\n"
    return [{"role": "system", "content": unicode_text(system)},
            {"role": "user", "content": unicode_text(user.strip())}]


def unicode_text(text: str) -> str:
    """``text`` with every lone surrogate (what JSON's ``\\ud800`` decodes to: plain ASCII a model can write in a
    call's name, key or value, which BFCL's results then quote) as U+FFFD, the replacement character; a tokenizer
    refuses a string that holds one."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Conversation:
    """One question's dialogue, advanced a step at a time by ``run``."""

    def __init__(self, record: Mapping[str, Any]):
        self.record = record
        self.messages: list[dict[str, str]] = []
        self.turns: list[list[str]] = []
        self.executed: list[list[str]] = []  # every step's calls, in order: what the executor replays
        self.steps = 0
        self.stopped: dict[str, str] | None = None
        self.next_turn()

    @property
    def running(self) -> bool:
        return self.stopped is None and len(self.turns) <= len(self.record["turns"])

    def next_turn(self) -> None:
        index = len(self.turns)
        if index < len(self.record["turns"]):
            self.messages.extend(self.record["turns"][index])
        self.turns.append([])
        self.steps = 0

    def prompt(self) -> list[dict[str, str]]:
        return chat(self.record["system"], self.messages)

    def answer(self, response: str) -> list[str]:
        """The model's answer to this step: the calls to run, or ``[]`` when the turn ends with it."""
        self.turns[-1].append(response)
        self.messages.append({"role": "assistant", "content": response})
        try:
            calls = decode_execute(response)
        except ValueError:
            calls = []
        if not calls:
            self.next_turn()
        return calls

    def observe(self, calls: Sequence[str], results: Sequence[str]) -> None:
        self.executed.append(list(calls))
        self.messages.extend({"role": "tool", "name": call, "content": result} for call, result in zip(calls, results))
        self.steps += 1
        if self.steps > MAXIMUM_STEP_LIMIT:
            self.stopped = {}  # BFCL's force quit: the turns so far, fewer than the question's

    def result(self) -> dict[str, Any]:
        turns = self.turns[:len(self.record["turns"])]
        return {"id": self.record["id"], "category": self.record["category"], "turns": turns, **(self.stopped or {})}


def run(records: Sequence[Mapping[str, Any]], answer: Callable[[list[Conversation]], list[str | None]],
        execute: Callable[[str, list[list[str]]], tuple[str, Any]],
        done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Every question's conversation, advanced together: ``answer`` gives the model's answers to a batch of
    conversations (a policy: ``generator.greedy`` on their ``prompt()``; ``None`` where the dialogue outgrew the
    model's context), ``execute(id, steps)`` runs the last of a question's steps after the others
    (``("results", [...])``, or ``("over", why)``: the question is undecided). ``done`` is given each
    conversation's record as it ends. A question whose executions took more than ``QUESTION_EXECUTION_S`` together
    is undecided too: a model that keeps every call just under its budget costs a question at most that, and one
    execution's ``WALL_S`` more."""
    conversations = [Conversation(record) for record in records]
    spent = {id(conversation): 0.0 for conversation in conversations}
    while active := [conversation for conversation in conversations if conversation.running]:
        responses = answer(active)
        for conversation, response in zip(active, responses, strict=True):
            if response is None:
                conversation.stopped = {"error": "the dialogue outgrew the model's context"}
            elif calls := conversation.answer(response):
                started = time.monotonic()
                kind, value = execute(conversation.record["id"], [*conversation.executed, calls])
                spent[id(conversation)] += time.monotonic() - started
                step = len(conversation.executed) + 1
                if kind != "results":
                    conversation.stopped = {"undecided": f"BFCL's execution of step {step}: {value}"}
                elif spent[id(conversation)] > QUESTION_EXECUTION_S:
                    conversation.stopped = {"undecided": f"BFCL's executions took {spent[id(conversation)]:.1f} s "
                                                         f"by step {step}, past the question's budget "
                                                         f"({QUESTION_EXECUTION_S:g} s)"}
                else:
                    conversation.observe(calls, value)
            if not conversation.running:
                conversation.messages = []  # its dialogue is no longer needed (a result may be megabytes)
                if done is not None:
                    done(conversation.result())
    return [conversation.result() for conversation in conversations]


class Executor:
    """BFCL's executor (``python -m gdpo_verl.experiments.bfcl_execution serve``) in BFCL's environment, called
    request by request; every wait is bounded, and an executor that ends or stops answering is named with its
    error output."""

    def __init__(self, python: str, start_timeout: float = 120.0, answer_timeout: float = 120.0):
        if not os.path.isfile(python):
            raise ValueError(f"no Python of BFCL's environment at {python}: multi-turn questions run their calls "
                             "with BFCL's executor; create it with bash scripts/setup_bfcl_env.sh (or pass "
                             "--bfcl-python), or leave the multi-turn categories out of the prompts")
        self.answer_timeout = answer_timeout
        self.errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen([python, "-m", "gdpo_verl.experiments.bfcl_execution", "serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors)
        self.buffer = b""
        ready = self.read(start_timeout, "start")
        if "ready" not in ready:
            raise ValueError(f"BFCL's executor did not start: {ready}")

    def read(self, timeout: float, waiting_for: str) -> dict[str, Any]:
        deadline, chunks = time.monotonic() + timeout, [self.buffer]
        while b"\n" not in chunks[-1]:  # each chunk looked at once: an answer of megabytes reads in linear time
            left = deadline - time.monotonic()
            ready = left > 0 and select.select([self.process.stdout], [], [], left)[0]
            chunk = os.read(self.process.stdout.fileno(), 1 << 20) if ready else b""
            if not chunk:
                self.close()
                self.errors.seek(0)
                tail = self.errors.read()[-3000:].decode(errors="replace")
                how = "ended" if ready else f"did not answer within {timeout:g} s"
                raise RuntimeError(f"BFCL's executor {how} (waiting for its {waiting_for}); its error output: {tail}")
            chunks.append(chunk)
        line, self.buffer = b"".join(chunks).split(b"\n", 1)
        return json.loads(line)

    def __call__(self, question: str, steps: list[list[str]]) -> tuple[str, Any]:
        try:
            self.process.stdin.write(json.dumps({"id": question, "steps": steps}).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass  # it ended: read() says so, with its error output
        (kind, value), = self.read(self.answer_timeout, f"answer on {question}").items()
        if kind == "raised":  # a request it cannot take (an unknown question): this program's error, not the model's
            raise RuntimeError(f"BFCL's executor failed on {question}: {value}")
        return kind, value

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
