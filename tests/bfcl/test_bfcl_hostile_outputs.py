"""No model output stops BFCL's evaluation: every answer ends right, wrong or undecided (named and counted), in
play (``evaluate_bfcl.py generate``) and in the judge (``score``). Run in BFCL's environment, .venv-bfcl, with BFCL's
executor and checker; the one stand-in is the vLLM engine in the generate test (vLLM is not in BFCL's environment;
tests/e2e/test_bfcl_generation.py runs the real one)."""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

pytest.importorskip("bfcl_eval", reason="BFCL's tests run in .venv-bfcl (bash scripts/setup_bfcl_env.sh)")

from gdpo_verl.experiments import bfcl, bfcl_execution, bfcl_multi_turn  # noqa: E402
from tests.bfcl.scripts import DONE, run  # noqa: E402

# a call's name, key and value with JSON's escape of a lone surrogate: plain ASCII a model can write
SURROGATE_CALL = '<tool_call>\n{"name": "ls\\ud800", "parameters": {"a\\udc00": "b\\ud800"}}\n</tool_call>'


@pytest.fixture(scope="module")
def executor():
    executor = bfcl_multi_turn.Executor(sys.executable)  # this environment's, BFCL's
    yield executor
    executor.close()


def test_a_lone_surrogate_in_a_call_leaves_every_later_prompt_valid_unicode(executor):
    """The call's name goes back into the next prompt (BFCL's result quotes it); a tokenizer refuses a string with
    a lone surrogate (TypeError), which stopped the whole generation."""
    entry = bfcl.load_category("multi_turn_base")[0]
    prompts = []

    def policy(conversations):
        for conversation in conversations:
            for message in conversation.prompt():
                prompts.append(message["content"])
                message["content"].encode("utf-8")  # what the tokenizer needs
        return [SURROGATE_CALL if not conversation.turns[-1] and len(conversation.turns) == 1 else DONE
                for conversation in conversations]

    played, = bfcl_multi_turn.run([bfcl.multi_turn_record(entry, "multi_turn_base")], policy, executor)
    assert len(played["turns"]) == len(entry["ground_truth"]) and "undecided" not in played
    assert any("ls\ufffd" in prompt for prompt in prompts)


class StandInEngine:
    """vLLM's ChatGenerator as generate uses it: ``greedy`` answers every chat with ``DONE``, and raises on its
    ``fail_at``-th call (an engine that dies in the middle of a run)."""

    calls = 0
    fail_at: int | None = None

    def __init__(self, model, **_):
        self.context = 1 << 20

    def greedy(self, chats, max_tokens):
        type(self).calls += 1
        if type(self).calls == self.fail_at:
            raise RuntimeError("the engine died")
        return [DONE for _ in chats]


class StandInTokenizer:
    def apply_chat_template(self, chat, **_):
        return "".join(message["content"] for message in chat)

    def __call__(self, text):
        return {"input_ids": text.split()}


def test_generate_writes_each_question_as_it_is_made_and_resume_makes_the_rest(tmp_path, capsys, monkeypatch):
    from gdpo_verl.verl_adapter.for_experiments import generation

    monkeypatch.setattr(generation, "ChatGenerator", StandInEngine)
    monkeypatch.setattr(generation, "load_tokenizer", lambda model: StandInTokenizer())
    entries = bfcl.load_category("multi_turn_base")
    short = min(entries[:20], key=lambda entry: len(entry["question"]))
    long = next(entry for entry in entries if len(entry["question"]) > len(short["question"]))
    records = [{"id": "simple_0", "category": "simple", "prompt": [{"role": "user", "content": "hi"}]},
               {"id": "simple_1", "category": "simple", "prompt": [{"role": "user", "content": "ho"}]},
               bfcl.multi_turn_record(long, "multi_turn_base"), bfcl.multi_turn_record(short, "multi_turn_base")]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(record) + "\n" for record in records))
    arguments = ["generate", "--prompts", prompts, "--model", "stand-in", "--out", tmp_path,
                 "--bfcl-python", sys.executable]
    # the first call answers the single-turn prompts; then one a turn: the engine dies once the short one ended
    StandInEngine.calls, StandInEngine.fail_at = 0, 2 + len(short["question"])
    failed = run(capsys, *arguments)
    assert failed.returncode == 1 and "the engine died" in failed.stderr
    assert "3 of 4 questions are in" in failed.stderr and "--resume generates the rest" in failed.stderr
    kept = [json.loads(line) for line in (tmp_path / "bfcl_generations.jsonl").read_text().splitlines()]
    assert [record["id"] for record in kept] == ["simple_0", "simple_1", short["id"]]

    StandInEngine.calls, StandInEngine.fail_at = 0, None
    result = run(capsys, *arguments, "--resume")
    assert result.returncode == 0, result.stderr
    assert "3 questions already in" in result.stdout
    made = [json.loads(line) for line in (tmp_path / "bfcl_generations.jsonl").read_text().splitlines()]
    assert [record["id"] for record in made] == [record["id"] for record in records]
    assert made[3] == kept[2] and len(made[2]["turns"]) == len(long["question"])


def hold_memory_until_it_runs_out():
    held = []
    while True:
        held.append(bytearray(1 << 20))


def test_a_memory_overrun_is_over_its_budget_though_the_child_cannot_build_another_answer():
    """The MemoryError's traceback keeps what was held: a JSON answer built then failed again, and the run stopped
    with ValueError."""
    for _ in range(3):
        assert bfcl_execution.bounded(hold_memory_until_it_runs_out, memory_mb=64) == (
            "over", "over its memory budget (64 MB)")


def test_the_kernels_cpu_signal_is_over_its_budget_whatever_the_usage_reads():
    """The kernel's SIGXCPU at the soft limit decides, not the usage wait4 reads back (on a busy host 4 of 26 kills
    read 9.55-9.81 of 10 s and were taken for a crash)."""
    assert bfcl_execution.bounded(lambda: os.kill(os.getpid(), signal.SIGXCPU)) == (
        "over", f"over its CPU budget ({bfcl_execution.CPU_S} s)")


def test_a_checker_that_fails_on_one_answer_makes_that_question_undecided_named_and_counted(monkeypatch):
    questions = bfcl.load_category("live_parallel")[:3]
    checker = bfcl.judge

    def failing_on_the_second(question, category, response):
        if question["id"] == questions[1]["id"]:
            raise TypeError("unhashable type: 'list'")
        return checker(question, category, response)

    monkeypatch.setattr(bfcl, "judge", failing_on_the_second)
    records = [{"id": question["id"], "category": "live_parallel", "response": DONE} for question in questions]
    result = bfcl.score_run(records, partial=True)
    assert result["undecided"] == {"live_parallel": [questions[1]["id"]]}
    assert result["undecided_why"] == {
        questions[1]["id"]: "BFCL's checker failed on the response: TypeError: unhashable type: 'list'"}
    assert result["errors"]["undecided"] == 1


def test_a_multi_turn_checker_that_fails_is_the_questions_undecided(monkeypatch):
    entry = bfcl_execution.load_entries("multi_turn_base")["multi_turn_base_0"]
    monkeypatch.setattr(bfcl_execution, "check", lambda entry, turns: {}["valid"])
    verdict, why = bfcl_execution.judge(entry, {"turns": [[DONE] for _ in entry["ground_truth"]]})
    assert verdict is None and why == "undecided: BFCL's checker failed on the answer: KeyError: 'valid'"


def test_a_question_whose_executions_take_too_long_together_is_undecided(monkeypatch):
    """Each execution within its budget, the question's together are bounded: a model cannot make every question
    cost turns x 20 steps x WALL_S."""
    monkeypatch.setattr(bfcl_multi_turn, "QUESTION_EXECUTION_S", 0.2)
    entry = bfcl.load_category("multi_turn_base")[0]
    always = bfcl.toolrl_response([{"name": "ls", "parameters": {}}])

    def slow(question, steps):
        time.sleep(0.08)
        return "results", ["[]"] * len(steps[-1])

    played, = bfcl_multi_turn.run([bfcl.multi_turn_record(entry, "multi_turn_base")],
                                  lambda conversations: [always] * len(conversations), slow)
    assert played["undecided"].startswith("BFCL's executions took 0.2")
    assert played["undecided"].endswith("s by step 3, past the question's budget (0.2 s)")


def test_what_an_execution_prints_does_not_reach_the_executors_error_output(executor):
    """A call that compiles with 200 SyntaxWarnings, replayed by every later step's child: 126 MB of the
    executor's error output (a temporary file on the host's disk) for one question of 140 steps."""
    call = "x(" + "1 is 1," * 200 + ")"
    before = os.fstat(executor.errors.fileno()).st_size
    for steps in range(1, 4):
        kind, _ = executor("multi_turn_base_0", [[call]] * steps)
        assert kind == "results"
    assert os.fstat(executor.errors.fileno()).st_size - before < 1000


class CountingTokenizer:
    """A tokenizer of 100 tokens of at most 5 characters, which counts the characters it is asked to tokenize."""

    def __init__(self):
        self.tokenized = 0

    def __len__(self):
        return 100

    def decode(self, tokens):
        return "x" * (tokens[0] % 5)

    def __call__(self, text):
        self.tokenized += len(text)
        return {"input_ids": text.split()}


def test_a_prompt_too_long_for_any_tokenization_is_refused_without_tokenizing_it():
    """A model's calls can make one result, and so the next prompt, of 15 MB (a directory tree copied into itself,
    then listed): tokenized, 5 CPU-s and a gigabyte each. A text of more characters than the context times the
    longest token cannot fit. (The engine is not started: vLLM is not in BFCL's environment; the room is the
    generator's own arithmetic.)"""
    from gdpo_verl.verl_adapter.for_experiments.generation import ChatGenerator

    generator = object.__new__(ChatGenerator)
    generator.tokenizer, generator.context = CountingTokenizer(), 1000
    assert generator.max_token_chars == 5
    assert generator.room("a b c") == 997 and generator.tokenizer.tokenized == 5
    assert generator.room("y" * 5001) <= 0 and generator.tokenizer.tokenized == 5
    assert generator.room("y " * 2500) == 1000 - 2500  # within the characters' bound: tokenized, and too long


def test_a_conversation_that_ended_lets_go_of_its_dialogue(executor):
    entry = bfcl.load_category("multi_turn_base")[0]
    conversations = []

    def policy(active):
        conversations.extend(conversation for conversation in active if conversation not in conversations)
        return [None] * len(active)  # the dialogue outgrew the context at once

    bfcl_multi_turn.run([bfcl.multi_turn_record(entry, "multi_turn_base")], policy, executor)
    assert conversations and all(conversation.messages == [] for conversation in conversations)
