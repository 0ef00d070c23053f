"""The math reward on a table of answer/gold pairs: what each answer states, read by gdpo_verl/rewards/answers.py
through the real checker processes, and the verdict it gets (docs/math-length.md, "What an answer states").

Each row: the boxes of the final answer (one string: one box), the gold, and the outcome:
    correct   correct 1                 (the answer states the gold's values, no more, no fewer)
    hedged    correct 0, hedged 1       (more distinct values than the gold: never credited, whichever is right)
    wrong     correct 0, hedged 0, verify_failed 0
    unread    correct 0, verify_failed 1 (something in a box the reader cannot place: never credited, never
              called wrong)
"""

from __future__ import annotations

import pytest

from gdpo_verl.rewards.math_length import MathLengthReward

HEDGES = [  # gold 5 unless given; at least 20 spellings of "several values"
    ("7 \\\\ 5", "5", "hedged"),
    ("5 \\\\ 7", "5", "hedged"),
    ("7 \\\\[2pt] 5", "5", "hedged"),
    ("5\\newline 7", "5", "hedged"),
    ("5 \\cr 7", "5", "hedged"),
    ("x=7 \\land x=5", "5", "hedged"),
    ("7 \\lor 5", "5", "hedged"),
    ("x = 7 \\vee x = 5", "5", "hedged"),
    ("5 \\lor 7 \\lor 9", "5", "hedged"),
    ("7 \\to 5", "5", "hedged"),
    ("7 \\Rightarrow 5", "5", "hedged"),
    ("7 \\text{ or } 5", "5", "hedged"),
    ("5 \\text{ or } 7", "5", "hedged"),
    ("5 or 7", "5", "hedged"),
    ("5 \\text{ and } 7", "5", "hedged"),
    ("x=5 \\text{ or } x=7", "5", "hedged"),
    ("5 \\text{ or possibly } 7", "5", "hedged"),
    ("5 \\text{ unless } 7", "5", "unread"),  # words that change the value
    ("x=5; x=7", "5", "hedged"),
    ("7 \\quad 5", "5", "hedged"),
    ("7 5", "5", "hedged"),
    ("7$ $5", "5", "hedged"),
    ("5, 7", "5", "hedged"),
    ("\\{5, 7\\}", "5", "hedged"),
    ("x \\in \\{5, 7\\}", "5", "hedged"),
    ("\\pm 5", "5", "hedged"),
    ("\\frac{10}{2} \\text{ or } 7", "5", "hedged"),
    ("x = 5 \\text{ and } y = 7", "5", "wrong"),  # one point, (x, y) = (5, 7): not 5
    ("(C) or (D)", "C", "hedged"),
    ("\\textbf{(C)}\\ 5 \\text{ or } \\textbf{(D)}\\ 7", "C", "hedged"),
    ("\\text{A}$ $\\text{B}", "\\text{B}", "hedged"),
    ("{7 \\\\ 5}", "5", "unread"),
    ("\\begin{cases} 7 \\\\ 5 \\end{cases}", "5", "unread"),
    ("5 \\text{ (or 7)}", "5", "unread"),
    ("5 \\text{, maybe 7}", "5", "unread"),
    ("5 % 7", "7", "wrong"),  # 5% of 7: one value, not 7
    ("2, 3, 4", "2, 3", "hedged"),
]

SEVERAL_BOXES = [  # the answer's boxes together: written as "box1 | box2"
    ("7 | 5", "5", "hedged"),
    ("5 | 5", "5", "correct"),  # one value, twice
    ("4 | \\frac{8}{2}", "4", "correct"),
    ("2 | 3", "2, 3", "correct"),  # "The solutions are \boxed{2} and \boxed{3}."
    ("3 | 2", "2, 3", "correct"),
    ("2 | 3", "2", "hedged"),
]

LISTS_SETS_INTERVALS_TUPLES = [
    ("x=2 \\text{ or } x=3", "2, 3", "correct"),
    ("2, 3", "2, 3", "correct"),
    ("3, 2", "2, 3", "correct"),
    ("\\{2, 3\\}", "2, 3", "correct"),
    ("x \\in \\{2,3\\}", "2, 3", "correct"),
    ("x = 2, 3", "2, 3", "correct"),
    ("2 \\text{ and } 3", "2, 3", "correct"),
    ("x = 3 \\\\ x = 2", "2, 3", "correct"),
    ("2", "2, 3", "wrong"),
    ("2, 4", "2, 3", "wrong"),
    ("2 \\text{ or } -2", "\\pm 2", "correct"),
    ("\\pm 2", "\\pm 2", "correct"),
    ("-2, 2", "\\pm 2", "correct"),
    ("x = \\pm 2", "\\pm 2", "correct"),
    ("2", "\\pm 2", "wrong"),
    ("1, 2", "\\{1,2\\}", "correct"),
    ("\\{2, 1\\}", "\\{1,2\\}", "correct"),
    ("(1,2)", "(1,2)", "correct"),
    ("\\left(1, 2\\right)", "(1,2)", "correct"),
    ("(2,1)", "(1,2)", "wrong"),
    ("1, 2", "(1,2)", "hedged"),  # two numbers are not a point
    ("(1, 2), (3, 4)", "(1,2), (3,4)", "correct"),
    ("(3, 4), (1, 2)", "(1,2), (3,4)", "correct"),
    ("(1, 2)", "(1,2), (3,4)", "wrong"),
    ("x \\geq 3", "[3,\\infty)", "correct"),
    ("3 \\leq x", "[3,\\infty)", "correct"),
    ("[3, \\infty)", "[3,\\infty)", "correct"),
    ("x > 3", "[3,\\infty)", "wrong"),
    ("x<1 \\text{ or } x>2", "(-\\infty,1)\\cup(2,\\infty)", "correct"),
    ("(-\\infty, 1) \\cup (2, \\infty)", "(-\\infty,1)\\cup(2,\\infty)", "correct"),
    ("x<1 \\text{ or } x>3", "(-\\infty,1)\\cup(2,\\infty)", "wrong"),
    ("1 < x < 3", "(1,3)", "correct"),
    ("\\varnothing", "\\emptyset", "correct"),
    ("\\emptyset", "\\varnothing", "correct"),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "correct"),
    ("\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "correct"),
    ("\\begin{pmatrix}1&2\\\\4&3\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "wrong"),
    ("b=2, a=1", "a=1, b=2", "correct"),
    ("a=2, b=1", "a=1, b=2", "wrong"),
]

CHOICES = [
    ("C", "C", "correct"),
    ("(C)", "C", "correct"),
    ("\\text{(C)}", "C", "correct"),
    ("\\textbf{(C)}", "C", "correct"),
    ("\\text{C}", "C", "correct"),
    ("\\textbf{(C)}\\ 5", "C", "correct"),
    ("\\mathrm{(C)}", "C", "correct"),
    ("D", "C", "wrong"),
    ("(D)", "C", "wrong"),
    ("\\textbf{(C)}\\ 5", "5", "correct"),  # AMC: the letter and its value; the gold is the value
    ("(C) 5", "5", "correct"),
    ("\\textbf{(C) } 5", "5", "correct"),
    ("\\textbf{(C)}\\ 6", "5", "wrong"),
    ("B", "\\text{B}", "correct"),
    ("\\text{(B)}", "\\text{B}", "correct"),
    ("5", "C", "wrong"),  # the value cannot stand for a letter the reader does not know
]

PLAIN = [
    ("4", "4", "correct"),
    ("5", "4", "wrong"),
    ("-3", "-3", "correct"),
    ("\\frac{1}{2}", "0.5", "correct"),
    ("0.5", "\\frac{1}{2}", "correct"),
    ("\\dfrac{3}{4}", "0.75", "correct"),
    ("\\sqrt{2}", "\\sqrt{2}", "correct"),
    ("2\\sqrt{3}", "\\sqrt{12}", "correct"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{3}}{2}", "correct"),
    ("\\frac{\\pi}{4}", "\\frac{\\pi}{4}", "correct"),
    ("\\pi", "\\pi", "correct"),
    ("3.14", "\\pi", "wrong"),  # a decimal answers an exact gold within 1e-6 only
    ("\\pi", "3.14", "correct"),  # the gold's own rounding: 3.14 is pi to two places
    ("\\sqrt{2}", "1.414214", "correct"),
    ("1.414", "\\sqrt{2}", "wrong"),
    ("\\frac{1}{3}", "0.33", "correct"),
    ("\\frac{1}{3}", "0.34", "wrong"),
    ("0.3333", "\\frac{1}{3}", "wrong"),
    ("0.0000001", "0.0000001", "correct"),
    ("0.0000004", "0.0000001", "wrong"),  # 4x the gold: not equal to it
    ("0.0000001", "0", "wrong"),
    ("3.0", "3", "correct"),
    ("3", "3.4", "wrong"),
    ("10^{16}", "1e16", "correct"),
    ("1\\,000\\,000", "1000000", "correct"),
    ("1{,}000", "1000", "correct"),
    ("2^{2^{11}}", "2^{2048}", "correct"),
    ("2^{2048} + 1", "2^{2048}", "wrong"),
    ("\\log_2 8", "3", "correct"),
    ("x^2+1", "1+x^2", "correct"),
    ("x^2-1", "(x-1)(x+1)", "correct"),
    ("x^2+2", "1+x^2", "wrong"),
    ("x=4", "4", "correct"),
    ("k = 7", "7", "correct"),
    ("5 \\text{ cm}", "5", "correct"),
    ("\\$5", "5", "correct"),
    ("5 \\text{ dollars}", "5", "correct"),
    ("90^\\circ", "90", "correct"),
    ("5\\%", "5\\%", "correct"),
    ("\\infty", "\\infty", "correct"),
    ("-\\infty", "\\infty", "wrong"),
    ("\\text{yes}", "\\text{Yes}", "correct"),
    ("\\text{no}", "\\text{Yes}", "wrong"),
    ("2+3i", "2+3i", "correct"),
    ("\\boxed{5}", "5", "correct"),  # a box in a box
    ("\\langle 1, 2 \\rangle", "(1,2)", "unread"),  # vectors: the parser has no reading for them
    ("0.\\overline{3}", "\\frac{1}{3}", "unread"),
    ("5 \\hspace{1em} 7", "5", "unread"),
]

FROM_REVIEW = [  # an independent adversarial pass on the reader: each row was scored otherwise before its fix
    # hedges credited
    ("7, \\boxed{5}", "5", "hedged"),  # a box inside a box is read in place, with what surrounds it
    ("\\{7, 9, \\boxed{5}\\}", "5", "hedged"),
    ("\\text{either seven or } \\boxed{5}", "5", "hedged"),
    ("7,\\fbox{5}", "5", "hedged"),
    ("7 \\neq \\boxed{5}", "5", "unread"),
    ("5 \\text{ or seven}", "5", "hedged"),  # words after a connective are a value of their own
    ("5 \\text{ or negative five}", "5", "hedged"),
    ("5 \\text{ or } \\text{seven}", "5", "hedged"),
    ("\\text{seven or maybe } 5", "5", "hedged"),
    ("2, 3 \\text{ or maybe four}", "2, 3", "hedged"),
    ("\\text{not } 5", "5", "unread"),  # words that change the value
    ("5 \\text{ at most}", "5", "unread"),
    ("5 \\text{ hours}", "5 \\text{ minutes}", "wrong"),  # units, when both have one, compare
    ("5 \\text{ minutes}", "5 \\text{ minute}", "correct"),
    ("5_{\\text{(or 7)}}", "5", "unread"),  # a subscript on a number
    ("5_{7, 9}", "5", "unread"),
    ("1011_2", "1011_2", "correct"),  # a number in base 2, as written
    ("1011_{2}", "1011_2", "correct"),
    ("11", "1011_2", "wrong"),
    ("(C) or D", "C", "hedged"),  # a second letter after a choice
    ("(C) D", "C", "hedged"),
    ("(C) \\lor D", "C", "hedged"),
    ("7 = 5", "5", "unread"),  # an equation between numbers that does not hold
    ("x = 7 = 5", "5", "unread"),
    ("7 \\equiv 5", "5", "unread"),
    ("2+3 = 5 = 7", "7", "unread"),
    ("2+3 = 5", "5", "correct"),
    ("x = 2 + 3 = 5", "5", "correct"),
    ("1000000.5", "1000000", "wrong"),  # a decimal states its value to half a unit of its last place
    ("1000000.5", "1000001", "wrong"),
    ("123456700.0", "123456789", "wrong"),
    ("1.234567 \\times 10^{8}", "123456789", "wrong"),
    ("2.55", "2.5", "wrong"),  # rounds to 2.6 at the gold's places
    ("2.55", "2.6", "correct"),
    ("0.54", "0.5", "correct"),  # rounds to the gold at its places
    ("x^\u00b2+1", "x^2+1", "unread"),  # a superscript digit: before, an exception out of the reward
    ("\u2460", "1", "unread"),
    # correct answers scored 0
    ("5 \\text{ cm}^2", "5", "correct"),  # the exponent is the unit's
    ("6", "6\\text{ cm}^2", "correct"),
    ("4\\pi \\text{ cm}^2", "4\\pi", "correct"),
    ("5\\ \\text{cm}", "5", "correct"),
    ("5~\\text{cm}", "5", "correct"),
    ("\\text{Area} = 5", "5", "correct"),  # a label
    ("\\text{Answer: } 5", "5", "correct"),
    ("\\mathrm{P} = \\frac12", "\\frac{1}{2}", "correct"),
    ("\\frac{1 \\pm \\sqrt{5}}{2}", "\\frac{1 \\pm \\sqrt{5}}{2}", "correct"),  # \\pm anywhere: two readings
    ("\\frac{1 + \\sqrt{5}}{2}, \\frac{1 - \\sqrt{5}}{2}", "\\frac{1 \\pm \\sqrt{5}}{2}", "correct"),
    ("x = \\frac{-3 \\pm \\sqrt5}{2}", "\\frac{-3 \\pm \\sqrt{5}}{2}", "correct"),
    ("\\frac{1 + \\sqrt{5}}{2}", "\\frac{1 \\pm \\sqrt{5}}{2}", "wrong"),
    ("\\textbf{5}", "5", "correct"),
    ("\\mathbf{5}", "5", "correct"),
    ("5.", "5", "correct"),  # trailing punctuation
    ("\\frac12.", "\\frac{1}{2}", "correct"),
    ("x = 5.", "5", "correct"),
    ("60\u00b0", "60", "correct"),
    ("\\left. 5 \\right.", "5", "correct"),
    ("\\[5\\]", "5", "correct"),
    ("60 \\text{ km/h}", "60", "correct"),
    ("y = 2x - 1", "2x-y-1=0", "correct"),  # an equation whose side has unknowns stays an equation
    ("2x - y + 3 = 0", "y=2x+3", "correct"),
    ("x = 2x + 3", "y=2x+3", "wrong"),
    ("x > 1 \\text{ and } x < 3", "(1,3)", "correct"),  # "and" and "," join conditions
    ("x>1, x<3", "(1,3)", "correct"),
    ("x > 1 \\text{ and } x < 3", "(-\\infty,\\infty)", "wrong"),
    ("20\\%", "20", "correct"),  # a percent answers the number and its hundredth
    ("20", "20\\%", "correct"),
    ("0.2", "20\\%", "correct"),
    ("5", "\\textbf{(C)}\\ 5", "correct"),  # a letter with its value, answered by the value
    ("x = 1, y = 2", "(1,2)", "correct"),  # labelled coordinates: one point
    ("y = 2, x = 1", "(1,2)", "correct"),
    ("a=1 \\text{ and } b=2", "(1,2)", "correct"),
    ("a = 1, b = 2, c = 3", "(1,2,3)", "correct"),
    ("1 000 000", "1000000", "correct"),
]

TABLE = HEDGES + SEVERAL_BOXES + LISTS_SETS_INTERVALS_TUPLES + CHOICES + PLAIN + FROM_REVIEW
OUTCOMES = {"correct": (1.0, 0.0, 0.0), "hedged": (0.0, 1.0, 0.0), "wrong": (0.0, 0.0, 0.0), "unread": (0.0, 0.0, 1.0)}
REWARD = MathLengthReward()


@pytest.fixture(scope="module", autouse=True)
def _stop_the_checker_processes():
    REWARD.start()  # started, as a training run's reward is by its first batch
    yield
    REWARD.close()


def response(boxes: str) -> str:
    return "</think> The answer is " + " and ".join(f"\\boxed{{{box.strip()}}}" for box in boxes.split(" | "))


def test_the_table_is_large_and_covers_hedges_in_many_spellings():
    assert len(TABLE) >= 120
    assert sum(outcome in ("hedged", "unread") for _, _, outcome in HEDGES) >= 20


@pytest.mark.parametrize(("boxes", "gold", "outcome"), TABLE, ids=[f"{g}<-{b}" for b, g, _ in TABLE])
def test_each_answer_gets_the_verdict_of_what_it_states(boxes, gold, outcome):
    result = REWARD("math", response(boxes), gold, {"response_length": 10}, timeout_s=10.0)
    assert (result["correct"], result["hedged"], result["verify_failed"]) == OUTCOMES[outcome]
