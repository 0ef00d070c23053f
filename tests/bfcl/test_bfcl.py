"""BFCL-v3 scored by BFCL's own checker and data (gdpo_verl/experiments/bfcl.py, scripts/evaluate_bfcl.py), and the
tool-calling reward against that checker (scripts/bench_tool_reward_vs_bfcl.py). Run in BFCL's environment,
.venv-bfcl (scripts/setup_bfcl_env.sh; scripts/test.sh runs this folder there): bfcl-eval itself, nothing mocked.

The prompt and the decoding are ToolRL's BFCL handler's (benchmarks/BFCL/rlla_qwen.py at ToolRL 8cee13e): on all
3,641 single-turn questions, the chat rendered with Qwen's markup was checked equal to that handler's
``_format_prompt`` text, outside this repository; the test below pins the pieces."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("bfcl_eval", reason="BFCL's tests run in .venv-bfcl (bash scripts/setup_bfcl_env.sh)")

from gdpo_verl.experiments import bfcl  # noqa: E402
from tests.bfcl.scripts import ROOT, run  # noqa: E402

# BFCL's own data, not answerable as written: simple_363's possible answer names "find_closest", its function doc
# "restaurant_search.find_closest" (BFCL's checker refuses every answer).
UNANSWERABLE = {"simple_363": "simple_function_checker:wrong_func_name"}


def test_the_pinned_release_is_bfcl_v3():
    from importlib.metadata import version

    assert version("bfcl-eval") == bfcl.BFCL_RELEASE
    sizes = {category: len(bfcl.load_category(category)) for category in ("simple", "multiple", "parallel")}
    assert sizes == {"simple": 400, "multiple": 200, "parallel": 200}


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_every_accepted_answer_rendered_as_a_toolrl_response_passes_bfcls_checker(category):
    refused = {}
    for question in bfcl.load_category(category):
        right, error = bfcl.judge(question, category, bfcl.toolrl_response(bfcl.accepted_calls(question)))
        if not right:
            refused[question["id"]] = error
    assert refused == {key: value for key, value in UNANSWERABLE.items() if key.startswith(f"{category}_")}


def test_a_verdict_is_bfcls_checker_on_the_calls_toolrl_s_handler_decodes():
    _, _, _, ast_checker, _ = bfcl.bfcl()
    checked = 0
    for category in ("simple", "parallel"):
        for question in bfcl.load_category(category)[:60]:
            calls = bfcl.accepted_calls(question)
            for variant in (calls, [{**call, "parameters": {}} for call in calls], calls[:-1] or calls * 2):
                decoded = [{call["name"]: call["parameters"]} for call in variant]
                direct = ast_checker(question["function"], decoded, question["possible_answer"], "Python", category,
                                     bfcl.CHECKER_MODEL)["valid"]
                assert bfcl.judge(question, category, bfcl.toolrl_response(variant))[0] == direct
                checked += 1
    assert checked == 360


@pytest.mark.parametrize(
    ("response", "decoded"),
    [
        ("<think>x</think>\n<response>no tool fits</response>", []),
        ('<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>', [{"f": {"a": 1}}]),
        # the last block; lines that do not parse or lack a field, and calls named None, are left out
        ('<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "parameters": {}}\n'
         '</tool_call>', [{"b": {}}]),
        ('<tool_call>\n{"name": "None", "parameters": {}}\nnot json\n{"name": "g"}\n[1, 2]\n{"name": 3, "parameters": {}}'
         '\n{"name": "h", "parameters": {"x": true}}\n</tool_call>', [{"h": {"x": True}}]),
        # a call whose parameters are not an object is decoded, and BFCL's format check then refuses it
        ('<tool_call>\n{"name": "h", "parameters": 5}\n</tool_call>', [{"h": 5}]),
    ],
)
def test_responses_are_decoded_as_toolrl_s_bfcl_handler_decodes_them(response, decoded):
    assert bfcl.decode(response) == decoded


def test_the_prompt_is_toolrl_s_chat_with_bfcls_function_docs():
    question = bfcl.load_category("simple")[0]
    system, user = bfcl.toolrl_chat(question, "simple")
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith("You are a helpful multi-turn dialogue assistant capable of leveraging tool")
    properties = json.dumps(question["function"][0]["parameters"]["properties"])
    assert ("1. Name: calculate_triangle_area\nDescription: Calculate the area of a triangle given its base and height."
            " Note that the provided function is in Python 3 syntax.\nParameters: " + properties) in system["content"]
    assert user["content"] == ("**Dialogue Records History**\n<user> Find the area of a triangle with a base of 10 units"
                               " and height of 5 units." + bfcl.USER_SUFFIX + " </user>")
    java = bfcl.toolrl_chat(bfcl.load_category("java")[0], "java")[0]["content"]
    assert "Java 8 SDK syntax" in java and "in string representation" in java


def generations(path, category, answer):
    records = [{"id": question["id"], "category": category, "response": answer(question)}
               for question in bfcl.load_category(category)]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_score_gives_bfcls_accuracy_per_category_its_summaries_and_the_format_rate(tmp_path, capsys):
    right = tmp_path / "right.jsonl"
    with right.open("w") as out:
        for category in ("live_parallel", "live_relevance", "live_parallel_multiple"):
            for question in bfcl.load_category(category):
                calls = bfcl.accepted_calls(question) if "possible_answer" in question else [
                    {"name": question["function"][0]["name"], "parameters": {}}]
                out.write(json.dumps({"id": question["id"], "category": category,
                                      "response": bfcl.toolrl_response(calls)}) + "\n")
    declined = generations(tmp_path / "declined.jsonl", "live_parallel",
                           lambda question: "<think>x</think>\n<response>I cannot.</response>")
    result = run(capsys, "score", "--generations", right, declined, "--labels", "right,declined",
                 "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    scores = json.loads((tmp_path / "out" / "bfcl_scores.json").read_text())
    assert scores["right"]["accuracy"] == {"live_parallel": 1.0, "live_relevance": 1.0, "live_parallel_multiple": 1.0,
                                           "format_rate": 1.0}
    assert scores["declined"]["accuracy"] == {"live_parallel": 0.0, "format_rate": 1.0}
    assert scores["declined"]["errors"] == {"parallel_function_checker_no_order:wrong_count": 16}
    assert "| live_parallel | 100.00 | 0.00 |" in result.stdout


def test_bfcls_summaries_are_its_leaderboard_means():
    accuracy = {name: {"accuracy": value, "total_count": count, "display_accuracy": value} for name, value, count in [
        ("simple", 0.9, 400), ("java", 0.6, 100), ("javascript", 0.3, 50), ("multiple", 0.8, 200),
        ("parallel", 0.7, 200), ("parallel_multiple", 0.5, 200), ("irrelevance", 0.4, 240),
        ("live_simple", 0.8, 258), ("live_multiple", 0.6, 1053), ("live_parallel", 0.5, 16),
        ("live_parallel_multiple", 0.25, 24), ("live_irrelevance", 0.7, 882), ("live_relevance", 0.9, 18)]}
    _, _, helper, _, _ = bfcl.bfcl()
    found = bfcl.summaries(accuracy, helper)
    non_live_ast = ((0.9 + 0.6 + 0.3) / 3 + 0.8 + 0.7 + 0.5) / 4
    live_ast = (0.8 * 258 + 0.6 * 1053 + 0.5 * 16 + 0.25 * 24) / (258 + 1053 + 16 + 24)
    live = (0.8 * 258 + 0.6 * 1053 + 0.5 * 16 + 0.25 * 24 + 0.7 * 882 + 0.9 * 18) / (258 + 1053 + 16 + 24 + 882 + 18)
    non_live = ((0.9 + 0.6 + 0.3) / 3 + 0.8 + 0.7 + 0.5 + 0.4) / 5
    assert found == pytest.approx({"non_live_ast": non_live_ast, "non_live": non_live, "live_ast": live_ast,
                                   "live": live, "single_turn_overall": (live + non_live) / 2,
                                   "irrelevance_total": (0.4 + 0.7) / 2})


def test_bad_input_is_refused_naming_it(tmp_path, capsys):
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"id": "live_parallel_0-0-0", "category": "live_parallel", "response": "x"}) + "\n")
    result = run(capsys, "score", "--generations", partial)
    assert result.returncode == 2 and "category live_parallel: 15 of BFCL's 16 questions have no record" in result.stderr
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({"id": "x", "category": "multi_turn_base", "response": "x"}) + "\n")
    result = run(capsys, "score", "--generations", wrong)
    assert result.returncode == 2 and "a generation needs an id, a category of" in result.stderr
    twice = tmp_path / "twice.jsonl"
    twice.write_text(partial.read_text() * 2)
    result = run(capsys, "score", "--generations", twice)
    assert result.returncode == 2 and "live_parallel question live_parallel_0-0-0 has two records" in result.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run(capsys, "score", "--generations", empty)
    assert result.returncode == 2 and "no generations to score" in result.stderr
    result = run(capsys, "prompts", "--out", tmp_path, "--categories", ",")
    assert result.returncode == 2 and "no category given" in result.stderr
    result = run(capsys, "prompts", "--out", tmp_path, "--categories", "simple,web_search")
    assert result.returncode == 2 and "unknown BFCL category 'web_search'" in result.stderr


def test_the_reward_agrees_with_bfcl_on_types_under_bfcls_rule_and_not_under_toolrls(capsys):
    result = run(capsys, "--json", script=ROOT / "scripts" / "bench_tool_reward_vs_bfcl.py")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(result.stdout)
    for name in ("float_for_integer", "number_for_bool", "integer_entries", "float_entries"):
        found = counts[name]
        assert found["answers"] >= 5 and found["bfcl_accepts"] == 0
        assert found["agree_bfcl"] == found["answers"] and found["agree_toolrl"] == 0
    # objects compare by value in BFCL's checker, and in the reward
    assert counts["object_entry"]["bfcl_accepts"] == counts["object_entry"]["agree_bfcl"] == 6
    accepted = counts["accepted"]  # all but BFCL's own unanswerable question
    assert accepted["answers"] == 800 and accepted["bfcl_accepts"] == accepted["agree_bfcl"] == 799
    # the reward stays ToolRL's where BFCL accepts more than one ground truth (docs/tool-calling.md)
    assert counts["omitted_optional"]["bfcl_accepts"] == counts["omitted_optional"]["answers"] > 300
    assert counts["other_case"]["agree_bfcl"] < 0.01 * counts["other_case"]["answers"]
