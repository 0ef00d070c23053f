"""The math answer reader: what a response's final answer states, and whether that is the gold's value. Two verbs,
each on its own module, and the rooms they read with, in the order a text meets them:

- where.py: where the answer is in a response (the answer part after ``</think>``, its boxes, a multi-part answer's
  parts), for every reward that reads one;
- guard.py: what is not read at all (a text over ``MAX_ANSWER_CHARS``, numbers and nesting sympy would spend seconds
  on), and numbers written in plain digits;
- lexicon.py, words.py, juxtaposed.py: what a box may hold (its commands, characters and environments; the units and
  labels among its words; numbers side by side), checked before the parser sees a piece;
- ``parse`` (parsing.py, with relations.py for equations, approximations, residues and inequalities): the values a
  text states, as ``Value``s, or ``Unreadable`` naming what could not be placed;
- ``grade`` (grading.py): whether an answer's values are the gold's, compared exactly (CORRECT, WRONG, HEDGED);
- checker.py: both, for a reward, in a pool of child processes under a deadline (``AnswerChecker``).

Everything here imports sympy, latex2sympy2_extended and math-verify when first used, never at import.
docs/math-length.md ("What an answer states") says what the reader models and what it gives up.
"""

from gdpo_verl.answers.grading import CORRECT, HEDGED, WRONG, grade
from gdpo_verl.answers.parsing import parse, parse_all
from gdpo_verl.answers.value import Unreadable, Value

__all__ = ["CORRECT", "HEDGED", "WRONG", "Unreadable", "Value", "grade", "parse", "parse_all"]
