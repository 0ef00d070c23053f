"""The tool-calling reward against BFCL's own checker, on BFCL's questions: where they agree, by class of answer.

Run in BFCL's environment (scripts/setup_bfcl_env.sh):

    .venv-bfcl/bin/python scripts/bench_tool_reward_vs_bfcl.py [--categories simple,multiple,parallel] [--json]

For every question of the categories, answers are written as ToolRL responses: an accepted answer (the first value
BFCL lists for each parameter, optional ones included: the reward's ground truth), and wrong or other variants of
it, one class each:

    accepted          the ground truth itself (BFCL accepts it)
    float_for_integer an integer parameter given as a float of the same value, 10.0 for 10 (BFCL refuses it)
    number_for_bool   a boolean parameter given as 1 or 0 (BFCL refuses it)
    other_listed      a parameter given another value BFCL lists as accepted (BFCL accepts it)
    omitted_optional  an optional parameter left out where BFCL allows it (BFCL accepts it)
    other_case        a string parameter in another letter case (BFCL accepts it: it compares strings lowercased)
    float_entries     a list of integers given as floats of the same values (BFCL refuses it where the list's entries
                      are declared integers, and accepts it where they are declared floats or not declared)
    integer_entries   a list of whole floats given as integers (BFCL refuses it where the entries are declared floats)
    object_entry      an integer entry of an object given as a float of the same value (BFCL accepts it: it
                      compares objects by value)

Each answer is judged by BFCL's ``ast_checker`` and by ``gdpo_verl.rewards.tool_calling`` (full correctness or
not) under both value rules, the reward seeing the tools' declared types as ``scripts/prepare_tool_data.py`` gives
them. Prints, per class, the answers and how many of them each rule judges as BFCL does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from gdpo_verl.rewards.tool_calling import VALUE_RULES, compute_score
from gdpo_verl.rewards.tool_values import schema_type
from gdpo_verl.experiments import bfcl

CLASSES = ("accepted", "float_for_integer", "number_for_bool", "other_listed", "omitted_optional", "other_case",
           "float_entries", "integer_entries", "object_entry")


def variants(question: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(class, calls) for each variant of the question's accepted answer: one per parameter a class applies to."""
    gold = bfcl.accepted_calls(question, omit_optional=False)
    required = {function["name"]: set(function["parameters"].get("required", [])) for function in question["function"]}
    declared = {function["name"]: function["parameters"].get("properties", {}) for function in question["function"]}
    found = [("accepted", gold)]
    for index, expected in enumerate(question["possible_answer"]):
        (name, parameters), = expected.items()
        for key, listed in parameters.items():
            if key not in gold[index]["parameters"]:
                continue
            value = gold[index]["parameters"][key]
            kind = declared.get(name, {}).get(key, {}).get("type")

            def changed(new: Any, drop: bool = False) -> list[dict[str, Any]]:
                calls = json.loads(json.dumps(gold))
                if drop:
                    del calls[index]["parameters"][key]
                else:
                    calls[index]["parameters"][key] = new
                return calls

            if kind == "integer" and type(value) is int:
                found.append(("float_for_integer", changed(float(value))))
            if kind == "boolean" and type(value) is bool:
                found.append(("number_for_bool", changed(int(value))))
            others = [other for other in listed if other != "" and other != value and type(other) is type(value)]
            if others:
                found.append(("other_listed", changed(others[0])))
            if "" in listed and key not in required.get(name, set()):
                found.append(("omitted_optional", changed(None, drop=True)))
            if isinstance(value, str) and value.swapcase() != value:
                found.append(("other_case", changed(value.swapcase())))
            if isinstance(value, list) and value and all(type(entry) is int for entry in value):
                found.append(("float_entries", changed([float(entry) for entry in value])))
            if isinstance(value, list) and value and all(type(entry) is float and entry.is_integer() for entry in value):
                found.append(("integer_entries", changed([int(entry) for entry in value])))
            if isinstance(value, dict):
                whole = [entry for entry, inner in value.items() if type(inner) is int]
                if whole:
                    found.append(("object_entry", changed({**value, whole[0]: float(value[whole[0]])})))
    return found


def parameter_types(question: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The question's declared types as scripts/prepare_tool_data.py writes them for ToolRL's tools."""
    return {function["name"]: {key: schema_type(spec) for key, spec in function["parameters"].get("properties", {}).items()
                               if schema_type(spec) is not None}
            for function in question["function"]}


def compare(categories: list[str]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {name: Counter() for name in CLASSES}
    for category in categories:
        for question in bfcl.load_category(category):
            gold = bfcl.accepted_calls(question, omit_optional=False)
            truth = json.dumps({"tool_calls": gold, "response": None})
            extra_info = {"parameter_types": parameter_types(question)}
            for name, calls in variants(question):
                response = bfcl.toolrl_response(calls)
                accepted, _ = bfcl.judge(question, category, response)
                counts[name]["answers"] += 1
                counts[name]["bfcl_accepts"] += accepted
                for rule in VALUE_RULES:
                    full = compute_score("toolrl", response, truth, extra_info, value_rule=rule)["exact_match"] == 1.0
                    counts[name][f"agree_{rule}"] += full == accepted
    return {name: dict(found) for name, found in counts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--categories", default="simple,multiple,parallel",
                        help="BFCL AST categories, comma-separated (default: simple,multiple,parallel)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    categories = [name.strip() for name in args.categories.split(",") if name.strip()]
    unknown = [name for name in categories if name not in bfcl.AST_CATEGORIES]
    if unknown:
        parser.error(f"not AST categories of BFCL v3: {unknown}; choose from {list(bfcl.AST_CATEGORIES)}")
    try:
        counts = compare(categories)
    except ValueError as exc:
        print(f"bench_tool_reward_vs_bfcl.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(counts))
        return 0
    print(f"| class ({', '.join(categories)}) | answers | BFCL accepts | agree, value_rule=bfcl "
          "| agree, value_rule=toolrl |")
    print("|---|---|---|---|---|")
    total = Counter()
    for name, found in counts.items():
        total.update(found)
        print(f"| {name} | {found.get('answers', 0)} | {found.get('bfcl_accepts', 0)} | {found.get('agree_bfcl', 0)} | "
              f"{found.get('agree_toolrl', 0)} |")
    print(f"| all | {total['answers']} | {total['bfcl_accepts']} | {total['agree_bfcl']} | {total['agree_toolrl']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
