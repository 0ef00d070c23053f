"""Whether a tool call's argument is the gold value, as BFCL's AST checker types arguments (``value_rule="bfcl"`` of
the tool-calling reward), or by Python's ``==`` as ToolRL compares them (``value_rule="toolrl"``).

BFCL's rule (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``: ``simple_function_checker`` and ``type_checker``),
which this module follows:

- **the argument's type**: it must be the parameter's declared type, or the type of the gold value (BFCL's
  "variable" case). Types are JSON's, with integers and floats apart and booleans apart from both. A declared float
  also takes an integer (BFCL converts it first); where nothing is declared, a float gold value declares it. So
  ``10.0`` does not answer an integer, ``1`` does not answer a boolean, and ``2`` answers a float ``2.0``.
- **a list's entries**, where the schema declares their type: each entry is of that type or of the gold list's
  first entry's type. One level deep, as BFCL checks it.
- **the value**: then Python's ``==`` (BFCL's ``in`` over the accepted values), so objects and deeper entries
  compare by value (``{"w": 20.0}`` answers ``{"w": 20}``). Strings compare exactly: the reward keeps ToolRL's one
  ground truth, where BFCL also accepts another letter case (docs/tool-calling.md).

Declared types come from the tools' schemas (``extra_info["parameter_types"]``: ``{tool: {parameter: type}}``,
written by ``scripts/prepare_tool_data.py``) in the spellings ToolRL's and BFCL's tool lists use: ``integer``,
``int``, ``float``, ``number``, ``boolean``, ``string``, ``dict``, ``object``, ``array``, ``list``, ``tuple``; the
containers with their entries' type (``List[float]``, ``Tuple[int, int]``, ``array[float]``); ``..., optional`` and
``Optional[...]`` read as what they wrap. A name outside these declares nothing, and the gold value's type decides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gdpo_verl.answers.where import top_level_split

# A schema's type names and the JSON kind each declares.
KINDS = {
    "integer": "integer", "int": "integer",
    "float": "float", "number": "float", "double": "float",
    "boolean": "boolean", "bool": "boolean",
    "string": "string", "str": "string",
    "array": "array", "list": "array", "tuple": "array", "sequence": "array",
    "dict": "object", "object": "object",
}
CONTAINER = re.compile(r"(array|list|tuple|sequence)\[(.*)\]")
OPTIONAL = re.compile(r"optional\[(.*)\]")


@dataclass(frozen=True)
class Declared:
    """What a schema declares of a parameter: its kind and, for a list, its entries' kind (None: not declared)."""

    kind: str | None = None
    entries: str | None = None


def declared_type(name: Any) -> Declared:
    """A schema's type name read as a ``Declared``; a name this module does not know declares nothing."""
    if not isinstance(name, str):
        return Declared()
    text = re.sub(r"\s+", "", name.lower())
    text = text.removesuffix(",optional")
    optional = OPTIONAL.fullmatch(text)
    if optional:
        text = optional.group(1)
    container = CONTAINER.fullmatch(text)
    if container is None:
        return Declared(KINDS.get(text))
    inside = [part for part in top_level_split(container.group(2)) if part != "..."]
    kinds = {declared_type(part).kind for part in inside}
    return Declared("array", kinds.pop() if len(kinds) == 1 else None)


def schema_type(spec: Any) -> str | None:
    """The type name of a JSON-schema parameter ``{"type": ..., "items": {"type": ...}}`` as ``parameter_types``
    keeps it: the type, with the entries' type in brackets for a list (``array[float]``); None without a type."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        return None
    items = spec.get("items")
    if KINDS.get(spec["type"].lower()) == "array" and isinstance(items, Mapping) and isinstance(items.get("type"), str):
        return f"{spec['type']}[{items['type']}]"
    return spec["type"]


def json_kind(value: Any) -> str:
    """A parsed JSON value's kind: boolean, integer, float, string, array, object or null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null" if value is None else type(value).__name__


def same_value(given: Any, expected: Any, declared: Declared = Declared()) -> bool:
    """``given`` answers the gold value ``expected`` of a parameter ``declared`` so, by BFCL's rule (above)."""
    found, gold = json_kind(given), json_kind(expected)
    if (declared.kind or gold) == "float" and found == "integer":
        found = "float"  # BFCL converts an integer given for a declared float
    if found not in (declared.kind, gold):
        return False
    if found == gold == "array" and declared.entries is not None and expected:
        first = json_kind(expected[0])
        if any(json_kind(entry) not in (declared.entries, first) for entry in given):
            return False
    return equal(given, expected)


def equal(given: Any, expected: Any) -> bool:
    """Python's ``==``; values nested past Python's depth are not a match."""
    try:
        return bool(given == expected)
    except RecursionError:
        return False


def parameter_types(extra_info: Any) -> dict[str, dict[str, Declared]]:
    """The tools' declared parameter types from ``extra_info["parameter_types"]`` (``{tool: {parameter: type
    name}}``, or that as a JSON string); {} where the row has none; ValueError naming the field when malformed."""
    found = extra_info.get("parameter_types") if isinstance(extra_info, Mapping) else None
    if found is None:
        return {}
    if isinstance(found, str):
        try:
            found = json.loads(found)
        except json.JSONDecodeError as exc:
            raise ValueError(f"extra_info.parameter_types is not JSON ({exc.msg}): {found[:200]!r}") from exc
    if not isinstance(found, Mapping) or not all(
        isinstance(tool, Mapping) and all(isinstance(kind, str) for kind in tool.values()) for tool in found.values()
    ):
        raise ValueError("extra_info.parameter_types must map each tool to {parameter: type name}; "
                         f"got {str(found)[:200]!r}. Rebuild the data with scripts/prepare_tool_data.py.")
    return {str(tool): {str(name): declared_type(kind) for name, kind in kinds.items()} for tool, kinds in found.items()}


class CallComparison:
    """Whether predicted calls and values are the gold ones, under a value rule and the tools' declared types."""

    def __init__(self, value_rule: str, types: Mapping[str, Mapping[str, Declared]]):
        self.typed = value_rule == "bfcl"
        self.types = types

    def calls(self, expected: Any, predicted: Any) -> bool:
        """The same calls in the same order: names, parameter names, every value (and any other key of a call)."""
        if not self.typed:
            return equal(list(expected), list(predicted))
        if len(expected) != len(predicted):
            return False
        for gold, call in zip(expected, predicted):
            rest = {key: value for key, value in gold.items() if key != "parameters"}
            if not equal(rest, {key: value for key, value in call.items() if key != "parameters"}):
                return False
            if set(gold["parameters"]) != set(call["parameters"]) or not all(
                self.value(gold["name"], key, call["parameters"][key], value)
                for key, value in gold["parameters"].items()
            ):
                return False
        return True

    def value(self, tool: str, parameter: str, given: Any, expected: Any) -> bool:
        if not self.typed:
            return equal(given, expected)
        return same_value(given, expected, self.types.get(tool, {}).get(parameter, Declared()))
