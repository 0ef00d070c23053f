"""Time the math reward on hostile answers: what a call of the reward costs the reward worker.

Each answer is scored as a response ``</think> \\boxed{answer}`` against its gold, the way verl's reward
worker calls the reward (the checker processes already running, as in a training run). Prints one line per
answer: the call's wall time, ``correct`` and ``verify_failed``, and the reason logged when the answer was
not checked; then the worst time, beside the time of an ordinary answer measured in the same run.

    python scripts/bench_hostile_answers.py
    python scripts/bench_hostile_answers.py --timeout-s 5 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time

from gdpo_verl.rewards.math_length import MathLengthReward

# (answer, gold): found by trying what a policy might write; the first are correct answers.
HOSTILE = [
    ("\\frac{10000000!}{9999999!}", "10000000"),
    ("\\binom{1000000}{1}", "1000000"),
    ("10^{10^{10^{10}}}", "1"),
    ("9^{9^{9^{9^{9}}}}", "1"),
    ("2^2^2^2^2^2", "1"),
    ("2^{2^{30}}", "1"),
    ("(10^{10})!", "1"),
    ("\\binom{1000000}{500000}", "1"),
    ("\\frac{1}{" * 90 + "2" + "}" * 90, "1"),
    ("(" * 30 + "1" + ")" * 30, "1"),
    ("(" * 6 + "1" + ")" * 6, "1"),  # as deep as the guard lets through
    ("\\binom{60000}{30000}", "1"),  # as large as the guard lets through (18,061 digits)
    ("5000!", "1"),
    ("9" * 999, "1"),
    ("{" * 500 + "}" * 500, "1"),
    ("\\prod_{k=1}^{10^{7}} k", "1"),
    ("\\Gamma(10^{7})", "1"),
    ("\\sum_{k=1}^{100000} k^{k}", "1"),
    ("\\sum_{k=1}^{100} k^{k}", "1"),  # as many terms as the guard lets through
    ("\\prod_{k=1}^{100} k!", "1"),
    ("2^{2^{11}}", "2^{2048}"),  # correct; ran into the timeout before the checker evaluated integer towers
    ("2^{2^{2^{2^{2}}}}", "2^{65536}"),  # correct; 19,729 digits
    ("7 \\\\ 5", "5"),  # hedged: never correct
    # hedges in spellings a list of separators did not know, and what the reader cannot place (never credited)
    ("x=7 \\land x=5", "5"),
    ("7 \\to 5", "5"),
    ("{7 \\\\ 5}", "5"),
    ("\\begin{cases} 7 \\\\ 5 \\end{cases}", "5"),
    ("5 \\text{ (or 7)}", "5"),
    ("5 \\lor 7 \\lor 9 \\lor 11 \\lor 13 \\lor 15", "5"),
    # read as values and compared: correct answers a list of separators scored wrong, and close decimals
    ("x=2 \\text{ or } x=3", "2, 3"),
    ("2 \\text{ or } -2", "\\pm 2"),
    ("x \\geq 3", "[3,\\infty)"),
    ("x<1 \\text{ or } x>2", "(-\\infty,1)\\cup(2,\\infty)"),
    ("\\textbf{(C)}\\ 5", "5"),
    ("0.0000004", "0.0000001"),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"),
]
ORDINARY = ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt{3}}{2}")


class _Reasons(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


def timed(reward: MathLengthReward, answer: str, gold: str, timeout_s: float, repeats: int
          ) -> tuple[float, dict[str, float]]:
    worst, result = 0.0, {}
    for _ in range(repeats):
        start = time.perf_counter()
        result = reward("math", f"</think> \\boxed{{{answer}}}", gold, {"response_length": 100}, timeout_s=timeout_s)
        worst = max(worst, time.perf_counter() - start)
    return worst, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout-s", type=float, default=2.0, help="the reward's timeout_s option (2.0)")
    parser.add_argument("--repeats", type=int, default=1, help="calls per answer; the slowest is shown (1)")
    args = parser.parse_args(argv)
    if args.timeout_s <= 0 or args.repeats < 1:
        parser.error("--timeout-s must be > 0 and --repeats >= 1")
    reasons = _Reasons()
    logging.getLogger("gdpo_verl").addHandler(reasons)
    with MathLengthReward() as reward:
        reward.start()  # every checker process ready, as in a training run after its first batch
        timed(reward, *ORDINARY, args.timeout_s, reward.checker.workers)  # each process's first check
        ordinary, _ = timed(reward, *ORDINARY, args.timeout_s, args.repeats)
        print(f"{'seconds':>8}  correct  hedged  verify_failed  answer  (reason)")
        worst = 0.0
        for answer, gold in HOSTILE:
            reasons.last = ""
            seconds, result = timed(reward, answer, gold, args.timeout_s, args.repeats)
            worst = max(worst, seconds)
            found = re.search(r"verify_failed=1: (.*)\. \d+ so far", reasons.last)
            why = found.group(1) if found else ""
            shown = answer if len(answer) <= 40 else f"{answer[:37]}..."
            print(f"{seconds:8.3f}  {result['correct']:7.0f}  {result['hedged']:6.0f}  "
                  f"{result['verify_failed']:13.0f}  {shown}  {why}")
    print(f"worst call: {worst:.3f} s; an ordinary answer ({ORDINARY[0]}): {ordinary:.3f} s; "
          f"ratio {worst / ordinary:.1f}x; timeout_s={args.timeout_s:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
