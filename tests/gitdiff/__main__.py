"""Long profile: ``python -m tests.gitdiff [--cases 10000] [--seed 0] [--jobs 2]``.

Exit 1 on any disagreement with git."""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.gitdiff import run_case


def _batch(args: tuple[int, int]) -> tuple[collections.Counter, list[str]]:
    start, count = args
    writers: collections.Counter = collections.Counter()
    problems = []
    with tempfile.TemporaryDirectory(prefix="gitdiff-") as tmp:
        for seed in range(start, start + count):
            case = run_case(seed, Path(tmp))
            writers[case.writer] += 1
            problems += [f"seed {seed} ({case.writer}): {p}" for p in case.problems]
    return writers, problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    started = time.perf_counter()
    step = 100
    batches = [
        (s, min(step, opts.seed + opts.cases - s)) for s in range(opts.seed, opts.seed + opts.cases, step)
    ]
    writers: collections.Counter = collections.Counter()
    problems: list[str] = []
    with ProcessPoolExecutor(opts.jobs) as pool:
        for counted, found in pool.map(_batch, batches):
            writers += counted
            problems += found
    for line in problems[:50]:
        print(line)
    print(f"{sum(writers.values())} cases, {len(problems)} disagreements, "
          f"{time.perf_counter() - started:.0f} s; by writer: {dict(sorted(writers.items()))}")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
