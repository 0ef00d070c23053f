"""BFCL-v3, the paper's tool-calling evaluation, scored by BFCL's own checker and data (the ``bfcl-eval`` package).

The evaluation has three steps, each run by ``scripts/evaluate_bfcl.py``:

1. ``prompts`` (in BFCL's environment, ``scripts/setup_bfcl_env.sh``): each single-turn question as the chat the
   policy was trained on: ToolRL's system prompt listing the question's functions (after BFCL's own pre-processing
   of function docs, as its prompt-based handlers do), and the dialogue as ToolRL's user turn. This is the prompt
   of ToolRL's BFCL handler (``benchmarks/BFCL/rlla_qwen.py``), written anew here. Each multi-turn question as
   that handler's system prompt and the question's turns (the functions BFCL holds back until a later turn, in
   the miss-function category, given in that turn's user message, as BFCL's prompting loop does).
2. ``generate`` (on a GPU node with vLLM): a greedy response to each single-turn prompt; each multi-turn question
   played turn by turn (``bfcl_multi_turn.py``), its calls run by BFCL's executor in BFCL's environment
   (``bfcl_execution.py``).
3. ``score`` (in BFCL's environment): each single-turn response decoded as ToolRL's handler decodes it (the calls of
   the last ``<tool_call>`` block, a JSON object a line; lines that do not parse, and calls named "None", are left
   out), then judged by BFCL's ``ast_checker`` (AST categories) or BFCL's relevance rule (a decoded call or none);
   each multi-turn conversation by BFCL's ``multi_turn_checker``; all summed up by BFCL's own weighted and
   unweighted means, as its leaderboard does, up to BFCL v3's overall (live, non-live and multi-turn).

Only ``prompts``, ``score`` and the executor import ``bfcl_eval``; its pins (numpy 1.26.4 among them) clash with
verl's, hence an environment of its own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gdpo_verl.experiments import bfcl_execution
from gdpo_verl.experiments.bfcl_execution import BFCL_RELEASE
from gdpo_verl.experiments.bfcl_multi_turn import MULTI_TURN_CATEGORIES
from gdpo_verl.rewards.tool_calling import GroundTruth, format_matches

DATA_PREFIX = "BFCL_v3_"

# The single-turn categories, with the language BFCL's checker reads each in.
AST_CATEGORIES = {
    "simple": "Python", "multiple": "Python", "parallel": "Python", "parallel_multiple": "Python",
    "java": "Java", "javascript": "JavaScript",
    "live_simple": "Python", "live_multiple": "Python", "live_parallel": "Python", "live_parallel_multiple": "Python",
}
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
SINGLE_TURN_CATEGORIES = (*AST_CATEGORIES, *RELEVANCE_CATEGORIES)
CATEGORIES = (*SINGLE_TURN_CATEGORIES, *MULTI_TURN_CATEGORIES)

# BFCL's checker takes a model name only to decide whether "." in function names was written as "_" (for APIs
# that refuse dots); a prompt-based model of its table that keeps dots, as ToolRL's handler does.
CHECKER_MODEL = "Qwen/Qwen3-0.6B"

# ToolRL's system prompt (ToolRL, benchmarks/BFCL/rlla_qwen.py), the one its training data carries.
CALL_EXAMPLE = (
    '{"name": "Tool name", "parameters": {"Parameter name": "Parameter content", "... ...": "... ..."}}\n'
    '{"name": "... ...", "parameters": {"... ...": "... ...", "... ...": "... ..."}}'
)
SYSTEM_PROMPT = """You are a helpful multi-turn dialogue assistant capable of leveraging tool calls to solve user tasks and provide structured chat responses.

**Available Tools**
In your response, you can use the following tools:
{tools}

**Steps for Each Turn**
1. **Think:** Recall relevant context and analyze the current user goal.
2. **Decide on Tool Usage:** If a tool is needed, specify the tool and its parameters.
3. **Respond Appropriately:** If a response is needed, generate one while maintaining consistency across user queries.

**Output Format**
```plaintext
<think> Your thoughts and reasoning </think>
<tool_call>
{call_example}
...
</tool_call>
<response> AI's final response </response>
```

**Important Notes**
1. You must always include the `<think>` field to outline your reasoning. Provide at least one of `<tool_call>` or `<response>`. Decide whether to use `<tool_call>` (possibly multiple times), `<response>`, or both.
2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each tool call should be a JSON object with a "name" field and an "parameters" field containing a dictionary of parameters. If no parameters are needed, leave the "parameters" field an empty dictionary.
3. Refer to the previous dialogue records in the history, including the user's queries, previous `<tool_call>`, `<response>`, and any tool feedback noted as `<obs>` (if exists).
"""
USER_SUFFIX = (
    "\nIf there's no appropriate tools to apply or required parameters are missing, please directly inform me in "
    "your response without any tool call, or call the tool with the name as 'None'. Otherwise, you should use one "
    "or more necessary tool calls to complete the given task in this turn."
)


def bfcl():
    """The installed ``bfcl_eval`` modules this evaluation uses, or a ValueError saying how to get them."""
    bfcl_execution.bfcl_root()
    try:
        from bfcl_eval import utils
        from bfcl_eval.constants import eval_config
        from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
        from bfcl_eval.eval_checker import eval_runner_helper
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.model_handler.utils import func_doc_language_specific_pre_processing
    except ImportError as exc:
        raise ValueError(
            f"BFCL's package is not importable here ({exc}); run this step in BFCL's environment: "
            "bash scripts/setup_bfcl_env.sh, then .venv-bfcl/bin/python scripts/evaluate_bfcl.py ..."
        ) from exc
    if CHECKER_MODEL not in MODEL_CONFIG_MAPPING or MODEL_CONFIG_MAPPING[CHECKER_MODEL].underscore_to_dot:
        raise ValueError(f"bfcl-eval's model table no longer has {CHECKER_MODEL} keeping '.' in function names; "
                         f"use bfcl-eval=={BFCL_RELEASE}")
    return utils, eval_config, eval_runner_helper, ast_checker, func_doc_language_specific_pre_processing


def load_category(category: str) -> list[dict[str, Any]]:
    """BFCL's questions of ``category``, each with its ``possible_answer`` (AST categories) or ``ground_truth``
    (multi-turn) from BFCL's data."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; BFCL v3's categories are {list(CATEGORIES)}")
    utils, eval_config, *_ = bfcl()
    if category in MULTI_TURN_CATEGORIES:
        return list(bfcl_execution.load_entries(category).values())
    path = Path(eval_config.PROMPT_PATH) / f"{DATA_PREFIX}{category}.json"
    if not path.is_file():
        raise ValueError(f"{path} is missing: this bfcl-eval is not BFCL v3's; install bfcl-eval=={BFCL_RELEASE}")
    questions = utils.load_file(path)
    if category in AST_CATEGORIES:
        answers = {entry["id"]: entry["ground_truth"]
                   for entry in utils.load_file(Path(eval_config.POSSIBLE_ANSWER_PATH) / path.name)}
        for question in questions:
            question["possible_answer"] = answers[question["id"]]
    return questions


def tool_list(functions: Sequence[Mapping[str, Any]]) -> str:
    """The tools as ToolRL's system prompt lists them: number, name, description, parameters' properties."""
    return "\n".join(
        f"{number}. Name: {function['name']}\nDescription: {function['description']}\n"
        f"Parameters: {json.dumps(function['parameters'].get('properties', {}))}"
        for number, function in enumerate(functions, 1)
    )


def toolrl_chat(question: Mapping[str, Any], category: str) -> list[dict[str, str]]:
    """The [system, user] chat of ToolRL's handler for one single-turn question."""
    *_, pre_process = bfcl()
    functions = pre_process(json.loads(json.dumps(question["function"])), category)
    user = "**Dialogue Records History**\n"
    for message in question["question"][0]:
        if message["role"] == "user":
            user += f"<user> {message['content'].strip()}{USER_SUFFIX} </user>\n"
        elif message["role"] == "assistant":
            user += f"\n{message['content'].strip()}\n"
    system = SYSTEM_PROMPT.format(tools=tool_list(functions), call_example=CALL_EXAMPLE)
    return [{"role": "system", "content": system}, {"role": "user", "content": user.strip()}]


def multi_turn_record(question: Mapping[str, Any], category: str) -> dict[str, Any]:
    """``{id, category, system, turns}`` for one multi-turn question: the handler's system prompt with the
    question's functions (its classes' docs, less those BFCL holds back, after BFCL's pre-processing), and each
    turn's messages, a held-back turn's being BFCL's prompt giving the held-back docs (as BFCL's generation
    prepares a question, ``process_multi_turn_test_case``, and its prompting loop plays it)."""
    *_, pre_process = bfcl()
    from bfcl_eval.constants.category_mapping import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING
    from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
    from bfcl_eval.utils import load_file

    functions = [doc for name in question["involved_classes"]
                 for doc in load_file(MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[name])]
    turns = [list(turn) for turn in question["question"]]
    for turn, names in question.get("missed_function", {}).items():
        held_back = []
        for name in names:
            index = next(index for index, doc in enumerate(functions) if doc["name"] == name)
            held_back.append(functions.pop(index))
        if turns[int(turn)]:
            raise ValueError(f"{question['id']}: BFCL's held-back turn {turn} has a user message")
        turns[int(turn)] = [{"role": "user",
                             "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(
                                 functions=held_back)}]
    functions = pre_process(json.loads(json.dumps(functions)), category)
    return {"id": question["id"], "category": category, "turns": turns,
            "system": SYSTEM_PROMPT.format(tools=tool_list(functions), call_example=CALL_EXAMPLE)}


def prompt_records(categories: Sequence[str]) -> list[dict[str, Any]]:
    """What ``generate`` answers: per single-turn question ``{id, category, prompt}``, per multi-turn question
    ``{id, category, system, turns}``."""
    if not categories:
        raise ValueError(f"no category given; BFCL v3's categories are {list(CATEGORIES)}")
    return [multi_turn_record(question, category) if category in MULTI_TURN_CATEGORIES else
            {"id": question["id"], "category": category, "prompt": toolrl_chat(question, category)}
            for category in categories for question in load_category(category)]


def decode(response: str) -> list[Any]:
    """The calls of a response as ToolRL's BFCL handler decodes them: ``[{name: parameters}, ...]`` from the last
    ``<tool_call>`` block, one JSON object a line; a line that does not parse or lacks a field, and a call named
    "None", are left out; no block: ``[]``."""
    if "<tool_call>" not in response:
        return []
    lines = response.split("<tool_call>")[-1].split("</tool_call>")[0].strip().split("\n")
    calls = []
    for line in lines:
        try:
            call = json.loads(line)
            name = call["name"]
            if name.strip().lower() == "none":
                continue
            calls.append({name: call["parameters"]})
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            continue  # what the handler's bare except leaves out
    return calls


def accepted_calls(question: Mapping[str, Any], omit_optional: bool = True) -> list[dict[str, Any]]:
    """One answer BFCL accepts, as ToolRL's calls: each function of the possible answer with, per parameter, the
    first value listed other than "" (BFCL's mark for "may be omitted"); an optional parameter whose list has "" is
    omitted unless ``omit_optional`` is false. A dict of accepted-value lists (alone or in a list) is answered
    likewise, entry by entry."""
    required = {function["name"]: set(function["parameters"].get("required", [])) for function in question["function"]}

    def one(values: Any, optional: bool) -> tuple[Any, bool]:
        if not isinstance(values, list) or (omit_optional and optional and "" in values):
            return None, False
        listed = [value for value in values if value != ""]
        if not listed:
            return None, False
        return accepted_value(listed[0]), True

    def accepted_value(value: Any) -> Any:  # a dict of accepted-value lists, or a list of such dicts
        if isinstance(value, list):
            return [accepted_value(entry) for entry in value]
        if isinstance(value, dict) and all(isinstance(entry, list) for entry in value.values()):
            return {key: chosen for key, (chosen, kept) in ((key, one(entry, True)) for key, entry in value.items())
                    if kept}
        return value

    calls = []
    for expected in question["possible_answer"]:
        (name, parameters), = expected.items()
        needed = required.get(name, set())
        kept = {key: value for key, (value, keep) in
                ((key, one(values, key not in needed)) for key, values in parameters.items()) if keep}
        calls.append({"name": name, "parameters": kept})
    return calls


def toolrl_response(calls: Sequence[Mapping[str, Any]]) -> str:
    """``calls`` written as a response in ToolRL's format."""
    return "<think> ok </think>\n<tool_call>\n" + "\n".join(json.dumps(call) for call in calls) + "\n</tool_call>"


def has_format(response: str) -> bool:
    """ToolRL's output format: ``<think>...</think>``, then a ``<tool_call>`` block and/or a ``<response>``, in
    that order, each tag once (the format reward's rule, with the blocks the response has)."""
    truth = GroundTruth(calls=() if "<tool_call>" in response else None,
                        response="" if "<response>" in response else None)
    return (truth.calls is not None or truth.response is not None) and format_matches(response.strip(), truth)


def judge(question: Mapping[str, Any], category: str, response: str) -> tuple[bool, str]:
    """BFCL's verdict on one response, and its error type ("" when right)."""
    utils, _, _, ast_checker, _ = bfcl()
    decoded = decode(response)
    if category in RELEVANCE_CATEGORIES:
        calls = not utils.is_empty_output(decoded)
        right = not calls if "irrelevance" in category else calls
        error = "irrelevance_error:decoder_success" if calls else "relevance_error:decoder_failed"
        return right, "" if right else error
    if not utils.is_function_calling_format_output(decoded):
        return False, "ast_decoder:decoder_wrong_output_format"
    result = ast_checker(question["function"], decoded, question["possible_answer"], AST_CATEGORIES[category],
                         category, CHECKER_MODEL)
    return bool(result["valid"]), "" if result["valid"] else str(result.get("error_type", "invalid"))


def score_run(generations: Sequence[Mapping[str, Any]], partial: bool = False) -> dict[str, Any]:
    """Accuracy per category, BFCL's summaries of the categories present, and the format rate, for one run's
    records: ``{id, category, response}`` (single-turn) or ``{id, category, turns}`` (multi-turn, as ``generate``
    writes them). Every question of a category present must have one record, unless ``partial`` (then each
    category is scored on the questions it has, and no summary is given). A multi-turn question BFCL's checker
    cannot decide (an execution past its budget), and a question whose checker went past its budget or failed on
    the response, is counted, per category, under ``undecided``, and not as right."""
    _, _, helper, _, _ = bfcl()
    by_category: dict[str, dict[str, Mapping[str, Any]]] = {}
    for record in generations:
        category = record.get("category") if isinstance(record, Mapping) else None
        answer = "turns" if category in MULTI_TURN_CATEGORIES else "response"
        if category not in CATEGORIES or not isinstance(record.get("id"), str) or answer not in record:
            raise ValueError(f"a generation needs an id, a category of {list(CATEGORIES)} and a response text "
                             f"(single-turn) or turns (multi-turn); got {str(record)[:200]!r}")
        records = by_category.setdefault(category, {})
        if record["id"] in records:
            raise ValueError(f"{category} question {record['id']} has two records; one run holds one each")
        records[record["id"]] = record
    if not by_category:
        raise ValueError("no generations to score")
    accuracy: dict[str, dict[str, Any]] = {}
    errors: Counter[str] = Counter()
    undecided: dict[str, list[str]] = {}
    undecided_why: dict[str, str] = {}
    formatted = total = 0
    for category, records in by_category.items():
        questions = load_category(category)
        unknown = sorted(set(records) - {question["id"] for question in questions})
        missing = sorted({question["id"] for question in questions} - set(records))
        if unknown or (missing and not partial):
            raise ValueError(f"category {category}: {len(missing)} of BFCL's {len(questions)} questions have no "
                             f"record (e.g. {missing[:3]}), and {len(unknown)} records name questions it does not "
                             f"have (e.g. {unknown[:3]}); score a subset with --partial")
        questions = [question for question in questions if question["id"] in records]
        right = 0
        for question in questions:
            record = records[question["id"]]
            if category in MULTI_TURN_CATEGORIES:
                verdict, error = bfcl_execution.judge(question, record)
                responses = [response for turn in record["turns"] for response in turn]
            else:
                verdict, error = single_turn_verdict(question, category, record["response"])
                responses = [record["response"]]
            if verdict is None:
                undecided.setdefault(category, []).append(question["id"])
                undecided_why[question["id"]] = error.removeprefix("undecided: ")
            right += bool(verdict)
            if not verdict:
                errors[error.split(":", 1)[0] if verdict is None else error] += 1
            formatted += sum(has_format(response) for response in responses)
            total += len(responses)
        accuracy[category] = {"accuracy": right / len(questions), "total_count": len(questions),
                              "display_accuracy": right / len(questions)}
    summary = {category: value["accuracy"] for category, value in accuracy.items()}
    if not partial:
        summary.update(summaries(accuracy, helper))
    summary["format_rate"] = formatted / total if total else 0.0
    return {"accuracy": summary, "errors": dict(errors), "undecided": undecided, "undecided_why": undecided_why,
            "questions": {category: value["total_count"] for category, value in accuracy.items()}}


def single_turn_verdict(question: Mapping[str, Any], category: str, response: str) -> tuple[bool | None, str]:
    """``judge`` in a ``bounded`` child (``bfcl_execution``): ``None`` and why when it cannot be decided (the
    decoding or BFCL's checker went past a budget, or failed on the response), so that no response stops the
    scoring."""
    kind, value = bfcl_execution.bounded(judge, question, category, response)
    if kind == "ok":
        right, error = value
        return right, error
    return None, f"undecided: BFCL's checker {'went ' if kind == 'over' else 'failed on the response: '}{value}"


def summaries(accuracy: Mapping[str, Mapping[str, Any]], helper: Any) -> dict[str, float]:
    """BFCL's leaderboard summaries (eval_runner_helper's weighted and unweighted means), each where all of its
    categories were scored."""
    weighted, unweighted = helper.calculate_weighted_accuracy, helper.calculate_unweighted_accuracy
    found: dict[str, Any] = {}

    def have(*names: str) -> bool:
        return all(name in accuracy for name in names)

    if have("simple", "java", "javascript", "multiple", "parallel", "parallel_multiple"):
        simple = unweighted([accuracy["simple"], accuracy["java"], accuracy["javascript"]])
        parts = [simple, accuracy["multiple"], accuracy["parallel"], accuracy["parallel_multiple"]]
        found["non_live_ast"] = unweighted(parts)
        if have("irrelevance"):
            found["non_live"] = unweighted([*parts, accuracy["irrelevance"]], display_na_if_category_missing=False)
    live_ast = ["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]
    if have(*live_ast):
        found["live_ast"] = weighted([accuracy[name] for name in live_ast])
        if have("live_irrelevance", "live_relevance"):
            found["live"] = weighted([accuracy[name] for name in [*live_ast, "live_irrelevance", "live_relevance"]],
                                     display_na_if_category_missing=False)
    if "live" in found and "non_live" in found:
        found["single_turn_overall"] = unweighted([found["live"], found["non_live"]])
    if have(*MULTI_TURN_CATEGORIES):
        found["multi_turn"] = unweighted([accuracy[name] for name in MULTI_TURN_CATEGORIES],
                                         display_na_if_category_missing=False)
        if "live" in found and "non_live" in found:
            found["overall"] = unweighted([found["live"], found["non_live"], found["multi_turn"]],
                                          display_na_if_category_missing=False)
    if have("irrelevance", "live_irrelevance"):
        found["irrelevance_total"] = unweighted([accuracy["irrelevance"], accuracy["live_irrelevance"]])
    return {name: value["accuracy"] for name, value in found.items()}


SUMMARY_ROWS = ("overall", "single_turn_overall", "non_live", "non_live_ast", "live", "live_ast", "multi_turn",
                "irrelevance_total", "format_rate")


def markdown_table(columns: Mapping[str, Mapping[str, float]]) -> str:
    """Runs side by side: BFCL's summaries, then every category, in percent."""
    names = [name for name in (*SUMMARY_ROWS, *CATEGORIES) if any(name in column for column in columns.values())]
    lines = ["| BFCL v3 | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for name in names:
        cells = [f"{100 * column[name]:.2f}" if name in column else "-" for column in columns.values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
