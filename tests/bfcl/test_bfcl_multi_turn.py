"""BFCL-v3's multi-turn categories, played and scored with BFCL's own executor and checker (bfcl_multi_turn.py,
bfcl_execution.py). Run in BFCL's environment, .venv-bfcl; nothing mocked. The policy is scripted: each turn
answered with BFCL's ground-truth calls written as ToolRL's response, then an answer without calls (what a
perfect policy does); or a wrong variant of that. The conversation loop, the executor process and the checker are
the real ones."""
from __future__ import annotations

import ast
import inspect
import json
import sys
import time

import pytest

pytest.importorskip("bfcl_eval", reason="BFCL's tests run in .venv-bfcl (bash scripts/setup_bfcl_env.sh)")

from gdpo_verl.experiments import bfcl, bfcl_execution, bfcl_multi_turn  # noqa: E402
from tests.bfcl.scripts import DONE, run  # noqa: E402

# BFCL's own data, not answerable as written: multi_turn_base_154 has 5 user turns and 6 ground-truth turns (BFCL's
# runner reports every answer force-terminated). The test below plays the first 50 questions of each category (a
# run over all 800 took 85 s; all but this one passed).
UNANSWERABLE = {"multi_turn_base_154": "multi_turn:force_terminated"}


def toolrl_calls(entry, calls):
    """BFCL's ground-truth call strings as ToolRL's JSON calls (positional arguments named by the method's
    signature)."""
    methods = {name: method for instance in bfcl_execution.executor_module().CLASS_FILE_PATH_MAPPING
               for name, method in inspect.getmembers(instance_class(instance), inspect.isfunction)}
    written = []
    for call in calls:
        tree = ast.parse(call, mode="eval").body
        bound = inspect.signature(methods[tree.func.id]).bind(
            None, *map(ast.literal_eval, tree.args), **{k.arg: ast.literal_eval(k.value) for k in tree.keywords})
        written.append({"name": tree.func.id, "parameters": dict(list(bound.arguments.items())[1:])})
    return written


def instance_class(name):
    import importlib

    utils = bfcl_execution.executor_module()
    return getattr(importlib.import_module(utils.CLASS_FILE_PATH_MAPPING[name]), name)


class ScriptedPolicy:
    """Answers each turn's first step with ``answer(entry, turn)`` (a list of ToolRL calls, or None for no call),
    every later step without calls."""

    def __init__(self, entries, answer):
        self.entries, self.answer = entries, answer

    def __call__(self, conversations):
        responses = []
        for conversation in conversations:
            entry = self.entries[conversation.record["id"]]
            turn, step = len(conversation.turns) - 1, len(conversation.turns[-1])
            calls = self.answer(entry, turn) if step == 0 else None
            responses.append(bfcl.toolrl_response(calls) if calls else DONE)
        return responses


def play(category, count, answer, executor):
    """The first ``count`` questions of ``category`` played by the scripted policy through the real loop."""
    entries = {entry["id"]: entry for entry in bfcl.load_category(category)[:count]}
    records = [bfcl.multi_turn_record(entry, category) for entry in entries.values()]
    return entries, bfcl_multi_turn.run(records, ScriptedPolicy(entries, answer), executor)


@pytest.fixture(scope="module")
def executor():
    executor = bfcl_multi_turn.Executor(sys.executable)  # this environment's, BFCL's
    yield executor
    executor.close()


@pytest.mark.parametrize("category", bfcl_multi_turn.MULTI_TURN_CATEGORIES)
def test_bfcls_ground_truth_played_turn_by_turn_passes_bfcls_checker(category, executor):
    entries, played = play(category, 50, lambda entry, turn: toolrl_calls(entry, entry["ground_truth"][turn]),
                           executor)
    assert [record["id"] for record in played] == list(entries)
    refused = {record["id"]: error for record in played
               for verdict, error in [bfcl_execution.judge(entries[record["id"]], record)] if not verdict}
    assert refused == {key: value for key, value in UNANSWERABLE.items() if key in entries}
    assert all(bfcl.has_format(response) for record in played for turn in record["turns"] for response in turn)


def test_a_verdict_on_a_wrong_answer_is_bfcls_checker_run_as_bfcl_runs_it(executor):
    """Wrong variants (a turn's last call dropped, a turn answered with the next turn's calls, a turn left
    unanswered): the verdict equals BFCL's multi_turn_checker run in this process with BFCL's own eval."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    variants = {
        "last call dropped": lambda entry, turn: toolrl_calls(entry, entry["ground_truth"][turn][:-1]),
        "next turn's calls": lambda entry, turn: toolrl_calls(
            entry, entry["ground_truth"][min(turn + 1, len(entry["ground_truth"]) - 1)]),
        "second turn unanswered": lambda entry, turn: None if turn == 1 else toolrl_calls(
            entry, entry["ground_truth"][turn]),
    }
    compared = wrong = 0
    ours = multi_turn_utils.eval
    for name, answer in variants.items():
        for category in ("multi_turn_base", "multi_turn_miss_param"):
            entries, played = play(category, 15, answer, executor)
            for record in played:
                entry = entries[record["id"]]
                verdict, _ = bfcl_execution.judge(entry, record)
                decoded = [[calls for response in turn if (calls := bfcl_multi_turn.decode_execute(response))]
                           for turn in record["turns"]]
                multi_turn_utils.eval = eval  # BFCL's own, for the direct run
                try:
                    direct = multi_turn_checker(decoded, entry["ground_truth"], dict(entry), category,
                                                f"direct_{name}_{category}".replace(" ", "_").replace("'", ""))["valid"]
                finally:
                    multi_turn_utils.eval = ours
                assert verdict == direct, (name, record["id"])
                compared += 1
                wrong += not direct
    assert compared == 90 and wrong >= 60


@pytest.mark.parametrize(
    ("call", "result"),
    [
        # not a listed function: eval's NameError, as BFCL reports it; builtins are not run
        ("open(file='/tmp/gdpo-bfcl-probe', mode='w')", "Error during execution: name 'open' is not defined"),
        ("__import__(name='os')", "Error during execution: name '__import__' is not defined"),
        # a listed function's arguments must be literals (ToolRL's decoding writes repr of JSON values)
        ("cd(folder=open('x'))", "Error during execution: not run: only a listed function's call with literal "
                                 "arguments is run, not Call"),
        ("cd(**{'folder': 'document'})", "Error during execution: not run: only a listed function's call with "
                                         "literal arguments is run"),
        ("cd(folder=-inf)", "Error during execution: name 'inf' is not defined"),
        # a name written with BFCL's instance prefix reaches public methods only, not the instance's attributes
        ("gdpo_verl_multi_turn_base_0_gorillafilesystem_instance.root()", "Error during execution: not run: only a "
                                                                          "listed function's call with literal "
                                                                          "arguments is run"),
        ("gdpo_verl_multi_turn_base_0_gorillafilesystem_instance._load_scenario(scenario={})",
         "Error during execution: not run: only a listed function's call with literal arguments is run"),
        ("cd(folder='document'", "Error during execution: '(' was never closed (<string>, line 1)"),
        # compiled as eval compiles it: a keyword given twice (two JSON keys naming it) is eval's SyntaxError
        ("cd(folder='a', folder ='document')", "Error during execution: keyword argument repeated: folder "
                                               "(<string>, line 1)"),
        # BFCL's own refusals and results are kept
        ("exit()", "Error during execution: Function call exit is not allowed."),
        ("cd(folder='document')", '{"current_working_directory": "document"}'),
    ],
)
def test_only_a_listed_functions_call_with_literal_arguments_is_run(call, result, executor, tmp_path):
    kind, value = executor("multi_turn_base_0", [[call]])
    assert (kind, value) == ("results", [result])
    assert not (tmp_path.parent / "gdpo-bfcl-probe").exists()


def test_an_execution_past_its_budget_makes_the_question_undecided_in_play_and_in_scoring(executor):
    entries = bfcl_execution.load_entries("multi_turn_base")
    question = next(key for key, entry in entries.items() if "MathAPI" in entry["involved_classes"])
    started = time.monotonic()
    kind, value = executor(question, [["power(base=10, exponent=1000000000000)"]])
    assert kind == "over" and "budget" in value
    assert time.monotonic() - started < bfcl_execution.WALL_S + 5
    response = bfcl.toolrl_response([{"name": "power", "parameters": {"base": 10, "exponent": 10 ** 12}}])
    turns = [[response, DONE]] + [[DONE] for _ in entries[question]["ground_truth"][1:]]
    verdict, error = bfcl_execution.judge(entries[question], {"turns": turns})
    assert verdict is None and error.startswith("undecided: BFCL's checker")
    played = {"id": question, "category": "multi_turn_base", "turns": [[response]], "undecided": value}
    assert bfcl_execution.judge(entries[question], played) == (None, f"undecided: {value}")


def test_the_loop_stops_a_turn_as_bfcl_does(executor):
    """BFCL's force quit: a policy that calls on every step is stopped after 20 steps of a turn, and the question
    is force-terminated; a dialogue past the model's context is BFCL's inference error."""
    entry = bfcl.load_category("multi_turn_base")[0]
    record = bfcl.multi_turn_record(entry, "multi_turn_base")
    always = bfcl.toolrl_response([{"name": "ls", "parameters": {}}])
    played, = bfcl_multi_turn.run([record], lambda conversations: [always] * len(conversations), executor)
    assert len(played["turns"]) == 1 and len(played["turns"][0]) == bfcl_multi_turn.MAXIMUM_STEP_LIMIT + 1
    assert bfcl_execution.judge(entry, played) == (False, "multi_turn:force_terminated")
    played, = bfcl_multi_turn.run([record], lambda conversations: [None] * len(conversations), executor)
    assert played["error"] and bfcl_execution.judge(entry, played) == (False, "multi_turn:inference_error")


def test_constants_copied_from_bfcl_match_it():
    from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT

    assert bfcl_multi_turn.MAXIMUM_STEP_LIMIT == MAXIMUM_STEP_LIMIT


def test_a_held_back_function_is_given_in_its_turn_and_left_out_of_the_system_prompt():
    entry = bfcl.load_category("multi_turn_miss_func")[0]
    record = bfcl.multi_turn_record(entry, "multi_turn_miss_func")
    (turn, names), = entry["missed_function"].items()
    held_back = record["turns"][int(turn)]
    assert [message["role"] for message in held_back] == ["user"]
    assert all(f"'name': '{name}'" in held_back[0]["content"] for name in names)
    assert held_back[0]["content"].endswith("I have updated some more functions you can choose from. What about now?")
    assert all(f"Name: {name}\n" not in record["system"] for name in names)
    assert "Name: mv\n" in record["system"]


def test_the_step_prompt_is_the_handlers_dialogue():
    messages = [{"role": "user", "content": " Move it. "}, {"role": "assistant", "content": " <think>a</think> "},
                {"role": "tool", "name": "mv(source='a')", "content": "None"}]
    system, user = bfcl_multi_turn.chat("SYSTEM", messages)
    assert system == {"role": "system", "content": "SYSTEM"}
    assert user["content"] == (
        "**Dialogue Records History**\n<user> Move it." + bfcl_multi_turn.USER_SUFFIX + " </user>\n\n<think>a</think>"
        "\n<obs> You have made the tool call mv(source='a'). Execution returns: None </obs>\n\n<user> If you think"
        + bfcl_multi_turn.AFTER_RESULTS.strip().removeprefix("<user> If you think"))
    messages.append({"role": "assistant", "content": "<response>ok</response>"})
    assert bfcl_multi_turn.AFTER_RESULTS.strip() not in bfcl_multi_turn.chat("S", messages)[1]["content"]


def test_multi_turn_scores_add_bfcls_multi_turn_and_overall_means():
    accuracy = {name: {"accuracy": value, "total_count": 200, "display_accuracy": value}
                for name, value in zip(bfcl_multi_turn.MULTI_TURN_CATEGORIES, (0.4, 0.2, 0.3, 0.1))}
    _, _, helper, _, _ = bfcl.bfcl()
    assert bfcl.summaries(accuracy, helper) == pytest.approx({"multi_turn": 0.25})


def test_score_takes_multi_turn_records_and_says_what_is_undecided(tmp_path, capsys):
    entries = bfcl_execution.load_entries("multi_turn_long_context")
    records = [{"id": key, "category": "multi_turn_long_context", "turns": [[DONE] for _ in entry["ground_truth"]]}
               for key, entry in entries.items()]
    records[3]["undecided"] = "past its CPU budget"
    path = tmp_path / "generations.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    result = run(capsys, "score", "--generations", path, "--out", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = json.loads((tmp_path / "bfcl_scores.json").read_text())["ours"]
    assert scores["accuracy"]["multi_turn_long_context"] == 0.0
    assert scores["undecided"] == {"multi_turn_long_context": [records[3]["id"]]}
    assert "1 of 200 multi_turn_long_context questions undecided" in result.stdout
    assert "| multi_turn_long_context | 0.00 |" in result.stdout
    assert scores["errors"] == {"multi_turn:empty_turn_model_response": 199, "undecided": 1}


@pytest.mark.parametrize(
    ("response", "calls"),
    [
        ("<think>x</think>\n<response>no tool fits</response>", []),
        ('<tool_call>\n{"name": "cd", "parameters": {"folder": "a b"}}\n{"name": "ls", "parameters": {}}\n</tool_call>',
         ["cd(folder='a b')", "ls()"]),
        # the last block; lines that do not parse, entries that are not objects and calls named None are left out
        ('<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>\n<tool_call>\nnot json\n[1]\n'
         '{"name": " none ", "parameters": {}}\n{"name": "b", "parameters": {"x": [1, true, null]}}\n</tool_call>',
         ["b(x=[1, True, None])"]),
        # a missing name is the empty name, missing parameters none, as the handler reads them
        ('<tool_call>\n{"parameters": {"x": 1}}\n{"name": "c"}\n</tool_call>', ["(x=1)", "c()"]),
    ],
)
def test_calls_are_decoded_as_the_handlers_decode_execute_writes_them(response, calls):
    assert bfcl_multi_turn.decode_execute(response) == calls


@pytest.mark.parametrize("line", ['{"name": 3, "parameters": {}}', '{"name": "f", "parameters": [1]}',
                                  '{"name": "f", "parameters": null}'])
def test_a_call_the_handler_cannot_write_fails_the_whole_answer_as_its_does(line):
    with pytest.raises(ValueError, match="a call's (name|parameters) must be"):
        bfcl_multi_turn.decode_execute(f'<tool_call>\n{{"name": "ls", "parameters": {{}}}}\n{line}\n</tool_call>')
    # a call named None is left out before its parameters are read
    assert bfcl_multi_turn.decode_execute('<tool_call>\n{"name": "None", "parameters": [1]}\n</tool_call>') == []


def test_an_executor_that_ends_or_is_missing_is_named():
    executor = bfcl_multi_turn.Executor(sys.executable)
    executor.process.kill()
    executor.process.wait()
    with pytest.raises(RuntimeError, match="BFCL's executor ended \\(waiting for its answer on multi_turn_base_0\\)"):
        executor("multi_turn_base_0", [["ls()"]])
    with pytest.raises(ValueError, match="no Python of BFCL's environment at /nowhere/python"):
        bfcl_multi_turn.Executor("/nowhere/python")


def test_the_models_calls_reach_its_own_environments_never_the_ground_truths():
    """In the checker, the model's calls and the ground truth's run in one process, on instances BFCL names by
    model name: a call naming the ground truth's instance (its prefix written out, in parentheses so that BFCL's
    prefixing leaves it alone) is not run, and the verdict stays the checker's on the model's own calls."""
    entry = bfcl_execution.load_entries("multi_turn_base")["multi_turn_base_1"]
    target = "gdpo_verl_ground_truth_eval_multi_turn_base_1_gorillafilesystem_instance"
    tamper = {"name": f"({target}.mkdir)", "parameters": {"dir_name": "pwned"}}
    turns = [[bfcl.toolrl_response(toolrl_calls(entry, calls) + ([tamper] if index == 1 else [])), DONE]
             for index, calls in enumerate(entry["ground_truth"])]
    assert "pwned" in turns[1][0] and bfcl_execution.judge(entry, {"turns": turns}) == (True, "")
    assert bfcl_execution.replay(entry, [[f"({target}.mkdir)(dir_name='pwned')"]]) == [
        "Error during execution: not run: only a listed function's call with literal arguments is run"]


def test_an_answer_past_the_output_budget_is_over_it():
    kind, value = bfcl_execution.bounded(lambda: "x" * ((bfcl_execution.OUTPUT_MB << 20) + 1))
    assert (kind, value) == ("over", f"over its output budget ({bfcl_execution.OUTPUT_MB} MB)")


def test_a_child_killed_before_its_cpu_budget_is_named_not_called_over_it():
    import os
    import signal

    kind, value = bfcl_execution.bounded(lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert (kind, value) == ("raised", "the execution's process died of signal SIGKILL")


def test_a_child_stopped_at_its_cpu_limit_is_over_its_cpu_budget_every_time():
    # the kernel stops it by its exact run time; the usage wait4 reads back is sampled and often a hair under the
    # limit (it was named "died of signal SIGXCPU" then)
    for _ in range(3):
        kind, value = bfcl_execution.bounded(lambda: 10 ** (10 ** 10), cpu_s=1)
        assert (kind, value) == ("over", "over its CPU budget (1 s)")
