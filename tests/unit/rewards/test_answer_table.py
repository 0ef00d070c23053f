"""The math reward on a table of answer/gold pairs: what each answer states, read by gdpo_verl/answers/parsing.py
through the real checker processes, and the verdict it gets (docs/math-length.md, "What an answer states").

Each row: the boxes of the final answer (one string: one box), the gold, and the outcome:
    correct   correct 1                 (the answer states the gold's values, no more, no fewer)
    hedged    correct 0, hedged 1       (more distinct values than the gold: never credited, whichever is right)
    wrong     correct 0, hedged 0, verify_failed 0
    unread    correct 0, verify_failed 1 (something in a box the reader cannot place: never credited, never
              called wrong)
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from gdpo_verl.answers import Unreadable, lexicon, parse
from tests.unit.rewards.math_reward import REWARD

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
    ("5 \\text{ or possibly } 7", "5", "unread"),  # "possibly 7": words inside a value
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
    ("\\textbf{(C)}\\ 5 \\text{ or } \\textbf{(D)}\\ 7", "C", "unread"),  # letters with values between
    ("\\text{A}$ $\\text{B}", "\\text{B}", "hedged"),
    ("{7 \\\\ 5}", "5", "unread"),
    ("\\begin{cases} 7 \\\\ 5 \\end{cases}", "5", "unread"),
    ("5 \\text{ (or 7)}", "5", "unread"),
    ("5 \\text{, maybe 7}", "5", "unread"),
    ("5 % 7", "7", "unread"),  # in LaTeX, % starts a comment: what follows it is not read
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
    ("\\{7, 9, \\boxed{5}\\}", "5", "unread"),  # a set holding {5}
    ("\\text{either seven or } \\boxed{5}", "5", "unread"),  # a number in words
    ("7,\\fbox{5}", "5", "hedged"),
    ("7 \\neq \\boxed{5}", "5", "unread"),
    ("5 \\text{ or seven}", "5", "unread"),  # words after a connective: a value of their own, in words: not read
    ("5 \\text{ or negative five}", "5", "unread"),
    ("5 \\text{ or } \\text{seven}", "5", "unread"),
    ("5 \\text{ or } \\text{neither}", "5", "hedged"),
    ("\\text{seven or maybe } 5", "5", "unread"),
    ("2, 3 \\text{ or maybe four}", "2, 3", "unread"),
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
    ("x = 2x + 3", "y=2x+3", "unread"),  # an equation to solve, not a value
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

MEANING = [  # what a value means, read fail-closed: each class of hostile answers, and correct forms in it
    # words after a value are a unit only when they are one; words before it a label only when they are one
    ("5 \\text{ thousands}", "5", "unread"),
    ("5 \\text{ is wrong}", "5", "unread"),
    ("5 \\text{ percent}", "5", "unread"),
    ("5 \\text{ squared}", "5", "unread"),
    ("5 \\mathrm{~times}", "5", "unread"),
    ("\\text{Wrong:} 5", "5", "unread"),
    ("\\text{Incorrect answer:} 5", "5", "unread"),
    ("\\text{Not} = 5", "5", "unread"),
    ("\\text{Total} = 5", "5", "correct"),
    ("5 \\text{ apples}", "5", "correct"),
    ("5 \\text{ square units}", "5", "correct"),
    ("5 \\mathrm{~cm}", "5", "correct"),
    ("5 \\mathrm{\\,cm}", "5", "correct"),
    # an equation is read as unknown = value (or, as a value of its own, a line or a curve)
    ("y + 7 = 5", "5", "unread"),
    ("7y = 5", "5", "unread"),
    ("|x| = 5", "5", "unread"),
    ("x^2 = 25", "5", "unread"),
    ("\\sqrt{x} = 5", "25", "unread"),
    ("2x = 10", "5", "unread"),
    ("x + y = 5", "5", "wrong"),  # a relation between unknowns: a value of its own, not 5
    ("x = \\frac{10}{2}", "5", "correct"),
    ("a_n = 2n + 1", "2n+1", "correct"),  # an equation naming a value answers the value
    ("2x - 1", "y = 2x - 1", "correct"),
    ("y = 5 + z", "5", "wrong"),
    # approximation, congruence and modular signs are read for what they state
    ("5 \\approx 7", "5", "unread"),
    ("7 \\approx 5", "5", "unread"),
    ("5 \\simeq 7", "5", "unread"),
    ("5 \u2248 7", "5", "unread"),
    ("\\frac{1}{3} \\approx 0.5", "\\frac{1}{3}", "unread"),
    ("\\pi \\approx 3.14", "\\pi", "correct"),
    ("\\pi \\approx 3.14", "3.14", "correct"),
    ("x \\approx 3.14", "3.14", "correct"),
    ("\\frac{1}{3} \\approx 0.33", "\\frac{1}{3}", "correct"),
    ("x \\approx 3.14", "\\pi", "wrong"),  # a decimal of three digits answers no exact gold
    ("5 \\pmod{7}", "5", "correct"),
    ("5 \\pmod 7", "5", "correct"),
    ("x \\equiv 5 \\pmod{7}", "5", "correct"),
    ("12 \\pmod{7}", "5", "unread"),  # not a residue from 0 to 6
    ("x \\equiv 5", "5", "unread"),
    ("5 \\pmod{8}", "5 \\pmod{7}", "wrong"),
    ("7 \\bmod 5", "2", "unread"),
    # the percent rule scales from the side with the sign only
    ("0.2\\%", "20\\%", "wrong"),
    ("2000\\%", "20\\%", "wrong"),
    ("20\\%", "20\\%", "correct"),
    ("20%", "20", "correct"),
    ("0.2\\%", "0.2", "correct"),
    # a subscript only on a letter; a box with an optional argument; commands the parser would drop or misread
    ("5^{1}_{7}", "5", "unread"),
    ("5_{7}^{1}", "5", "unread"),
    ("(5)_{7}", "5", "unread"),
    ("\\boxed[7]{5}", "5", "unread"),
    ("\\framebox[2cm]{5}", "5", "unread"),
    ("5 \\phantom{7}", "5", "unread"),
    ("5 \\hphantom{7}", "5", "unread"),
    ("5 \\color{red}{7}", "5", "unread"),
    ("\\cancel{7} 5", "5", "unread"),
    ("\\overset{7}{5}", "5", "unread"),
    ("\\underbrace{5}_{7}", "5", "unread"),
    ("\\not 7", "7", "unread"),
    ("(5 \\text{ or } 7)", "5", "unread"),  # the parser would read the interval (5, 7)
    ("5 \\leftarrow 7", "5", "hedged"),  # an arrow lists values (the parser lexed \\le ftarrow)
    ("x \\Leftarrow 5", "5", "hedged"),
    ("5\u200b7", "57", "unread"),  # a zero-width space
    ("\u22125", "-5", "correct"),  # a minus sign
    ("5 \u2228 7", "5", "hedged"),
    # unions of singletons are sets; a matrix of one column or row is a tuple
    ("\\{5\\}\\cup\\{7\\}", "\\{5, 7\\}", "correct"),
    ("\\{2\\} \\cup \\{3\\}", "2, 3", "correct"),
    ("\\{5\\}\\cup\\{7\\}", "5", "hedged"),
    ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)", "correct"),
    ("\\begin{bmatrix}1 & 2\\end{bmatrix}", "(1,2)", "correct"),
    ("\\begin{pmatrix}2\\\\1\\end{pmatrix}", "(1,2)", "wrong"),
    ("\\begin{pmatrix}1\\\\2\\\\3\\end{pmatrix}", "(1,2,3)", "correct"),
    # spaces and commas inside numbers: a thin space or a comma between groups of three join them
    ("1\u2009000", "1000", "correct"),
    ("1\u202f000\u202f000", "1000000", "correct"),
    ("1,000", "1000", "correct"),
    ("12,345,678", "12345678", "correct"),
    ("1,000, 7", {"all_of": ["1000", "7"]}, "correct"),
    ("1,000, 7", "1000, 7", "correct"),
    ("1, 000", "1000", "hedged"),  # a comma and a space list values: 1 and 0
    ("(100,200)", "(100, 200)", "correct"),  # inside brackets a comma separates
    # every alternative of a list gold is tried
    ("2, -2", ["2", "2, -2"], "correct"),
    ("2, -2", ["2, -2", "2"], "correct"),
    ("2, 3", ["2", "3"], "hedged"),
]

SECOND_PASS = [  # an independent adversarial pass on the fail-closed reader: each row scored otherwise before its fix
    # a choice letter, then something that lists: the letter and the values after it
    ("(C) \\text{ or } 7", "C", "hedged"),
    ("(C) or 7", "7", "hedged"),
    ("(C); 7", "C", "hedged"),
    ("\\textbf{(C)} \\\\ 7", "C", "hedged"),
    ("(C) \\Rightarrow 7", "7", "hedged"),
    ("\\text{C} \\text{ or } 7", "C", "hedged"),
    ("\\textbf{(A)}\\ \\text{and}\\ \\sqrt{2}", "\\sqrt{2}", "hedged"),
    ("(C) $ $ 4", "C", "hedged"),
    # equations about different unknowns: a point only when commas or "and" join them
    ("x = 5 \\text{ or } y = 7", "(5, 7)", "hedged"),
    ("a = 1 \\lor b = 2", "(1, 2)", "hedged"),
    ("x = 2 \\Rightarrow y = 3", "(2, 3)", "unread"),
    ("x = 1 \\\\ y = 2", "(1, 2)", "unread"),
    # a percent sign on a number alone, its places kept
    ("0.2, 30\\%", "20, 30", "unread"),
    ("\\{0.2, 30\\%\\}", "20, 30", "unread"),
    ("0.2 + 0\\%", "20", "unread"),
    ("5 + 5\\%", "505", "unread"),
    ("14.2857\\%", "\\frac{100}{7}", "correct"),
    ("33.33\\%", "33.3\\%", "correct"),
    ("33.3\\%", "33.33\\%", "wrong"),
    # a unit: its power is 2 or 3; its words a measure, a power, "per", or one counted noun; compared by meaning
    ("5 \\text{ m}^{or 7}", "5", "unread"),
    ("5 \\text{ cm}^{2, 7}", "5", "unread"),
    ("5 \\text{ cm}^{\\phantom 7}", "5", "unread"),
    ("5 \\text{ cm}^{2}", "5", "correct"),
    ("5 \\text{ per cent}", "5", "unread"),
    ("5 \\text{ M}", "5", "unread"),
    ("5 \\text{ G}", "5", "unread"),
    ("5 \\text{ square root}", "5", "unread"),
    ("8 \\text{ cube root}", "8", "unread"),
    ("5 \\text{ hrs}", "5 \\text{ hours}", "correct"),
    ("5 \\text{ ft}", "5 \\text{ feet}", "correct"),
    ("5 \\text{ sq cm}", "5 \\text{ cm}^2", "correct"),
    ("60 \\text{ kph}", "60 \\text{ km/h}", "correct"),
    ("5 \\text{ cm}", "5 \\text{ m}", "wrong"),
    # two numbers side by side, which the parser would add or multiply
    ("3\\medspace 4", "7", "unread"),
    ("{3}\\ 4", "7", "unread"),
    ("(3)\\ 4", "7", "unread"),
    ("\\$5 \\$7", "12", "unread"),
    ("\\frac{3}{1}\\ \\frac{4}{1}", "7", "unread"),
    ("7\\ \\boxed{5}", "12", "unread"),
    ("{3}4", "7", "unread"),
    (".3 .4", "0.12", "unread"),
    ("3\\frac{1}{2}", "3.5", "correct"),  # a mixed number stays one
    # a set of sets is no list of values
    ("\\{\\{4\\}\\}", "4", "unread"),
    ("\\{\\emptyset\\}", "\\emptyset", "unread"),
    ("\\{\\{1, 2\\}, \\{3\\}\\}", "1, 2, 3", "unread"),
    # inequalities listed apart are several values; "and" beside "or" is not read
    ("x \\geq 3 \\\\ x \\geq 1", "[3, \\infty)", "hedged"),
    ("x \\geq 3; x \\geq 1", "[3, \\infty)", "hedged"),
    ("x > 1 \\text{ and } x < 3 \\text{ or } x > 5", "\\emptyset", "unread"),
    # values written with another letter or unit are other values
    ("(C) | (C)\\ 7", "\\textbf{(C)}\\ 5", "hedged"),
    ("5 | 5 \\text{ cm}", "5 \\text{ m}", "hedged"),
    # characters the parser drops or misreads; colour arguments; several \pm
    ("7'", "7", "unread"),
    ("5'7''", "57", "unread"),
    ("\\frac 123", "\\frac{1}{23}", "unread"),
    ("\\frac12", "\\frac{1}{2}", "correct"),
    ("4\x00", "4", "unread"),
    ("\\colorbox{or 9}{4}", "4", "unread"),
    ("\\fcolorbox{7}{or 9}{5}", "5", "unread"),
    ("\\colorbox{yellow}{5}", "5", "correct"),
    ("\\pm 2 \\pm 3", "\\pm 5", "unread"),
    # correct forms
    ("x \\in \\{5\\} \\cup \\{7\\}", "5, 7", "correct"),
    ("0{,}5", "0.5", "correct"),
    ("3{,}14", "3.14", "correct"),
    ("\\textbf{x = 5}", "5", "correct"),
    ("\\text{5 cm}", "5", "unread"),  # words and numbers in one text (before: 5 * c * m, wrong)
    ("\\text{five}", "5", "unread"),
    ("(x, y) = (1, 2)", "(1, 2)", "unread"),  # before: wrong
    ("x_1 = 2, x_2 = 3", "2, 3", "unread"),  # the roots, or a point? (before: a point, wrong)
]

THIRD_PASS = [  # a further independent adversarial pass on the fail-closed reader: each row scored otherwise before
    # choice letters with a value between them
    ("(C) \\text{ or } 7 \\text{ or } (C)", "C", "unread"),
    ("(C)\\ 7 \\text{ or } (C)", "\\textbf{(C)}\\ 5", "unread"),
    ("(C) \\to 7 \\to (C)", "C", "unread"),
    ("\\textbf{(C)}\\ 5 \\textbf{(C)}", "\\textbf{(C)}\\ 7", "unread"),
    ("\\text{Answer: } (C)", "C", "correct"),
    ("\\textit{(C)}", "C", "correct"),
    # "and/or", connectives inside brackets, equations inside a tuple
    ("x = 5 \\text{ and/or } y = 7", "(5, 7)", "unread"),
    ("x = 5 \\text{ and, or } y = 7", "(5, 7)", "unread"),
    ("(x = 5 or y = 7)", "(5, 7)", "unread"),
    ("{a = 1 or b = 2}", "(1, 2)", "unread"),
    ("(5 or 7)", "(5, 7)", "unread"),
    ("[5 and 7]", "[5, 7]", "unread"),
    ("(x = 5, x = 7)", "(5, 7)", "unread"),
    ("x < 1 \\text{ and/or } x > 2", "\\emptyset", "unread"),
    ("x == 5", "5", "unread"),
    # a percent sign is written otherwise than the number: two values
    ("20\\% | 0.2 | 20", "20", "hedged"),
    ("20\\% \\text{ or } 20 \\text{ or } 0.2", "0.2", "hedged"),
    ("5\\% | 5 | 0.05", "0.05", "hedged"),
    # a dollar or a degree sign is a unit; a degree sign inside a value is not read
    ("5 \\text{ radians}", "5^\\circ", "wrong"),
    ("5 \\text{ cents}", "\\$5", "wrong"),
    ("90^\\circ", "90", "correct"),
    ("90^{\\circ}", "90^\\circ", "correct"),
    ("\\$5", "5 \\text{ dollars}", "correct"),
    ("\\sin 30^\\circ", "\\frac{1}{2}", "unread"),
    ("5 \\text{ m}^3_{7}", "5_7", "unread"),
    # numeric atoms side by side: a product, a sum, or two values?
    ("(2)(3)", "5", "unread"),
    ("2(3)", "5", "unread"),
    ("-2(3)", "-5", "unread"),
    ("5{7}", "12", "unread"),
    ("[5][7]", "12", "unread"),
    ("5^\\circ 7", "12", "unread"),
    ("\\frac{1}{2}3", "\\frac{3}{2}", "unread"),
    ("4(\\frac{1}{2})", "\\frac{9}{2}", "unread"),
    ("(3)\\frac{1}{2}", "\\frac{7}{2}", "unread"),
    ("5\\$7", "57", "unread"),
    (".5.7", "0.35", "unread"),
    ("5{,}7{,}9", "5.13", "unread"),
    ("|5| 7", "35", "unread"),
    ("5! 7", "840", "unread"),
    ("\\lfloor 5 \\rfloor 7", "35", "unread"),
    ("\\frac{5}{1}{7}", "5", "unread"),
    ("2(x+1)", "2x+2", "correct"),  # with a letter: a product, as the parser reads it
    ("\\sqrt{2}\\sqrt{3}", "\\sqrt{6}", "correct"),
    ("\\log_{2} 8", "3", "correct"),  # a function applies to what follows
    ("\\sin^{2} 3", "\\sin^{2} 3", "correct"),
    # sets holding sets, however written
    ("\\{[4,4]\\}", "4", "unread"),
    ("\\{[4,7]\\}", "[4, 7]", "unread"),
    ("\\{5\\} \\cup \\{7\\} \\cup \\{9\\}", "5, 7, 9", "correct"),
    ("5, 7, 9", "\\{5\\} \\cup \\{7\\} \\cup \\{9\\}", "correct"),
    # thousands as MATH writes them
    ("10,\\!000", "10000", "correct"),
    ("10000", "10,\\!000", "correct"),
    ("\\$32,\\!348", "32348", "correct"),
    ("1,\\!000,\\!000", "1000000", "correct"),
    ("1\u2007000", "1000", "correct"),
]

FOURTH_PASS = [  # a fourth independent adversarial pass on the fail-closed reader: each row scored otherwise before
    # a unit ends its value
    ("5\\text{m}7", "57", "unread"),
    ("3\\text{ ft }6", "36", "unread"),
    ("2\\text{ dollars }50", "250", "unread"),
    ("5\\text{ cm}.7", "5.7", "unread"),
    ("-5\\text{ cm}-7", "-12", "unread"),
    ("(C)\\ 5 \\text{ cm}", "C", "correct"),
    # plus and minus typed as two signs
    ("5 +- 2", "3", "unread"),
    ("5 -+ 2", "3", "unread"),
    # an inequality whose solutions are a few points states each of them
    ("(x-5)^2(x-7)^2 \\le 0", "(5, 7)", "hedged"),
    ("(x-5)^2(x-7)^2 \\le 0", "5", "hedged"),
    ("(x-5)^2(x-7)^2 \\le 0", "5, 7", "correct"),
    # a solution set is no point; tuples and intervals compare entry by entry, by the rules for numbers
    ("5 < x < 7", "x = 5, y = 7", "wrong"),
    ("(0.0000004, 1)", "(0.0000001, 1)", "wrong"),
    ("(1, 2]", "[1,2]", "wrong"),
    # a float gold that is a whole number is that number
    ("11.96", 12.0, "wrong"),
    ("12", 12.0, "correct"),
    # digit groups: not inside an exponent, not after a comma and a wide space
    ("2^2\\,000", "2^{2000}", "unread"),
    ("2,\\;500", "2500", "hedged"),
    # numbers side by side: refused where the parser adds, kept where it multiplies as a reader does
    ("3\\frac{6}{2}", "6", "unread"),
    ("\\vert 5 \\vert 7", "35", "unread"),
    ("2(\\sqrt{2}+1)", "2\\sqrt{2}+2", "correct"),
    ("2\\sqrt{2}+2", "2(\\sqrt{2}+1)", "correct"),
    ("\\frac{\\sqrt{5}-1}{2}", "\\frac{1}{2}(\\sqrt{5}-1)", "correct"),
    ("4(2-\\sqrt{3})", "8-4\\sqrt{3}", "correct"),
    ("(1+2)(3+4)", "21", "correct"),
    # an exact answer whose decimal expansion ends answers a decimal gold only when equal to it
    ("\\frac{1}{4}", "0.3", "wrong"),
    ("\\frac{13}{40}", "0.3", "wrong"),
    ("\\frac{3}{10}", "0.3", "correct"),
]

EXACT_VALUES = [  # values compared exactly, one comparison for every shape: each row was scored otherwise before
    # a decimal is the rational it writes: no float tolerance anywhere
    ("5.0 + 10^{-13}", "5", "wrong"),
    ("10^{12} + 0.5", "10^{12}", "wrong"),
    ("1.0000000000001", "1", "wrong"),
    ("5.0", "5", "correct"),
    ("1.5 \\times 10^{3}", "1500", "correct"),
    ("1.5 \\times 10^{3}", "1501", "wrong"),
    # containers: no six-place rounding; a rounded gold's tolerance inside every container alike
    ("\\begin{pmatrix}0.0000004\\end{pmatrix}", "\\begin{pmatrix}0.0000001\\end{pmatrix}", "wrong"),
    ("\\begin{pmatrix}\\frac{1}{3} & \\frac{1}{2}\\end{pmatrix}", "\\begin{pmatrix}0.33 & 0.5\\end{pmatrix}",
     "correct"),
    ("\\begin{pmatrix}\\frac{1}{3} & \\frac{1}{2}\\end{pmatrix}", "\\begin{pmatrix}0.34 & 0.5\\end{pmatrix}", "wrong"),
    ("(\\frac{1}{3}, \\frac{1}{2})", "(0.33, 0.5)", "correct"),
    ("(-\\frac{1}{3}, \\frac{1}{2})", "(-0.33, 0.5)", "correct"),
    ("[\\frac{1}{3}, 1]", "[0.33, 1]", "correct"),
    ("(0.0000001, 2)", "(0.0000004, 2)", "wrong"),
    # equations: the same equation, by a nonzero multiple; no rounding
    ("x + y = 5.0000001", "x + y = 5", "wrong"),
    ("2x + 2y = 10", "x + y = 5", "correct"),
    ("2x - y + 3 = 0", "y = 2x + 3", "correct"),
    ("x + y = 6", "x + y = 5", "wrong"),
    # degrees against radians, converted exactly; a degree sign is no unit to drop against a radian gold
    ("\\pi^\\circ", "\\pi", "wrong"),
    ("30^\\circ", "\\frac{\\pi}{6}", "correct"),
    ("\\frac{\\pi}{6}", "30^\\circ", "correct"),
    ("60^\\circ", "\\frac{\\pi}{6}", "wrong"),
    ("30^\\circ", "30", "correct"),
    ("30", "30^\\circ", "correct"),
    # a word is a word, with or without \\text{}: no anagram of it
    ("on", "no", "wrong"),
    ("no", "no", "correct"),
    ("no", "\\text{no}", "correct"),
    ("\\text{on}", "no", "wrong"),
    # what sympy would evaluate into something else is not read
    ("3!!", "720", "unread"),
    ("3!!", "3", "unread"),
    ("(3!)!", "720", "correct"),
    ("\\infty^0", "1", "unread"),
    ("\\infty - \\infty", "0", "unread"),
    ("0^0", "1", "unread"),
    ("\\frac{1}{0}", "1", "unread"),
]

GRADER_FORMS = [  # forms a grader accepts: each row was scored wrong or not read before
    # the imaginary unit, whatever the spacing
    ("2 i", "2i", "correct"),
    ("0.6 + 0.8i", "\\frac35+\\frac45 i", "correct"),
    ("e^{i\\pi}", "-1", "correct"),
    ("\\sqrt{-1}", "i", "correct"),
    ("4i + 3", "3 + 4i", "correct"),
    ("3 - 4i", "3 + 4i", "wrong"),
    ("-i", "i", "wrong"),
    # a choice letter in any dress that states one letter
    ("{C}", "C", "correct"),
    ("\\text{C.}", "C", "correct"),
    ("\\text{Answer: } C", "C", "correct"),
    ("\\text{Option B}", "B", "correct"),
    ("\\text{The answer is } (C)", "C", "correct"),
    ("\\text{Option B}", "C", "wrong"),
    ("\\text{Option B or C}", "B", "hedged"),
    # a fraction's arguments as TeX reads them without braces
    ("\\frac 1 2", "\\frac{1}{2}", "correct"),
    ("\\dfrac 3 4", "0.75", "correct"),
    ("\\frac\\pi 6", "\\frac{\\pi}{6}", "correct"),
    ("\\frac 123", "6", "unread"),
    # a number in a base is its value; a gold in a base asks for that base
    ("101_2", "5", "correct"),
    ("12_{3}", "5", "correct"),
    ("110_2", "5", "wrong"),
    ("5", "101_2", "wrong"),
    ("101_2", "101_2", "correct"),
]

SIXTH_PASS = [  # an independent adversarial pass on the exact comparison (1,107 answers): each row scored otherwise
    # before its fix
    # no tolerance for irrational or complex numbers, and none beyond 80 digits
    ("\\sqrt{2} + 10^{-45}", "\\sqrt{2}", "wrong"),
    ("\\pi + \\frac{1}{10^{50}}", "\\pi", "wrong"),
    ("\\frac{\\pi}{10^{50}}", "0", "wrong"),
    ("10^{60} + 10^{15}\\pi", "10^{60}", "wrong"),
    ("1 + 10^{-50} i", "1", "wrong"),
    ("1 + (1+10^{-45})i", "1 + i", "wrong"),
    ("(1, \\sqrt{2}+10^{-45})", "(1, \\sqrt{2})", "wrong"),
    ("5, 5 + 10^{-50}\\pi", "5", "hedged"),
    ("0." + "9" * 92, "1", "wrong"),
    ("1", "1." + "0" * 89 + "1", "wrong"),
    # what sympy evaluated before the reader saw it: infinity inside an expression, 0^0, a pole, a log's base
    ("e^{-\\infty}", "0", "unread"),
    ("e^{\\infty}", "\\infty", "unread"),
    ("(5, e^{-\\infty})", "(5, 0)", "unread"),
    ("0^{1-1}", "1", "unread"),
    ("(\\pi - \\pi)^0", "1", "unread"),
    ("\\log_0 7 + 5", "5", "unread"),
    ("\\cot 0", "\\infty", "unread"),
    ("\\csc 0", "\\infty", "unread"),
    # an exact entry does not take the places of an equal decimal elsewhere in its container
    ("(1.5, 1.54)", "(1.5, \\frac{3}{2})", "wrong"),
    ("(2.04, 2.0)", "(2, 2.0)", "wrong"),
    ("(1, 1.04)", "(1.0, 1)", "wrong"),
    # a percent sign and a unit do not mix
    ("30\\%", "30^\\circ", "wrong"),
    ("\\$5", "5\\%", "wrong"),
    ("\\$5\\%", "5", "unread"),
    ("\\text{Fri day}", "\\text{Friday}", "wrong"),
    ("\\text{ABC}", "\\text{CBA}", "wrong"),
    # correct forms scored wrong before
    ("\\sqrt[3]{-8}", "-2", "correct"),
    ("x = 1.414214", "\\sqrt{2}", "correct"),
    ("\\textbf{1.49}", "1.5", "correct"),
    ("\\frac{\\pi}{6} \\text{ rad}", "30^\\circ", "correct"),
    ("\\pi + 30^\\circ", "\\frac{7\\pi}{6}", "unread"),
    ("\\text{Answer} = C", "C", "correct"),
    ("\\text{{C}}", "C", "correct"),
    ("\\text{(c)}", "C", "correct"),
    ("FF_{16}", "255", "correct"),
    ("C D", "C", "hedged"),
    ("\\text{Option B, C}", "B", "hedged"),
    ("CD", "C", "wrong"),
    # errors of sympy's own, before: a spacing command at the end, a complex interval
    ("5\\,", "5", "correct"),
    ("\\frac{1}{2}\\,", "0.5", "correct"),
    ("(i, 2)", "(1, 2)", "unread"),
]

SEVENTH_PASS = [  # a second independent pass on the final reader (1,327 answers): each row scored otherwise before
    # its fix
    # the parser reads a capital I as i and drops its scripts, and \Pi as pi
    ("I^2", "i", "unread"),
    ("-I^3", "-i", "unread"),
    ("I", "i", "unread"),
    ("\\Pi", "\\pi", "unread"),
    ("e^{i\\Pi}", "-1", "unread"),
    # infinity inside a group that is no list, tuple or interval
    ("e^{(-\\infty)}", "0", "unread"),
    ("e^{\\left(-\\infty\\right)}", "0", "unread"),
    ("5 + e^{(-\\infty)}", "5", "unread"),
    ("(e^{(-\\infty)}, 1)", "(0, 1)", "unread"),
    ("x > e^{(-\\infty)}", "x > 0", "unread"),
    ("e^{(\\infty)}, 5", "5", "unread"),
    ("(-\\infty, 1) \\cup (2, \\infty)", "(-\\infty,1)\\cup(2,\\infty)", "correct"),
    ("x \\in (-\\infty, 2)", "(-\\infty, 2)", "correct"),
    # scientific notation inside a value: 2000, or 2 * e * 3?
    ("x = 2e3", "6e", "unread"),
    ("(1e5, 2)", "(100000, 2)", "unread"),
    ("1e5", "100000", "correct"),
]

EIGHTH_PASS = [  # a third independent pass on the final reader (1,308 answers): each row scored otherwise before
    # its fix
    # what sympy evaluates away as it builds the expression: seen in the reading built with evaluation off
    ("e^{\\ln 0}", "0", "unread"),
    ("e^{\\ln 0}+5", "5", "unread"),
    ("\\sqrt[\\frac{1}{0}]{3}", "1", "unread"),
    ("\\binom{\\ln 0}{0}", "1", "unread"),
    ("\\sqrt[0^{0}]{7}", "7", "unread"),
    ("(e^{\\ln 0}, 5)", "(0, 5)", "unread"),
    ("0^{i}", "0", "unread"),
    ("\\binom{\\cot 0}{0}", "1", "unread"),
    # the parser's readings a reader does not share
    ("\\Gamma_{7}(5)", "24", "unread"),
    ("2\\binom{4}{2}", "8", "unread"),
    ("2\\binom{4}{2}", "12", "unread"),
    ("\\tan\\frac{\\pi}{2}\\cdot 0", "0", "unread"),
    ("\\sin x \\cdot \\cos x", "\\sin(x\\cos x)", "unread"),
    ("\\log 2 \\cdot 3", "\\log 6", "unread"),
    ("\\sin(x) \\cdot \\cos(x)", "\\frac{\\sin(2x)}{2}", "correct"),
    ("2\\sin x\\cos x", "\\sin(2x)", "correct"),
    ("5^{1}^{2}", "25", "unread"),
    # a value written as going on
    ("3.14159...", "\\pi", "unread"),
    ("0.333...", "\\frac{1}{3}", "unread"),
]

NINTH_PASS = [  # a fourth independent pass on the final reader (1,104 answers): each row scored otherwise before
    # a factor next to a mixed number: the parser multiplies its whole part (2 * 1/2 * pi), a reader adds it
    ("2\\frac{1}{2}\\pi", "\\pi", "unread"),
    ("2\\frac{1}{2}\\pi", "\\frac{5\\pi}{2}", "unread"),
    ("2\\frac{1}{2}x", "x", "unread"),
    ("4\\frac{1}{4}\\sqrt{2}", "\\sqrt{2}", "unread"),
    ("x 2\\frac{1}{2}", "x", "unread"),
    ("2\\frac{1}{2}\\cdot 2", "5", "correct"),
    # an interval closed at infinity holds no real number there
    ("[3,\\infty]", "[3,\\infty)", "unread"),
    ("[-\\infty,\\infty]", "(-\\infty,\\infty)", "unread"),
    ("(3,\\infty]", "x > 3", "unread"),
    # a letter run into a digit: a name or a number in another notation, not a product
    ("0x1F", "0", "unread"),
    ("0b101", "5", "unread"),
    ("e2", "2e", "unread"),
    # complex numbers in polar form, compared by their real and imaginary parts
    ("e^{i\\pi/4}", "\\frac{1+i}{\\sqrt{2}}", "correct"),
    ("\\sqrt{2}e^{i\\pi/4}", "1+i", "correct"),
    ("e^{2\\pi i/3}", "\\frac{-1+i\\sqrt{3}}{2}", "correct"),
    ("\\cos\\frac{\\pi}{4} + i\\sin\\frac{\\pi}{4}", "e^{i\\pi/4}", "correct"),
    ("e^{i\\pi/3}", "\\frac{1+i}{\\sqrt{2}}", "wrong"),
    # arithmetic on matrices (left unevaluated by sympy), a matrix inside a set: not read; a matrix named is read
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}^{-1}", "\\begin{pmatrix}-2&1\\\\\\frac32&-\\frac12\\end{pmatrix}",
     "unread"),
    ("2\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}2&4\\\\6&8\\end{pmatrix}", "unread"),
    ("\\{\\begin{pmatrix}1\\end{pmatrix}\\}", "1", "unread"),
    ("2\\begin{pmatrix}1\\end{pmatrix}", "2", "unread"),
    ("x = \\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)", "correct"),
    # powers of e and pi, and a product's body at its indices, counted by the guard
    ("e^{10^{6}}", "0.5", "unread"),
    ("\\pi^{10^{7}}", "2.5", "unread"),
    ("\\lceil e^{e^{e^{3}}} \\rceil", "5", "unread"),
    ("\\prod_{k=1}^{100} k^{k^{3}}", "5", "unread"),
    # forms a grader accepts
    ("\\left(B\\right)", "B", "correct"),
    ("[C]", "C", "correct"),
    ("1\\:000", "1000", "correct"),
    ("iy = 2ix + 3i", "y = 2x+3", "correct"),
    ("1f_{16}", "31", "correct"),
    # a name applied to numbers: a function the reader does not know
    ("C(5,2)", "10", "unread"),
    ("P(5,2)", "20", "unread"),
]

TENTH_PASS = [  # a fifth independent pass on the final reader (1,486 answers): each row scored otherwise before
    # a product side by side after a slash: the parser divides by the product (1/(2 sqrt 3)), a reader may not
    ("1/2\\sqrt{3}", "\\frac{1}{2\\sqrt3}", "unread"),
    ("2/3\\pi", "\\frac{2}{3\\pi}", "unread"),
    ("1/2(x+1)", "\\frac{x+1}{2}", "unread"),
    ("\\pi/2", "\\frac{\\pi}{2}", "correct"),
    ("2/(3\\pi)", "\\frac{2}{3\\pi}", "correct"),
    # exponentials and nested sums and products, counted by the size guard
    ("\\lfloor \\exp(10^{7}) \\rfloor", "5", "unread"),
    ("\\lceil \\cosh(10^{7}) \\rceil", "5", "unread"),
    ("\\sum_{a=1}^{100}\\sum_{b=1}^{100} \\frac{1}{a^2+b^3}", "5", "unread"),
    ("\\sum_{k=1}^{50} k + \\sum_{k=1}^{50} k^2", "44200", "correct"),
]

TABLE = (HEDGES + SEVERAL_BOXES + LISTS_SETS_INTERVALS_TUPLES + CHOICES + PLAIN + FROM_REVIEW + MEANING + SECOND_PASS
         + THIRD_PASS + FOURTH_PASS + EXACT_VALUES + GRADER_FORMS + SIXTH_PASS
         + SEVENTH_PASS + EIGHTH_PASS + NINTH_PASS + TENTH_PASS)
PARSER_TEXTS = Path(__file__).parents[2] / "fixtures" / "math" / "parser_texts.json"
OUTCOMES = {"correct": (1.0, 0.0, 0.0), "hedged": (0.0, 1.0, 0.0), "wrong": (0.0, 0.0, 0.0), "unread": (0.0, 0.0, 1.0)}
pytestmark = pytest.mark.usefixtures("math_checker_processes")


def response(boxes: str) -> str:
    return "</think> The answer is " + " and ".join(f"\\boxed{{{box.strip()}}}" for box in boxes.split(" | "))


def test_the_table_is_large_and_covers_hedges_in_many_spellings():
    assert len(TABLE) >= 120
    assert sum(outcome in ("hedged", "unread") for _, _, outcome in HEDGES) >= 20


@pytest.mark.parametrize(("boxes", "gold", "outcome"), TABLE, ids=[f"{g}<-{b}" for b, g, _ in TABLE])
def test_each_answer_gets_the_verdict_of_what_it_states(boxes, gold, outcome):
    result = REWARD("math", response(boxes), gold, {"response_length": 10}, timeout_s=10.0)
    assert (result["correct"], result["hedged"], result["verify_failed"]) == OUTCOMES[outcome]


def test_the_fast_parse_builds_the_full_parse_s_tree(monkeypatch):
    """lexicon.parse_tree parses in ANTLR's two stages (SLL prediction, then full-context LL where SLL meets a
    syntax error). On every text the table's answers and golds bring to the parser, and on those of the adversarial
    passes (tests/fixtures/math/parser_texts.json), its tree is the one latex2sympy's own LL parse builds, and both
    stages are taken."""
    from antlr4.atn.PredictionMode import PredictionMode
    from antlr4.tree.Trees import Trees
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    texts = set()
    two_stage = lexicon.parse_tree
    monkeypatch.setattr(lexicon, "parse_tree", lambda text, is_real: texts.add((text, is_real)) or two_stage(
        text, is_real))
    for boxes, gold, _ in TABLE:
        golds = [*gold.values()][0] if isinstance(gold, dict) else gold if isinstance(gold, list) else [gold]
        for text in [*(gold for gold in golds if isinstance(gold, str)), *boxes.split(" | ")]:
            with contextlib.suppress(Unreadable):
                parse(text)

    def tree(text, is_real, mode=None):
        parser = _Latex2Sympy(is_real=is_real).create_parser(text)
        if mode is not None:
            parser._interp.predictionMode = mode
        try:
            return Trees.toStringTree(parser.math(), recog=parser)
        except Exception as error:  # latex2sympy's syntax errors are plain Exceptions
            return f"not parsed: {error}"

    def staged(text, is_real):
        try:
            parsed = two_stage(text, is_real)
        except Exception as error:
            return f"not parsed: {error}"
        return Trees.toStringTree(parsed, recog=parsed.parser)

    assert len(texts) >= 250
    texts |= {(text, is_real) for text, is_real in json.loads(PARSER_TEXTS.read_text())["texts"]}
    assert [text for text, is_real in texts if staged(text, is_real) != tree(text, is_real)] == []
    sll_alone_fails = [text for text, is_real in texts if tree(text, is_real, PredictionMode.SLL).startswith("not")]
    assert len(sll_alone_fails) >= 20
