"""Long profile: ``python -m tests.trailers [--messages 20000] [--seed 0] [--jobs 2]``; exit 1 on
any disagreement with ``git interpret-trailers --parse``."""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from tests.trailers import disagreement, message


def _batch(seeds: range) -> tuple[int, int, list[str]]:
    problems = [d for seed in seeds if (d := disagreement(seed))]
    signed = sum("signed-off-by" in message(seed)[0].lower() for seed in seeds)
    return len(seeds), signed, problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    started = time.perf_counter()
    stop = opts.seed + opts.messages
    batches = [range(s, min(s + 500, stop)) for s in range(opts.seed, stop, 500)]
    total = signed = 0
    problems: list[str] = []
    with ProcessPoolExecutor(opts.jobs) as pool:
        for count, with_signoff, found in pool.map(_batch, batches):
            total, signed, problems = total + count, signed + with_signoff, problems + found
    for problem in problems[:20]:
        print(problem)
    seconds = time.perf_counter() - started
    print(f"{total} messages ({signed} with a Signed-off-by line), {len(problems)} disagreements with "
          f"git interpret-trailers --parse, {seconds:.0f} s")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
