"""What the coding reward's sandbox costs: programs per second and the time one program takes, run bare (this
interpreter, no limits), with the limits only (``Sandbox("none")``) and in the sandbox (``Sandbox("local")``),
side by side in one run, alternating, on the same short programs.

    python scripts/bench_sandbox.py                 # 2 rounds of 40 programs per way, as many at once as cores
    python scripts/bench_sandbox.py --programs 200 --slots 8

Prints one line per way: programs/s, median and 90th percentile seconds per program, and the ratio to bare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from gdpo_verl.rewards.sandbox import OK, Sandbox

# A typical accepted solution: read the input, compute, print (what most test cases of a coding set run).
PROGRAM = "import sys\nnumbers = list(map(int, sys.stdin.read().split()))\nprint(sum(x * x for x in numbers) % 1000003)\n"
STDIN = " ".join(str(i) for i in range(2000))


def bare(python: str):
    def run() -> bool:
        done = subprocess.run([python, "-I", "-B", "-c", PROGRAM], input=STDIN, capture_output=True, text=True,
                              timeout=30)
        return done.returncode == 0
    return run


def sandboxed(sandbox: Sandbox):
    def run() -> bool:
        return sandbox.run(PROGRAM, STDIN).status == OK
    return run


def measure(run, programs: int, slots: int) -> tuple[float, list[float]]:
    def timed(_: int) -> float:
        started = time.perf_counter()
        if not run():
            raise RuntimeError("a benchmark program did not run clean")
        return time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(slots) as pool:
        seconds = list(pool.map(timed, range(programs)))
    return programs / (time.perf_counter() - started), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40, help="programs per way and round (default 40)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the ways alternating (default 2)")
    parser.add_argument("--slots", type=int, default=len(os.sched_getaffinity(0)), help="programs at once")
    args = parser.parse_args(argv)
    if args.programs < 1 or args.rounds < 1 or args.slots < 1:
        parser.error("--programs, --rounds and --slots must be at least 1")
    local = Sandbox("local", slots=args.slots)
    local.check()
    plain = Sandbox("none", python=local.python, slots=args.slots)
    plain.check()
    ways = {"bare": bare(local.python), "limits only": sandboxed(plain), "sandbox (bubblewrap)": sandboxed(local)}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(args.rounds):
            for name, run in ways.items():
                rate, each = measure(run, args.programs, args.slots)
                rates[name].append(rate)
                seconds[name].extend(each)
    finally:
        local.close()
    print(f"{args.programs} programs x {args.rounds} rounds per way, {args.slots} at once, "
          f"{len(os.sched_getaffinity(0))} cores; interpreter {local.python}; bubblewrap {local.bwrap}")
    base = statistics.median(seconds["bare"])
    print(f"{'way':<22} {'programs/s':>10} {'median s':>9} {'p90 s':>7} {'median / bare':>13}")
    for name in ways:
        each = sorted(seconds[name])
        median, p90 = statistics.median(each), each[int(0.9 * (len(each) - 1))]
        print(f"{name:<22} {statistics.median(rates[name]):10.1f} {median:9.4f} {p90:7.4f} {median / base:12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
