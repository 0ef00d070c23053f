"""The guards that refuse answers sympy would spend seconds on, read from the text alone."""

import random
import time

import pytest

from gdpo_verl.answers.guard import MAX_DIGITS, MAX_NESTING, MAX_TERMS, nesting, plain_number, refusal

# Answer forms of MATH-500, AIME and OlympiadBench: every one must reach math-verify.
ORDINARY = [
    "204", "-7", "0.5", "\\frac{14}{3}", "\\dfrac{9}{256}", "3\\sqrt{13}", "\\sqrt[3]{2}", "6 - 5i", "p - q",
    "\\text{Evelyn}", "4\\pi^2", "\\left( 3, \\frac{\\pi}{2} \\right)", "(-\\infty, -2) \\cup (7, \\infty)",
    "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", "x \\in [-2,7]", "\\{1,2,3\\}", "1,-2",
    "0.\\overline{3}", "2^{2010}", "2^{2023}", "10^{100}", "2^{64}-1", "9!", "1000!", "\\binom{10}{5}",
    "\\binom{2000}{1000}", "\\binom{1000000}{2}", "2^{10}\\cdot 3^{5}", "\\frac{1}{2^{1000}}", "2^{2^{4}}", "(2^{10})^{10}",
    "e^{i\\pi}", "x^{x^{x^{x}}}", "\\frac{\\sqrt{2}}{2}", "\\left(\\frac{1}{2}\\right)^{2}", "9" * 5000,
    "\\frac{-1 + \\sqrt{5}}{2}", "\\sqrt{\\frac{\\sqrt{3}}{\\left(2+\\sqrt{2}\\right)}}", "",
    "\\sum_{k=1}^{n} k^2", "\\sum_{k=1}^{100} k", "\\prod_{k=1}^{10} k", "\\Gamma(100)", "\\Gamma\\left(\\frac{1}{2}\\right)",
]


@pytest.mark.parametrize("answer", ORDINARY)
def test_an_ordinary_answer_is_checked(answer):
    assert refusal(answer) is None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("10^{10^{10^{10}}}", "more than 10^15 digits"),
        ("9^{9^{9^{9^{9}}}}", "more than 10^15 digits"),
        ("2^2^2^2^2^2", "more than 10^15 digits"),  # a tower without braces, read as 2^(2^(2^...))
        ("x^{10^{10^{10}}}", "about 10,000,000,000 digits"),  # the exponent alone is built
        ("\\frac{10000000!}{9999999!}", "about 70,000,000 digits"),
        ("(10^{10})!", "about 100,000,000,000 digits"),
        ("\\left(10^{10}\\right)!", "about 100,000,000,000 digits"),
        ("\\binom{1000000}{500000}", "about 301,030 digits"),
        ("2^{100000}", "about 30,103 digits"),
        ("0.5^{100000}", "about 30,103 digits"),  # 2^-100000: sympy keeps the exact fraction
        ("2**1000000", "about 301,030 digits"),
        ("20000!", "about 86,021 digits"),
        ("\\frac{1}{" * 90 + "2" + "}" * 90, "brackets nested 90 deep"),
        ("\\left(" * 7 + "1" + "\\right)" * 7, "brackets nested 7 deep"),
        # each of these ran into the checker's timeout before the guards knew sums, products and Gamma
        ("\\prod_{k=1}^{10^{7}} k", "about 10^7 terms (more than 100)"),
        ("\\sum_{k=1}^{100000} k^{k}", "about 10^5 terms (more than 100)"),
        ("\\sum_{k=1}^{1000} k^{k}", "about 10^3 terms (more than 100)"),
        ("\\Gamma(10^{7})", "about 70,000,000 digits"),
    ],
)
def test_a_costly_answer_is_refused_with_its_reason(answer, reason):
    refused = refusal(answer)
    assert refused is not None and reason in refused


def test_the_limits_sit_at_their_documented_values():
    assert refusal("(" * MAX_NESTING + "1" + ")" * MAX_NESTING) is None
    assert "nested" in refusal("(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1))
    assert refusal("10^{%d}" % (MAX_DIGITS - 1)) is None
    assert "digits" in refusal("10^{%d}" % (MAX_DIGITS + 1))


def test_sums_and_products_are_limited_by_their_numeric_upper_limit():
    assert refusal("\\sum_{k=1}^{%d} k" % MAX_TERMS) is None
    assert "terms" in refusal("\\sum_{k=1}^{%d} k" % (MAX_TERMS + 1))
    assert refusal("\\sum_{k=1}^{n} k^{k}") is None  # a symbolic limit: sympy keeps the sum symbolic


# ------------------------------------------------------------------------------------ reading answers


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("5e-05", "0.00005"),
        ("1e16", "10000000000000000"),
        ("2.5E+3", "2500"),
        ("-1.5e-3", "-0.0015"),
        ("1\\,000\\,000", "1000000"),
        ("1{,}234", "1234"),
        ("12\\,34", "12\\,34"),  # not groups of three digits: left alone
        ("x\\,y", "x\\,y"),
        ("e", "e"),
        ("3e", "3e"),
    ],
)
def test_plain_number_writes_numbers_math_verify_misreads_in_plain_digits(text, plain):
    assert plain_number(text) == plain


def test_nesting_counts_every_bracket_kind_and_ignores_unbalanced_closers():
    assert nesting("{[(x)]}") == 3
    assert nesting(")))((") == 2
    assert nesting("") == 0


def test_any_text_is_read_quickly_and_never_raises():
    alphabet = list("0123456789^!{}()[]+-*/,. x_$;") + ["\\frac", "\\binom", "\\left(", "\\right)", "**", "\\cdot", "99999"]
    alphabet += ["\\sum_", "\\Gamma", "\\text{", " or ", "\\\\", "\\begin{a}", "\\end{a}", "e-", "\\,"]
    generator = random.Random(0)
    texts = ["".join(generator.choice(alphabet) for _ in range(generator.randint(0, 300))) for _ in range(3000)]
    texts += ["{" * 100_000 + "}" * 100_000, "2^" * 5000 + "2", "!" * 5000, "\\binom" * 1000, "\\sum^" * 1000]
    for text in texts:
        start = time.perf_counter()
        refusal(text)
        plain_number(text)
        assert time.perf_counter() - start < 0.5, text[:80]
