"""The tool-calling rewards (gdpo_verl.rewards.tool_calling) on hand-written cases for every rule, and on
hostile model output: a score every time, never an exception, in bounded time."""

import json
import re
import time

import pytest

from gdpo_verl.rewards.tool_calling import MAX_RESPONSE_CHARS, compute_score, parse_ground_truth

NEWS = {"name": "GetNews", "parameters": {"page": "1"}}
WEATHER = {"name": "Weather", "parameters": {"city": "Paris", "unit": "C"}}


def calls_block(*calls):
    return "<tool_call>\n" + "\n".join(json.dumps(call) for call in calls) + "\n</tool_call>"


def truth(*calls, response=None):
    parts = ["<think> I should use the appropriate tool. </think>"]
    if calls:
        parts.append(calls_block(*calls))
    if response is not None:
        parts.append(f"<response> {response} </response>")
    return "\n".join(parts)


def score(response, ground_truth, **options):
    result = compute_score("toolrl", response, ground_truth, {}, **options)
    # every call returns what compute_score declares (which the config check holds the reward keys to)
    assert set(result) == {"score", *compute_score.needs.returns}
    return result


# --------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    ("ground_truth", "response", "expected"),
    [
        (truth(NEWS), "<think>a</think>\n" + calls_block(NEWS), 1.0),
        (truth(response="Sure."), "<think>a</think>\n<response>Hi</response>", 1.0),
        (truth(NEWS, response="Done."), "<think>a</think>\n" + calls_block(NEWS) + "\n<response>ok</response>", 1.0),
        # blocks in the wrong order, a block the ground truth does not have, or one it has missing
        (truth(NEWS, response="Done."), "<think>a</think>\n<response>ok</response>\n" + calls_block(NEWS), 0.0),
        (truth(NEWS), "<think>a</think>\n" + calls_block(NEWS) + "\n<response>ok</response>", 0.0),
        (truth(NEWS), "<think>a</think>\n<response>ok</response>", 0.0),
        # no <think> first, no newline between blocks, a tag twice, text after the last block
        (truth(NEWS), calls_block(NEWS), 0.0),
        (truth(NEWS), "<think>a</think>" + calls_block(NEWS), 0.0),
        (truth(NEWS), "<think>a</think>\n" + calls_block(NEWS) + "\n" + calls_block(NEWS), 0.0),
        (truth(NEWS), "<think>a</think>\n" + calls_block(NEWS) + " thanks", 0.0),
        # surrounding whitespace and an end-of-turn marker do not count
        (truth(NEWS), "  <think>a</think>\n" + calls_block(NEWS) + "<|im_end|>\n", 1.0),
    ],
)
def test_format_is_think_then_exactly_the_blocks_of_the_ground_truth_in_order(ground_truth, response, expected):
    assert score(response, ground_truth)["format"] == expected


def test_format_does_not_look_at_whether_the_calls_parse():
    result = score("<think>a</think>\n<tool_call>\nnot json\n</tool_call>", truth(NEWS))
    assert result["format"] == 1.0 and result["correct"] == -3.0 and result["tool_call_parsed"] == 0.0


# --------------------------------------------------------------------------- correctness


def test_exact_calls_score_the_maximum():
    result = score("<think>a</think>\n" + calls_block(NEWS, WEATHER), truth(NEWS, WEATHER))
    assert result == {"score": 4.0, "format": 1.0, "correct": 3.0, "tool_call_expected": 1.0,
                      "tool_call_parsed": 1.0, "exact_match": 1.0}


def test_a_wrong_value_costs_its_share_of_the_maximum():
    # names 1 + (parameter names 1 + right values 0) = 2 of 1 + (1 + 1) = 3 -> -3 + 6 * 2/3 = 1
    wrong = {"name": "GetNews", "parameters": {"page": "2"}}
    result = score("<think>a</think>\n" + calls_block(wrong), truth(NEWS))
    assert result["correct"] == pytest.approx(1.0) and result["exact_match"] == 0.0


def test_partial_parameter_names_and_values():
    # expected Weather(city, unit); predicted Weather(city=Paris, days=3):
    # names 1; parameter names |{city}| / |{city, unit, days}| = 1/3; values 1 (city) -> 1 + 4/3 of 1 + 3 = 4
    predicted = {"name": "Weather", "parameters": {"city": "Paris", "days": 3}}
    result = score("<think>a</think>\n" + calls_block(predicted), truth(WEATHER))
    assert result["correct"] == pytest.approx(-3 + 6 * (1 + 4 / 3) / 4)


def test_missing_and_extra_calls_lower_the_name_overlap():
    # expected [GetNews, Weather], predicted [GetNews]: names 1/2; GetNews matched fully (1 + 1); Weather unmatched
    result = score("<think>a</think>\n" + calls_block(NEWS), truth(NEWS, WEATHER))
    assert result["correct"] == pytest.approx(-3 + 6 * (0.5 + 2) / (1 + 2 + 3))
    # expected [GetNews], predicted [GetNews, GetNews]: names 1/2; one GetNews matched fully
    result = score("<think>a</think>\n" + calls_block(NEWS, NEWS), truth(NEWS))
    assert result["correct"] == pytest.approx(-3 + 6 * (0.5 + 2) / 3)


def test_each_predicted_call_matches_at_most_one_expected_call():
    second = {"name": "GetNews", "parameters": {"page": "2"}}
    # expected two GetNews calls, predicted one (page 1): it matches the first (1 + 1), the second gets nothing
    result = score("<think>a</think>\n" + calls_block(NEWS), truth(NEWS, second))
    assert result["correct"] == pytest.approx(-3 + 6 * (0.5 + 2) / (1 + 2 + 2))


def test_the_wrong_tool_scores_the_minimum_of_a_parsed_call():
    other = {"name": "Other", "parameters": {"page": "1"}}
    result = score("<think>a</think>\n" + calls_block(other), truth(NEWS))
    assert result["correct"] == pytest.approx(-3.0) and result["tool_call_parsed"] == 1.0


def test_call_order_matters_only_for_the_exact_match():
    result = score("<think>a</think>\n" + calls_block(WEATHER, NEWS), truth(NEWS, WEATHER))
    # names 1 + each call matched fully: 1 + 2 + 3 of 6 -> 3, but not the exact-match shortcut
    assert result["correct"] == pytest.approx(3.0) and result["exact_match"] == 0.0


@pytest.mark.parametrize(
    "response",
    [
        "<think>a</think>\n<response>I cannot.</response>",  # no tool call at all
        "<think>a</think>\n<tool_call>\n" + json.dumps(NEWS),  # never closed
        "<think>a</think>\n<tool_call>\n{\"name\": \"GetNews\", \"parameters\": {\"page\": \"1\"\n</tool_call>",  # bad JSON
        "<think>a</think>\n<tool_call>\n" + json.dumps(NEWS) + "\n\n" + json.dumps(NEWS) + "\n</tool_call>",  # blank line
        "<think>a</think>\n<tool_call>\n[" + json.dumps(NEWS) + "]\n</tool_call>",  # a list, not a call
        "<think>a</think>\n<tool_call>\n{\"name\": \"GetNews\"}\n</tool_call>",  # no parameters
        "<think>a</think>\n<tool_call>\n{\"name\": 3, \"parameters\": {}}\n</tool_call>",  # name not a string
        "<think>a</think>\n<tool_call>\n{\"name\": \"GetNews\", \"parameters\": [1]}\n</tool_call>",  # not a dict
        "<think>a</think>\n<tool_call>\n\n</tool_call>",  # empty block
    ],
)
def test_a_missing_or_unparseable_tool_call_scores_the_minimum(response):
    result = score(response, truth(NEWS))
    assert result["correct"] == -3.0 and result["tool_call_parsed"] == 0.0 and result["exact_match"] == 0.0


def test_no_expected_call_scores_zero_correctness_whatever_the_response():
    ground_truth = truth(response="Please give me the text.")
    assert score("<think>a</think>\n<response>ok</response>", ground_truth)["correct"] == 0.0
    called = score("<think>a</think>\n" + calls_block(NEWS), ground_truth)
    assert called["correct"] == 0.0 and called["format"] == 0.0
    # exact_match: the right decision (no call) is what counts when none is expected
    assert score("<think>a</think>\n<response>ok</response>", ground_truth)["exact_match"] == 1.0
    assert called["exact_match"] == 0.0 and called["tool_call_expected"] == 0.0


def test_score_is_format_plus_correct():
    result = score("<think>a</think>\n" + calls_block(WEATHER), truth(NEWS, WEATHER))
    assert result["score"] == pytest.approx(result["format"] + result["correct"])


def test_score_carries_the_reward_weights_so_grpo_sees_the_weighted_objective():
    result = score("<think>a</think>\n" + calls_block(WEATHER), truth(NEWS, WEATHER), format_weight=2.0, correct_weight=0.5)
    assert result["score"] == pytest.approx(2.0 * result["format"] + 0.5 * result["correct"])


# --------------------------------------------------------------------------- options


def test_correct_scale_sets_the_range():
    assert score("<think>a</think>\n" + calls_block(NEWS), truth(NEWS), correct_scale=1.0)["correct"] == 1.0
    assert score("<think>a</think>", truth(NEWS), correct_scale=1.0)["correct"] == -1.0


def test_strict_names_scores_name_lists_all_or_nothing():
    predicted = {"name": "Weather", "parameters": {"city": "Paris"}}
    loose = score("<think>a</think>\n" + calls_block(predicted), truth(WEATHER))["correct"]
    strict = score("<think>a</think>\n" + calls_block(predicted), truth(WEATHER), strict_names=True)["correct"]
    # parameter names [city] vs [city, unit]: 1/2 loosely, 0 strictly; the value of city counts in both
    assert loose == pytest.approx(-3 + 6 * (1 + 0.5 + 1) / 4)
    assert strict == pytest.approx(-3 + 6 * (1 + 0 + 1) / 4)


def test_all_or_nothing_gives_the_maximum_or_the_minimum():
    wrong = {"name": "GetNews", "parameters": {"page": "2"}}
    assert score("<think>a</think>\n" + calls_block(wrong), truth(NEWS), all_or_nothing=True)["correct"] == -3.0
    assert score("<think>a</think>\n" + calls_block(NEWS), truth(NEWS), all_or_nothing=True)["correct"] == 3.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"correct_scale": 0}, "correct_scale must be above 0"),
        ({"correct_scale": True}, "correct_scale must be a finite number"),
        ({"strict_names": "yes"}, "strict_names must be true or false"),
        ({"all_or_nothing": 2}, "all_or_nothing must be true or false"),
        ({"format_weight": float("nan")}, "format_weight must be a finite number"),
        ({"value_rule": "python"}, "value_rule must be one of ('bfcl', 'toolrl'); got 'python'"),
        ({"scale": 3}, "unknown reward.custom_reward_function.reward_kwargs ['scale']"),
        ({"strict_name": True}, "['strict_name'] (did you mean 'strict_names' for 'strict_name'?); the options are "
                                "correct_scale, format_weight"),
    ],
)
def test_bad_options_are_refused_with_their_name(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        score("<think>a</think>", truth(NEWS), **options)


# --------------------------------------------------------------------------- values typed as BFCL types them

AREA = {"name": "area", "parameters": {"base": 10, "ratio": 2.5, "exact": True, "unit": "cm", "sides": [3, 4.5],
                                       "shape": {"n": 3, "closed": False}}}


def with_value(parameter, value):
    call = json.loads(json.dumps(AREA))
    call["parameters"][parameter] = value
    return call


@pytest.mark.parametrize(
    ("parameter", "given", "bfcl_right"),
    [
        # an integer only by an integer: not 10.0, not true
        ("base", 10, True), ("base", 10.0, False), ("base", 1e1, False), ("base", True, False), ("base", "10", False),
        # a float by an integer or a float of the same value, never a boolean or a string
        ("ratio", 2.5, True), ("ratio", 2.50, True), ("ratio", 2, False), ("ratio", "2.5", False),
        # a boolean only by a boolean
        ("exact", True, True), ("exact", 1, False), ("exact", 1.0, False), ("exact", "true", False),
        ("unit", "cm", True), ("unit", "CM", False),
        # a list or an object of the right type, then equal by value, as BFCL compares them (no entry type declared)
        ("sides", [3, 4.5], True), ("sides", [3.0, 4.5], True), ("sides", [True, 4.5], False),
        ("sides", [3, 4.5, 1], False), ("sides", "[3, 4.5]", False),
        ("shape", {"n": 3, "closed": False}, True), ("shape", {"n": 3.0, "closed": False}, True),
        ("shape", {"n": 3}, False), ("shape", [3, False], False),
    ],
)
def test_values_are_typed_as_bfcls_checker_types_them_and_toolrl_keeps_pythons_equality(parameter, given, bfcl_right):
    response = "<think>a</think>\n" + calls_block(with_value(parameter, given))
    bfcl = score(response, truth(AREA))
    toolrl = score(response, truth(AREA), value_rule="toolrl")
    assert bfcl["exact_match"] == float(bfcl_right)
    assert (bfcl["correct"] == 3.0) is bfcl_right
    # one value of six wrong: (1 + 1 + 5) / 8 of the range
    assert bfcl["correct"] == pytest.approx(3.0 if bfcl_right else -3.0 + 6.0 * 7 / 8)
    python_equal = given == AREA["parameters"][parameter]
    assert toolrl["exact_match"] == float(python_equal)
    assert toolrl["correct"] == pytest.approx(3.0 if python_equal else -3.0 + 6.0 * 7 / 8)


def test_the_schemas_declared_types_decide_as_bfcls_checker_reads_them():
    gold = {"name": "convert", "parameters": {"amount": 10, "year": 2024, "code": 7, "rate": 2.0,
                                              "xs": [1.0, 3.0], "ys": [23, 45], "zs": [1, 2]}}
    declared = {"convert": {"amount": "float, optional", "year": "int", "code": "string", "xs": "List[float]",
                            "ys": "array[float]", "zs": "Tuple[int, ...]"}}
    for extra_info in ({"parameter_types": declared}, {"parameter_types": json.dumps(declared)}):
        def right(**given):
            call = {"name": "convert", "parameters": {**gold["parameters"], **given}}
            response = "<think>a</think>\n" + calls_block(call)
            return compute_score("toolrl", response, truth(gold), extra_info)["exact_match"] == 1.0
        assert right()
        # a declared float ("float, optional" reads as float): the integer gold 10 is answered by 10 or 10.0
        assert right(amount=10) and right(amount=10.0) and not right(amount=10.5) and not right(amount=True)
        # a declared integer: only an integer
        assert right(year=2024) and not right(year=2024.0)
        # a declared string the gold value is not (7): the gold's type answers too, as in BFCL
        assert right(code=7) and not right(code="7") and not right(code=7.0)
        # nothing declared, a float gold: an integer of the same value answers it
        assert right(rate=2) and right(rate=2.0) and not right(rate=True)
        # a list's entries of their declared type, or of the gold's first entry's type
        assert not right(xs=[1, 3]) and right(ys=[23.0, 45.0]) and right(ys=[23, 45.0])
        assert not right(zs=[1.0, 2]) and not right(zs=[True, 2])
    # without a declaration, the gold's type: an integer
    assert score("<think>a</think>\n" + calls_block({"name": "convert", "parameters": {**gold["parameters"],
                                                                                          "amount": 10.0}}),
                 truth(gold))["exact_match"] == 0.0


def test_a_list_answering_a_gold_that_is_no_list_scores_without_raising():
    # the schema declares a list, the gold is not one (a data slip): a list given is compared, never indexed as gold
    gold = {"name": "f", "parameters": {"a": 5, "b": {"k": 1}, "c": "xy"}}
    extra_info = {"parameter_types": {"f": {"a": "List[int]", "b": "list[int]", "c": "array[string]"}}}
    for given in ({"a": [5]}, {"b": [1]}, {"c": ["x", "y"]}):
        call = {"name": "f", "parameters": {**gold["parameters"], **given}}
        result = compute_score("toolrl", "<think>a</think>\n" + calls_block(call), truth(gold), extra_info)
        assert result["exact_match"] == 0.0 and -3.0 < result["correct"] < 3.0
    assert compute_score("toolrl", "<think>a</think>\n" + calls_block(gold), truth(gold), extra_info)["correct"] == 3.0


@pytest.mark.parametrize(("name", "kind", "entries"), [
    ("integer", "integer", None), ("Int", "integer", None), ("number", "float", None), ("float, optional", "float", None),
    ("Optional[bool]", "boolean", None), ("List[float]", "array", "float"), ("array[integer]", "array", "integer"),
    ("Tuple[float, float]", "array", "float"), ("List[Union[int, float]]", "array", None),
    ("List[List[float]]", "array", "array"), ("dict", "object", None), ("any", None, None), ("", None, None),
])
def test_type_names_are_read_in_the_spellings_toolrl_and_bfcl_use(name, kind, entries):
    from gdpo_verl.rewards.tool_values import Declared, declared_type

    assert declared_type(name) == Declared(kind, entries)


@pytest.mark.parametrize("parameter_types", ["{not json", [1, 2], {"convert": "float"}, {"convert": {"amount": 1}}])
def test_malformed_parameter_types_are_a_data_error_naming_the_field(parameter_types):
    with pytest.raises(ValueError, match="extra_info.parameter_types"):
        compute_score("toolrl", "<think>a</think>", truth(NEWS), {"parameter_types": parameter_types})


# --------------------------------------------------------------------------- ground truth forms


def test_the_structured_ground_truth_scores_like_toolrl_s_string():
    response = "<think>a</think>\n" + calls_block(NEWS) + "\n<response>ok</response>"
    structured = {"tool_calls": [NEWS], "response": "Done."}
    expected = score(response, truth(NEWS, response="Done."))
    assert score(response, structured) == expected
    assert score(response, json.dumps(structured)) == expected


@pytest.mark.parametrize(
    ("ground_truth", "message"),
    [
        ("<think>a</think>\n<tool_call>\n{\"name\": \"x\", \"parameters\": {}}", "never closes it"),
        ("<think>a</think>\n<tool_call>\nnot json\n</tool_call>", "ground-truth tool call is not JSON"),
        ("<think>a</think>\n<tool_call>\n{\"name\": \"x\"}\n</tool_call>", "ground truth's tool calls must be"),
        ({"tool_calls": None, "response": None}, "both are empty"),
        ({"tool_calls": [NEWS], "answer": "x"}, "got also \\['answer'\\]"),
        ({"tool_calls": [], "response": None}, "non-empty list"),
        ("{not json", "looks like JSON but does not parse"),
        (42, "got int"),
    ],
)
def test_a_malformed_ground_truth_is_a_data_error_that_names_the_problem(ground_truth, message):
    with pytest.raises(ValueError, match=message):
        parse_ground_truth(ground_truth)


# --------------------------------------------------------------------------- hostile model output


HOSTILE = [
    "",
    "\x00\x01\x02",
    "<think>" * 10_000,
    "<think>a</think>\n<tool_call>\n" + "[" * 100_000 + "\n</tool_call>",  # nesting past the JSON parser's depth
    "<think>a</think>\n<tool_call>\n" + json.dumps({"name": "GetNews", "parameters": {"page": [[[[["1"]]]]]}}) + "\n</tool_call>",
    "<think>a</think>\n<tool_call>\n{\"name\": \"GetNews\", \"parameters\": {\"page\": " + "9" * 5000 + "}}\n</tool_call>",
    "<think>a</think>\n<tool_call>\n" + "\n".join([json.dumps(NEWS)] * 5000) + "\n</tool_call>",
    "<think>a</think>\n<tool_call>\n{\"name\": \"GetNews\", \"parameters\": {\"page\": NaN}}\n</tool_call>",
    "<think>" + "</think>\n" * 20_000 + "<tool_call>\n{}\n</tool_call>",
    "<think>a</think>\n<tool_call>\n" + json.dumps({"name": "GetNews", "parameters": {"page": "x" * 90_000}}) + "\n</tool_call>",
    "x" * (MAX_RESPONSE_CHARS + 1),
    None,
]


@pytest.mark.parametrize("response", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_output_gets_a_score_in_bounded_time(response):
    start = time.perf_counter()
    result = score(response, truth(NEWS, WEATHER))
    assert time.perf_counter() - start < 2.0
    assert -3.0 <= result["correct"] <= 3.0 and result["format"] in (0.0, 1.0)
    assert result["score"] == pytest.approx(result["format"] + result["correct"])


def test_deeply_nested_expected_values_compare_without_crashing():
    deep = "1"
    for _ in range(500):
        deep = [deep]
    expected = {"name": "Deep", "parameters": {"value": deep}}
    result = score("<think>a</think>\n" + calls_block(expected), truth(expected))
    assert result["correct"] == 3.0
