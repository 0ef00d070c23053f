"""What the reader reads a text as (gdpo_verl/answers/parsing.py), below the reward's table of verdicts."""

import pytest

from gdpo_verl.answers import meaning, parsing, relations

PLAIN = ["7", "-12", "+3", "0", "007", "0.25", "-0.5", ".5", "1.50", "12345678901234567890.0001", "\\frac{3}{4}",
         "-\\frac{3}{4}", "\\dfrac{6}{8}", "\\tfrac{1}{3}", "\\frac{10}{2}", "3/4", "-3/4", " 5 ", "\\frac{ 3 }{ 4 }"]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_number_is_read_as_the_parser_reads_it(text):
    # the plain numbers skip the parser: each must be the very value (and places) the parser's reading gives
    fast = meaning.plain_number_value(text)
    assert fast is not None, text
    assert [fast] == parsing._parsed_values(text, text)


@pytest.mark.parametrize("text", ["\\frac{3}{0}", "3/0", "1.2.3", "2^3", "\\frac{3}{4}5", "x", "1e5", "--3", "3 4"])
def test_anything_else_is_left_to_the_parser(text):
    assert meaning.plain_number_value(text) is None


@pytest.mark.parametrize("text", ["x \\geq 3", "x > 3", "x < -2", "x \\leq \\frac{1}{2}", "3 < x", "3 \\geq x",
                                  "x > \\sqrt{2}", "y < \\pi"])
def test_an_inequality_of_the_unknown_and_a_number_is_the_set_sympy_s_solver_gives(text):
    # the unknown alone against a real number is read without the solver: the very set as_set gives
    from gdpo_verl.answers import lexicon

    expr = lexicon.latex2sympy()(text, is_real=True, normalization_config=None)
    expr = meaning.exact_reading(expr, None, text)
    unknown = next(iter(expr.free_symbols))
    assert relations.ray(expr, unknown) == expr.as_set()


def test_any_other_inequality_is_left_to_the_solver():
    import sympy

    x = sympy.Symbol("x", real=True)
    for expr in (x**2 > 4, 2 * x > 3, sympy.Eq(x, 3), x + 1 > 3, x > sympy.Symbol("y", real=True)):
        assert relations.ray(expr, x) is None


@pytest.mark.parametrize(("answer", "gold"), [("10^{5000} \\pmod{7}", "3"), ("10^{5000} \\approx 5", "5"),
                                              ("2^{19000} \\pmod 7", "2"), ("\\lfloor 10^{5000}\\pi\\rfloor", "5")])
def test_a_number_too_long_to_write_out_is_not_read_in_a_process_that_keeps_python_s_limit(answer, gold):
    # the checker processes lift Python's limit on writing out integers (4,300 digits); a direct caller of parse
    # (scripts/prepare_data.py reading golds) keeps it: the reason names the number without writing it out
    import sys

    from gdpo_verl.answers import Unreadable, grade, parse

    kept = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(4300)  # Python's default
    try:
        with pytest.raises(Unreadable):
            grade(parse(gold), parse(answer))
    finally:
        sys.set_int_max_str_digits(kept)
