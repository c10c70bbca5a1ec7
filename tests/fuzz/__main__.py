"""``python -m tests.fuzz [--inputs N] [--targets a,b] [--jobs J] [--seed S] [--atheris]``.

Splits N inputs evenly over the targets and J worker processes; prints count, rate and every
distinct crash (saved under --crash-dir). Exit 1 when anything but a UserError escaped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.fuzz import engine
from tests.fuzz.targets import TARGETS


def _work(args: tuple[str, int, int]) -> tuple[str, engine.Stats]:
    target, inputs, seed = args
    return target, engine.run(target, inputs, seed)


def _atheris(target: str, inputs: int) -> int:
    import atheris

    with atheris.instrument_imports(include=["patchkit"]):
        import patchkit.commands.report  # noqa: F401
        import patchkit.config  # noqa: F401
        import patchkit.diff.parse  # noqa: F401
        import patchkit.series.files  # noqa: F401
        import patchkit.split.rules  # noqa: F401

    corpus = Path(os.environ.get("PATCHKIT_ATHERIS_CORPUS", f"/tmp/patchkit-atheris-{target}"))
    corpus.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(engine.seeds(target)):
        (corpus / f"seed-{i}").write_bytes(data)

    def one(data: bytes) -> None:
        crash = engine.check_one(target, data)
        if crash is not None:
            raise RuntimeError(f"{crash.signature}\n{crash.detail}")

    atheris.Setup([sys.argv[0], f"-runs={inputs}", "-max_len=20000", str(corpus)], one)
    atheris.Fuzz()
    return 0


def _figures(totals: dict[str, engine.Stats], elapsed: float, args: argparse.Namespace) -> dict:
    count = sum(s.inputs for s in totals.values())
    return {
        "inputs": count,
        "seconds": round(elapsed, 1),
        "rate_per_s": round(count / max(elapsed, 1e-9)),
        "jobs": args.jobs,
        "seed": args.seed,
        "per_target": {t: s.inputs for t, s in totals.items()},
        "slowest_input_s": {t: round(s.slowest, 3) for t, s in totals.items()},
        "crashes": [c.signature for s in totals.values() for c in s.crashes.values()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz")
    parser.add_argument("--inputs", type=int, default=10_000, help="total inputs over all targets")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"))
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--atheris", action="store_true", help="coverage-guided (one target, one process)")
    args = parser.parse_args()
    targets = args.targets.split(",")
    if args.atheris:
        return _atheris(targets[0], args.inputs)
    chunks = 20 * args.jobs
    per = max(1, args.inputs // (len(targets) * chunks))
    work = [(t, per, args.seed * 1000 + i * 17 + k) for i in range(chunks) for k, t in enumerate(targets)]
    totals = {t: engine.Stats() for t in targets}
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for done, (target, stats) in enumerate(pool.map(_work, work), 1):
            totals[target].add(stats)
            figures = _figures(totals, time.perf_counter() - start, args)
            figures["complete"] = done == len(work)
            if args.json:  # after every chunk, so an interrupted long run still has its figures
                args.json.write_text(json.dumps(figures, indent=1) + "\n")
    crashes = [c for s in totals.values() for c in s.crashes.values()]
    print(json.dumps(figures, indent=1))
    for crash in crashes:
        print(
            f"\n=== {crash.target}: {crash.signature} -> {engine.save(crash, args.crash_dir)}\n{crash.detail}"
        )
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
