"""Answers per second of the math reward beside verl's own ``math_verify`` scorer, on the same responses.

Three scorers score the same responses:

* verl: ``verl.utils.reward_score.math_verify.compute_score(response, gold)`` (a spawn ProcessPoolExecutor of 4
  processes; each parses the whole response, reasoning included);
* reward: a ``MathLengthReward()`` made here, as the "gdpo_verl" reward manager makes one (its checker pool of
  two processes, started and waited for before timing);
* direct: ``gdpo_verl.rewards.math_length.compute_score`` called directly (the shared reward of direct calls).

Each is called as verl's reward manager calls a sync ``compute_score``: from a thread pool (verl runs each call
in the event loop's default executor, so many calls are in flight at once; ``--threads`` defaults to that
executor's size, ``min(32, cores + 4)``), and also one call at a time (the sequential rate). Every round scores
freshly made responses (new golds and answers: no scorer sees a response twice, so no reading kept from an
earlier round helps) in slices that the scorers take in turn, the order rotating from slice to slice: four
groups with the thread pool, one group one call at a time. So a slower or faster stretch of a shared machine falls
on each of them. Two workloads: GRPO groups, ``--group`` responses per prompt, all with the prompt's gold (answers
repeating within a group as a policy's do), and all distinct (a gold and an answer per response: nothing a scorer
read before comes again, the floor of a scorer that keeps its readings). Each response is ``--chars`` characters of
reasoning, ``</think>``, and a boxed answer (integers, fractions, square roots, multiples of pi, intervals,
tuples, (a + sqrt(b)) / 2 in turn; about half correct).

Prints the setup, then per workload and reasoning length the rate of each scorer (median over the rounds [min-max]), the
reward's rate over verl's and the direct call's over the reward's (the median of the rounds' ratios), and how many
verdicts differ from the intended one.

    python scripts/bench_math_reward.py                       # about three minutes on 2 cores
    python scripts/bench_math_reward.py --rounds 5 --responses 224 --chars 4000 16000
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from math import gcd

try:
    from verl.utils.reward_score import math_verify as verl_math_verify
except ImportError as error:
    sys.exit(f"bench_math_reward.py compares with verl's math_verify scorer, and verl cannot be imported here "
             f"({error}). Run it with the training environment's Python, which has verl: "
             f".venv/bin/python scripts/bench_math_reward.py (bash scripts/setup_env.sh makes it).")

from gdpo_verl.rewards import math_length
from gdpo_verl.rewards.math_length import MathLengthReward

Response = tuple[str, str, bool]  # (response, gold, whether the answer is correct)

_SQUARE_FREE = [2, 3, 5, 6, 7, 10, 11, 13, 14, 15]
_STEPS = [
    "Let $x$ be the unknown, so $x^2 - {a}x + {b} = 0$ and by Vieta $x_1 + x_2 = {a}$. ",
    "Substituting $y = {a} - x$ gives $x({a} - x) = {b}$, which we check against $\\frac{{{a}}}{{2}}$. ",
    "Wait, the discriminant is $\\Delta = {a}^2 - 4 \\cdot {b}$, so $\\sqrt{{\\Delta}}$ must be real. ",
    "Hmm, let me recompute: ${a} \\times {b} = {c}$, and $\\frac{{{c}}}{{{a}}} = {b}$. ",
    "So the area is $\\frac{{1}}{{2}} \\cdot {a} \\cdot {b} \\sin\\theta$ with $\\theta = \\frac{{\\pi}}{{{a}}}$. ",
    "Checking the case $n = {a}$: the sum $\\sum_{{k=1}}^{{n}} k = \\frac{{n(n+1)}}{{2}}$ gives {c}. ",
]


KINDS = 7  # integers, fractions, square roots, multiples of pi, intervals, tuples, (a + sqrt(b)) / 2


def _problem(kind: int, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """A gold answer of ``kind`` with correct and wrong answers to it, as a policy writes them."""
    a, b = rng.randint(2, 999), rng.randint(2, 999)
    if kind == 0:
        n = rng.randint(-500, 99999)
        return str(n), [str(n), f"x = {n}", f"{n}"], [str(n + 1), str(n - rng.randint(2, 9)), str(2 * n + 1)]
    if kind == 1:
        b = b if gcd(a, b) == 1 else a + 1  # a/(a+1) is in lowest terms
        return (f"\\frac{{{a}}}{{{b}}}", [f"\\frac{{{a}}}{{{b}}}", f"\\dfrac{{{2 * a}}}{{{2 * b}}}", f"{a}/{b}"],
                [f"\\frac{{{b}}}{{{a}}}", f"\\frac{{{a + 1}}}{{{b}}}", f"{a * b}"])
    if kind == 2:
        root = rng.choice(_SQUARE_FREE)
        return (f"{a}\\sqrt{{{root}}}", [f"{a}\\sqrt{{{root}}}", f"\\sqrt{{{a * a * root}}}", f"{a} \\sqrt{{{root}}}"],
                [f"{a + 1}\\sqrt{{{root}}}", f"{a}\\sqrt{{{root + 1}}}", f"{a * root}"])
    if kind == 3:
        b = b if gcd(a, b) == 1 else a + 1
        return (f"\\frac{{{a}\\pi}}{{{b}}}", [f"\\frac{{{a}\\pi}}{{{b}}}", f"\\frac{{{a}}}{{{b}}}\\pi", f"{a}\\pi/{b}"],
                [f"\\frac{{{a + 1}\\pi}}{{{b}}}", f"\\frac{{{b}\\pi}}{{{a}}}", f"\\frac{{{a}}}{{{b}}}"])
    if kind == 4:
        return (f"[{a}, \\infty)", [f"[{a},\\infty)", f"x \\geq {a}", f"[{a}, \\infty)"],
                [f"({a}, \\infty)", f"[{a + 1}, \\infty)", f"(-\\infty, {a}]"])
    if kind == 5:
        b = b if b != a else a + 1
        return (f"({a}, -{b})", [f"({a}, -{b})", f"({a},-{b})", f"\\left({a}, -{b}\\right)"],
                [f"(-{b}, {a})", f"({a}, {b})", f"({a + 1}, -{b})"])
    b = b if round(b ** 0.5) ** 2 != b else b + 1  # not a perfect square
    return (f"\\frac{{{a}+\\sqrt{{{b}}}}}{{2}}",
            [f"\\frac{{{a}+\\sqrt{{{b}}}}}{{2}}", f"\\frac{{\\sqrt{{{b}}}+{a}}}{{2}}",
             f"\\frac{{{a}}}{{2}}+\\frac{{\\sqrt{{{b}}}}}{{2}}"],
            [f"\\frac{{{a}-\\sqrt{{{b}}}}}{{2}}", f"{a}+\\sqrt{{{b}}}", f"\\frac{{{a + 1}+\\sqrt{{{b}}}}}{{2}}"])


def _reasoning(rng: random.Random, chars: int) -> str:
    steps = []
    length = 0
    while length < chars:
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        step = rng.choice(_STEPS).format(a=a, b=b, c=a * b)
        steps.append(step)
        length += len(step)
    return "".join(steps)[:chars]


def responses(count: int, chars: int, group: int, rng: random.Random, used: set[str]) -> list[Response]:
    """``count`` responses in groups of ``group`` per prompt (one gold per group, the kinds taking turns), each
    with ``chars`` characters of reasoning; about half the answers correct. A gold in ``used`` is drawn again (and
    each gold drawn is added): no gold, so no response, comes twice in a run."""
    made: list[Response] = []
    kind, redrawn = rng.randrange(KINDS), 0
    while len(made) < count:
        gold, right, wrong = _problem(kind, rng)
        if gold in used:
            redrawn += 1
            if redrawn > 10_000:
                sys.exit(f"no new gold of kind {kind} in 10,000 draws: this run asks for more distinct golds than "
                         "the benchmark makes; use fewer --responses or --rounds.")
            continue
        used.add(gold)
        redrawn = 0
        kind = (kind + 1) % KINDS
        for _ in range(group):
            correct = rng.random() < 0.5
            answer = rng.choice(right if correct else wrong)
            made.append((f"{_reasoning(rng, chars)}</think>\n\nSo the final answer is $\\boxed{{{answer}}}$.",
                         gold, correct))
    return made[:count]


def _score_verl(response: Response) -> float:
    return float(verl_math_verify.compute_score(response[0], response[1]))


def _gdpo(reward: Callable[..., dict[str, float]], unchecked: list[int]) -> Callable[[Response], float]:
    def score(response: Response) -> float:
        result = reward("math", response[0], response[1], {"response_length": len(response[0]) // 4})
        if result["verify_failed"]:
            unchecked.append(1)  # list.append is atomic: calls come from several threads
        return result["correct"]
    return score


def _timed(score: Callable[[Response], float], batch: list[Response], pool: ThreadPoolExecutor | None
           ) -> tuple[float, list[float]]:
    """Seconds to score ``batch`` through ``pool`` (None: one call after another), and the scores."""
    start = time.perf_counter()
    scores = [score(response) for response in batch] if pool is None else list(pool.map(score, batch))
    return time.perf_counter() - start, scores


def _median_ratio(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(top / bottom for top, bottom in zip(numerators, denominators, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per reasoning length (default 3)")
    parser.add_argument("--responses", type=int, default=112,
                        help="responses per round with the thread pool, half as many one call at a time; each "
                             "scorer scores all of them (default 112: 14 groups of 8, two of each kind of answer)")
    parser.add_argument("--chars", type=int, nargs="+", default=[4000, 16000],
                        help="characters of reasoning before </think> (default: 4000 16000, one run each)")
    parser.add_argument("--threads", type=int, default=min(32, (os.cpu_count() or 1) + 4),
                        help="calls in flight (default: asyncio's default executor size, min(32, cores + 4))")
    parser.add_argument("--group", type=int, default=8, help="responses per prompt, a GRPO group (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.rounds < 1 or args.responses < 2 * args.group or args.threads < 2 or args.group < 1 or min(args.chars) < 0:
        parser.error("--rounds >= 1, --responses >= 2 groups, --threads >= 2, --group >= 1 and --chars >= 0")
    rng, used = random.Random(args.seed), set()

    reward = MathLengthReward().start()  # as the reward manager's: made, and started before the first batch
    unchecked: dict[str, list[int]] = {"reward": [], "direct": []}
    scorers = {"verl": _score_verl, "reward": _gdpo(reward, unchecked["reward"]),
               "direct": _gdpo(math_length.compute_score, unchecked["direct"])}
    pools = {name: ThreadPoolExecutor(max_workers=args.threads) for name in scorers}  # one each, kept
    modes = ((args.threads, args.responses, 4 * args.group), (1, args.responses // 2, args.group))
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"setup: {args.threads} threads (calls in flight) scoring {args.responses} responses per round, and "
          f"{args.responses // 2} one call at a time; groups of {args.group} responses per prompt; {args.rounds} "
          f"rounds per reasoning length; the scorers take slices in turn\n"
          f"  verl:   verl.utils.reward_score.math_verify.compute_score (a spawn pool of 4 processes)\n"
          f"  reward: MathLengthReward() ({reward.checker.workers} checker processes), as the reward manager makes\n"
          f"  direct: gdpo_verl.rewards.math_length.compute_score called directly (its shared reward)")
    try:
        # Not timed: verl's pool spawns its 4 processes on its first calls, and the direct calls' reward is made
        # on the first; every scorer reads each kind of answer (sympy and the parsers load what they use).
        warm = responses(4 * args.threads, 200, args.group, rng, used)
        for name, score in scorers.items():
            _timed(score, warm, pools[name])
        for counts in unchecked.values():
            counts.clear()
        for workload, group, chars in [(workload, group, chars) for workload, group in (
                (f"GRPO groups of {args.group}", args.group), ("all distinct", 1)) for chars in args.chars]:
            rates: dict[tuple[str, int], list[float]] = {}
            disagree = dict.fromkeys(scorers, 0)
            scored = 0
            for _ in range(args.rounds):
                for threads, count, size in modes:
                    batch = responses(count, chars, group, rng, used)
                    scored += count
                    seconds = dict.fromkeys(scorers, 0.0)
                    for turn, first in enumerate(range(0, count, size)):
                        names = list(scorers)
                        for name in names[turn % 3:] + names[:turn % 3]:  # the order rotates slice by slice
                            part = batch[first:first + size]
                            took, scores = _timed(scorers[name], part, pools[name] if threads > 1 else None)
                            seconds[name] += took
                            disagree[name] += sum(got != float(right) for got, (_, _, right) in zip(scores, part,
                                                                                                   strict=True))
                    for name in scorers:
                        rates.setdefault((name, threads), []).append(count / seconds[name])
            print(f"\n{workload}, {chars} characters of reasoning, {args.rounds} rounds (answers/s: median "
                  "[min-max]):")
            for threads, _, _ in modes:
                label = f"{threads} threads" if threads > 1 else "1 thread"
                cells = "   ".join(f"{name} {statistics.median(rates[(name, threads)]):6.1f} "
                                   f"[{min(rates[(name, threads)]):.1f}-{max(rates[(name, threads)]):.1f}]"
                                   for name in scorers)
                print(f"  {label:>10}: {cells}")
                print(f"  {'':>10}  reward / verl "
                      f"{_median_ratio(rates[('reward', threads)], rates[('verl', threads)]):.2f}x   direct / reward "
                      f"{_median_ratio(rates[('direct', threads)], rates[('reward', threads)]):.2f}x")
            print(f"  verdicts other than the intended one, of {scored} each: "
                  + ", ".join(f"{name} {count}" for name, count in disagree.items())
                  + f"; not checked (verify_failed): reward {len(unchecked['reward'])}, "
                    f"direct {len(unchecked['direct'])}")
            for counts in unchecked.values():
                counts.clear()
    finally:
        for pool in pools.values():
            pool.shutdown()
        reward.close()


if __name__ == "__main__":
    main()
