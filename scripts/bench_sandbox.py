"""What scoring a coding response costs: test cases per second, side by side in one run, alternating, on the same
responses (each a short program with its test cases), as many at once as cores:

    bare                 this interpreter started once per test case, no sandbox and no limits
    sandbox per case     a sandbox and an interpreter started per test case (``Sandbox.run``: a session of one run)
    coding reward        the coding reward (``compute_score``): the program compiled once per session, each test case
                         a process forked from it (sessions of the response's slot, more when slots are free)

    python scripts/bench_sandbox.py                      # 3 responses x 20 test cases, 2 rounds, slots = cores
    python scripts/bench_sandbox.py --responses 8 --rounds 3 --slots 8

Prints per way: test cases per second, core-milliseconds per test case, the overhead over the program's own CPU
time (measured here, in this process), and the ratio to bare; then what a 64-core node would sustain, projected
from the per-core rate (labelled as such: not measured).

    python scripts/bench_sandbox.py --against ../earlier   # also the same ways from another checkout, alternating

With ``--against``, each round measures bare and the coding reward from this checkout and from the other one, in
turn, each in a process of its own (``--round-json``, with that checkout first on ``PYTHONPATH``), and prints both
trees' rates and ratios to bare side by side: the ratio of one tree is read against the other's on the same
machine, in the same minutes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from gdpo_verl.rewards.coding import CodingReward

try:
    from gdpo_verl.sandbox import OK, Sandbox
except ImportError:  # a checkout from before the sandbox was a package of its own (--against)
    from gdpo_verl.rewards.sandbox import OK, Sandbox

# Typical accepted solutions: read the input, compute, print (what most test cases of a coding set run).
PROGRAMS = [
    "import sys\nnumbers = list(map(int, sys.stdin.read().split()))\nprint(sum(x * x for x in numbers) % 1000003)\n",
    "import sys\nfrom collections import deque\nn = int(sys.stdin.readline())\nseen = [False] * n\nqueue = deque([0])\n"
    "seen[0] = True\nwhile queue:\n    at = queue.popleft()\n    for to in (at * 2 % n, (at + 1) % n):\n"
    "        if not seen[to]:\n            seen[to] = True\n            queue.append(to)\nprint(sum(seen))\n",
    "import bisect, sys\ndata = sys.stdin.read().split()\nvalues = sorted(map(int, data[1:]))\n"
    "print(bisect.bisect_left(values, int(data[0])))\n",
]
CASES = 20


def inputs(program: int) -> list[str]:
    if program == 0:
        return [" ".join(str(i * case % 997) for i in range(200 + 100 * case)) for case in range(CASES)]
    if program == 1:
        return [f"{500 + 250 * case}\n" for case in range(CASES)]
    return [f"{case * 37} " + " ".join(str(i * 7919 % 1000) for i in range(100 + 50 * case)) for case in range(CASES)]


def expected(program: str, stdin: str) -> str:
    """The program's output, run here; also what the program's own CPU time is measured on."""
    saved = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(stdin), io.StringIO()
    try:
        exec(compile(program, "main.py", "exec"), {"__name__": "__main__"})
        return sys.stdout.getvalue()
    finally:
        sys.stdin, sys.stdout = saved


def own_seconds(responses: list[tuple[str, list[str]]]) -> float:
    """CPU seconds per test case of the programs themselves (in this interpreter, no start-up)."""
    started = time.process_time()
    for program, stdins in responses:
        for stdin in stdins:
            expected(program, stdin)
    return (time.process_time() - started) / sum(len(stdins) for _, stdins in responses)


def bare(python: str):
    def score(program: str, stdins: list[str], outputs: list[str]) -> int:
        passed = 0
        for stdin, output in zip(stdins, outputs):
            done = subprocess.run([python, "-I", "-B", "-c", program], input=stdin, capture_output=True, text=True,
                                  timeout=60)
            passed += done.returncode == 0 and done.stdout == output
        return passed
    return score


def per_case(sandbox: Sandbox):
    def score(program: str, stdins: list[str], outputs: list[str]) -> int:
        passed = 0
        for stdin, output in zip(stdins, outputs):
            outcome = sandbox.run(program, stdin)
            passed += outcome.status == OK and outcome.stdout == output
        return passed
    return score


def coding_reward(reward: CodingReward):
    def score(program: str, stdins: list[str], outputs: list[str]) -> int:
        truth = json.dumps({"inputs": stdins, "outputs": outputs})
        result = reward("bench", f"</think>\n```python\n{program}```", truth, {"response_length": 100})
        if result["verify_failed"]:
            raise RuntimeError("the coding reward could not check a benchmark response")
        return int(result["tests_passed"])
    return score


def measure(score, responses: list[tuple[str, list[str], list[str]]], slots: int) -> float:
    """Test cases per second, scoring every response once, ``slots`` responses at once."""
    started = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        passed = list(pool.map(lambda response: score(*response), responses))
    seconds = time.perf_counter() - started
    if sum(passed) != sum(len(stdins) for _, stdins, _ in responses):
        raise RuntimeError(f"a benchmark test case failed: {passed} passed")
    return sum(len(stdins) for _, stdins, _ in responses) / seconds


def round_json(responses: list[tuple[str, list[str], list[str]]], slots: int) -> dict:
    """One round of bare and the coding reward with the gdpo_verl this process imports (``--round-json``)."""
    import gdpo_verl

    sandbox = Sandbox("local", slots=slots)
    sandbox.check()
    reward = CodingReward(workers=slots)
    reward.prepare()
    try:
        measure(coding_reward(reward), responses[:1], slots)  # its sessions' first start, out of the count
        rates = {"bare": measure(bare(sandbox.python), responses, slots),
                 "coding reward": measure(coding_reward(reward), responses, slots)}
    finally:
        reward.close()
        sandbox.close()
    return {"tree": os.path.dirname(os.path.dirname(gdpo_verl.__file__)), "rates": rates}


def against(other: str, args: argparse.Namespace) -> int:
    """Bare and the coding reward from this checkout and from ``other``, alternating, each round in new processes."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this checkout": here, "other": os.path.abspath(other)}
    rates: dict[str, dict[str, list[float]]] = {name: {"bare": [], "coding reward": []} for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            done = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--round-json", "--responses", str(args.responses),
                 "--slots", str(args.slots)], capture_output=True, text=True, timeout=1800,
                env={**os.environ, "PYTHONPATH": tree}, cwd=tree)
            if done.returncode != 0:
                raise RuntimeError(f"the round in {tree} failed: {done.stderr[-2000:]}")
            found = json.loads(done.stdout.splitlines()[-1])
            if os.path.realpath(found["tree"]) != os.path.realpath(tree):
                raise RuntimeError(f"the round meant for {tree} imported gdpo_verl from {found['tree']}")
            for way, rate in found["rates"].items():
                rates[name][way].append(rate)
    print(f"{args.responses} responses x {CASES} test cases x {args.rounds} rounds, {args.slots} at once, "
          f"alternating between {here} and {trees['other']}")
    print(f"{'tree':<15} {'bare cases/s':>12} {'reward cases/s':>14} {'reward / bare':>13}  rounds (reward / bare)")
    for name in trees:
        bare_rate, reward_rate = (statistics.median(rates[name][way]) for way in ("bare", "coding reward"))
        per_round = " ".join(f"{r / b:.2f}" for r, b in zip(rates[name]["coding reward"], rates[name]["bare"]))
        print(f"{name:<15} {bare_rate:12.1f} {reward_rate:14.1f} {reward_rate / bare_rate:12.2f}x  {per_round}")
    # bare is the same interpreter in both trees' rounds: pooled, its noise no longer separates the two ratios
    pooled = statistics.median(rates["this checkout"]["bare"] + rates["other"]["bare"])
    print("reward / bare, bare pooled over both trees' rounds: "
          + ", ".join(f"{name} {statistics.median(rates[name]['coding reward']) / pooled:.2f}x" for name in trees))
    paired = [mine / theirs for mine, theirs in zip(rates["this checkout"]["coding reward"],
                                                      rates["other"]["coding reward"])]
    print(f"this checkout's coding reward / other's, per round (measured one after the other): median "
          f"{statistics.median(paired):.2f}x ({' '.join(f'{ratio:.2f}' for ratio in paired)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=3, help="responses per way and round (default 3; each "
                        f"has {CASES} test cases; the programs are used in turn)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the ways alternating (default 2)")
    parser.add_argument("--slots", type=int, default=len(os.sched_getaffinity(0)), help="test cases at once "
                        "(default: the cores)")
    parser.add_argument("--against", metavar="CHECKOUT", help="also measure bare and the coding reward from this "
                        "other checkout of gdpo-verl, alternating with this one")
    parser.add_argument("--round-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.responses < 1 or args.rounds < 1 or args.slots < 1:
        parser.error("--responses, --rounds and --slots must be at least 1")
    if args.against:
        if not os.path.isdir(os.path.join(args.against, "gdpo_verl")):
            parser.error(f"--against {args.against}: no gdpo_verl package there (give a checkout of gdpo-verl)")
        return against(args.against, args)
    responses = []
    for number in range(args.responses):
        program = PROGRAMS[number % len(PROGRAMS)]
        stdins = inputs(number % len(PROGRAMS))
        responses.append((program, stdins, [expected(program, stdin) for stdin in stdins]))
    if args.round_json:
        print(json.dumps(round_json(responses, args.slots)))
        return 0
    own = own_seconds([(program, stdins) for program, stdins, _ in responses])
    sandbox = Sandbox("local", slots=args.slots)
    sandbox.check()
    reward = CodingReward(workers=args.slots)
    reward.prepare()
    ways = {"bare": bare(sandbox.python), "sandbox per case": per_case(sandbox), "coding reward": coding_reward(reward)}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(args.rounds):
            for name, score in ways.items():
                rates[name].append(measure(score, responses, args.slots))
    finally:
        reward.close()
        sandbox.close()
    cores = len(os.sched_getaffinity(0))
    print(f"{args.responses} responses x {CASES} test cases x {args.rounds} rounds per way, {args.slots} at once, "
          f"{cores} cores; interpreter {sandbox.python}; bubblewrap {sandbox.node.bwrap}; isolation {sandbox.isolation}")
    print(f"the programs' own CPU time: {own * 1000:.2f} ms per test case (measured in this process)")
    base = statistics.median(rates["bare"])
    print(f"{'way':<18} {'cases/s':>8} {'core-ms/case':>12} {'overhead ms':>11} {'/ bare':>7}  rounds")
    for name in ways:
        rate = statistics.median(rates[name])
        cost = min(args.slots, cores) / rate * 1000
        print(f"{name:<18} {rate:8.1f} {cost:12.2f} {cost - own * 1000:11.2f} {rate / base:6.2f}x  "
              + " ".join(f"{value:.1f}" for value in rates[name]))
    per_core = statistics.median(rates["coding reward"]) / min(args.slots, cores)
    print(f"projected, not measured: a 64-core node at this per-core rate scores {per_core * 64:.0f} test cases/s "
          f"with the coding reward ({statistics.median(rates['bare']) / min(args.slots, cores) * 64:.0f} bare)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
