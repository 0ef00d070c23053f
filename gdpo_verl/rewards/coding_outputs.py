"""Whether a run of a model's program answers its test case (the coding reward's comparison).

Output: line by line after trailing whitespace is stripped and trailing empty lines dropped; failing that, token by
token (whitespace-separated): equal text, or where the expected token is a decimal number with a point or an
exponent, a number within ``1e-6`` absolute or relative (an expected integer is matched exactly). Nothing looser (no
set or order-free comparison, unlike verl's prime_code). A call-based result: ``same_value``. Numbers are compared
exactly as written, at any size (never through a float), and nothing a program prints makes the reward raise: a
result line that is not a JSON value the reader takes fails its test case.
"""

from __future__ import annotations

import decimal
import json
import numbers
import re
from typing import Any


def call_passed(result: str, expected: Any) -> bool:
    """Whether a call-based test case passed: ``result`` is the program's result line after the marker, whatever it
    holds (a result JSON cannot hold, such as bytes or a set, was refused in the sandbox; one this reader does not
    take, nested past the parser's depth or not JSON at all, fails). Also passes: the expected value wrapped in a
    one-element list (as some datasets store it)."""
    value = read_json(result)
    if value is UNREADABLE:
        return False
    wrapped = isinstance(expected, list) and len(expected) == 1 and same_value(value, expected[0])
    return same_value(value, expected) or wrapped


class Digits(str):
    """A JSON integer longer than Python converts from text (``sys.get_int_max_str_digits``), kept as its text:
    compared with other integers exactly, as text."""


UNREADABLE = object()  # read_json: not a JSON value this reader takes


def read_json(text: str) -> Any:
    """A JSON value, its integers exact at any length (``Digits`` past Python's limit), or ``UNREADABLE`` when it is
    not JSON or nests deeper than the parser goes (a RecursionError, caught here and nowhere else)."""
    try:
        return json.loads(text, parse_int=_integer)
    except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        return UNREADABLE


def _integer(text: str) -> int | Digits:
    try:
        return int(text)
    except ValueError:  # more digits than int() converts from text
        return Digits(text)


def same_value(value: Any, expected: Any) -> bool:
    """A call-based result against the expected JSON value: a bool only equals a bool; an integer only equals the
    same integer (a float never answers an integer: ``2.0`` is not ``2``); a float is answered by a float or an
    integer within 1e-6 (absolute or relative); a tuple as a list, lists and dicts element by element. Numbers are
    compared exactly, at any size, never through a float."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if _is_number(value) and _is_number(expected):
        if _is_integer(expected):
            return _is_integer(value) and _same_integer(value, expected)
        return _close(value, expected)
    if isinstance(value, (list, tuple)) and isinstance(expected, list):
        return len(value) == len(expected) and all(map(same_value, value, expected))
    if isinstance(value, dict) and isinstance(expected, dict):
        return value.keys() == expected.keys() and all(same_value(value[key], expected[key]) for key in value)
    return type(value) is type(expected) and value == expected


def same_output(actual: str, expected: str) -> bool:
    """Line by line after trailing whitespace is stripped; else token by token (``_same_token``)."""
    lines = [line.rstrip() for line in actual.rstrip().split("\n")]
    wanted = [line.rstrip() for line in expected.rstrip().split("\n")]
    if lines == wanted:
        return True
    tokens, wanted_tokens = actual.split(), expected.split()
    return len(tokens) == len(wanted_tokens) and all(map(_same_token, tokens, wanted_tokens))


_INTEGER = re.compile(r"[+-]?[0-9]+")
# one way to read each digit (not [0-9]+\.?[0-9]*, which backtracks quadratically on a long run of digits: a 16,000-digit
# token took 4.5 s, holding the interpreter's lock)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _same_token(token: str, wanted: str) -> bool:
    """Equal text; or, where the expected token is a decimal number with a point or an exponent, a number within
    1e-6 of it. An integer is matched exactly (``1e18`` is not ``1000000000000000007``)."""
    if token == wanted:
        return True
    if _INTEGER.fullmatch(wanted) or not (_DECIMAL.fullmatch(wanted) and _DECIMAL.fullmatch(token)):
        return False
    return _close(token, wanted)


def _is_number(value: Any) -> bool:
    return isinstance(value, (numbers.Number, Digits)) and not isinstance(value, complex)


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, Digits))


def _same_integer(value: int | Digits, expected: int | Digits) -> bool:
    if isinstance(value, int) and isinstance(expected, int):
        return value == expected
    # a Digits has more digits than any int converts to text, so it equals only the same Digits
    return isinstance(value, Digits) and isinstance(expected, Digits) and value == expected


# Decimal arithmetic wide enough for any number a program prints: exact conversions, no overflow, no exception.
_NUMBERS = decimal.Context(prec=60, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])


def _close(value: Any, target: Any) -> bool:
    """|value - target| <= 1e-6 * max(1, |value|, |target|) (``math.isclose`` with 1e-6 relative and absolute), in
    exact decimal arithmetic: numbers of any size or text, never through a float. Not finite: never close."""
    a, b = _NUMBERS.create_decimal(_text_or_number(value)), _NUMBERS.create_decimal(_text_or_number(target))
    if not (a.is_finite() and b.is_finite()):
        return False
    scale = _NUMBERS.max(_NUMBERS.max(_NUMBERS.abs(a), _NUMBERS.abs(b)), _ONE)
    return _NUMBERS.abs(_NUMBERS.subtract(a, b)) <= _NUMBERS.multiply(scale, _TOLERANCE)


_ONE, _TOLERANCE = decimal.Decimal(1), decimal.Decimal("1e-6")


def _text_or_number(number: Any) -> str | int | float | decimal.Decimal:
    """What ``create_decimal`` takes: a Digits as its text, anything else as it is (an int of any size converts
    without text; a float exactly)."""
    return str(number) if isinstance(number, str) else number
