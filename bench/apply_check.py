"""``patchkit apply --check`` of a split series against ``git apply --check`` of the same patches.

    python -m bench.apply_check SERIES_DIR TREE --patchkit before=/venv-a/bin/patchkit \
        --patchkit after=/venv-b/bin/patchkit --runs 15 [--cwd DIR]

Every run of every candidate is interleaved with a run of git (git, candidate, git, candidate ...),
each in its own process; the figures are medians (wall, and user+sys CPU of the process and its
children) and each candidate's ratio is its median over git's median of the same command.
``--cwd`` is where patchkit runs (issue 45 asks for this repository's root, which holds a
patchkit.toml of its own). git reads the series' patches concatenated in the
series order, written once before the first run (``git apply`` of several files does not carry one
patch's result into the next).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench.measure import run_once


def _concatenated(series: Path, scratch: Path) -> Path:
    names = [line.strip() for line in (series / "series").read_text("utf-8").splitlines()]
    whole = scratch / "series.patch"
    whole.write_bytes(b"".join((series / name).read_bytes() for name in names if name and name[0] != "#"))
    return whole


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apply_check", description=__doc__.split("\n")[0])
    parser.add_argument("series", type=Path)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--patchkit", action="append", required=True, help="LABEL=PATH of a console script")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cwd", type=Path, default=Path.cwd())
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    candidates = dict(item.split("=", 1) for item in args.patchkit)
    tree, series = args.tree.resolve(), args.series.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-apply-check-") as scratch:
        whole = _concatenated(series, Path(scratch))
        git = ["git", "-C", str(tree), "apply", "--check", str(whole)]
        runs: dict[str, list[tuple]] = {label: [] for label in candidates}  # (wall, cpu) per run
        gits: dict[str, list[tuple]] = {label: [] for label in candidates}
        command = ["apply", str(series), "--target", "checkout", "--path", str(tree), "--check"]
        for _ in range(args.runs):
            for label, script in candidates.items():
                gits[label].append(run_once(git, args.cwd)[:2])
                runs[label].append(run_once([script, *command], args.cwd)[:2])
    result = {}
    for label in candidates:
        wall, git_wall = (statistics.median(r[0] for r in rs) for rs in (runs[label], gits[label]))
        cpu, git_cpu = (statistics.median(r[1] for r in rs) for rs in (runs[label], gits[label]))
        result[label] = {"median_s": round(wall, 4), "git_median_s": round(git_wall, 4),
                         "ratio": round(wall / git_wall, 2), "cpu_median_s": round(cpu, 4),
                         "git_cpu_median_s": round(git_cpu, 4), "cpu_ratio": round(cpu / git_cpu, 2),
                         "runs": args.runs, "samples_s": [round(r[0], 4) for r in runs[label]]}  # fmt: skip
        print(f"{label:>10}: patchkit apply --check median {wall * 1000:.1f} ms, git apply --check "
              f"median {git_wall * 1000:.1f} ms, ratio {wall / git_wall:.2f}x; CPU (user+sys) medians "
              f"{cpu * 1000:.1f} / {git_cpu * 1000:.1f} ms, ratio {cpu / git_cpu:.2f}x "
              f"({args.runs} runs, cwd {args.cwd})")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
