"""``python -m bench``: run the cases, print a table of medians and ratios, write the JSON record.

Every figure is a median over ``--runs`` subprocess runs, printed next to the median of a baseline
measured in the same run (interleaved), and the ratio between them; targets say PASS or MISS.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import audit_case, cases, hotpath, mainjob, testfloor
from bench.cases import CaseResult

ALL_CASES = ("split", "apply", "startup", "audit")
ON_REQUEST = ("mainjob", "testfloor")  # minutes of every core: only when asked for


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--replay", type=Path, help="a real replay (mbox) to split, e.g. opt21-25")
    parser.add_argument("--base", type=Path, help="the base tree the --replay applies to")
    parser.add_argument("--sizes", default="1,10,100", help="synthetic scales (default 1,10,100)")
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (default 5)")
    parser.add_argument("--json", type=Path, dest="json_out", help="write the JSON record here")
    parser.add_argument("--quick", action="store_true", help="runs=3, sizes 1,10 (no 100x)")
    known = ",".join(ALL_CASES + ON_REQUEST)
    parser.add_argument(
        "--cases", default=",".join(ALL_CASES), help=f"subset of {known} (default: all but mainjob)"
    )
    parser.add_argument(
        "--audit-json",
        type=Path,
        help="testfloor: the main job's `patchkit audit --json` (default: run it here)",
    )
    parser.add_argument("--work", type=Path, help="scratch dir (default: a temp dir, removed after)")
    parser.add_argument(
        "--editable",
        action="store_true",
        help="measure this interpreter's patchkit as it is (default: a fresh venv with a regular "
        "`pip install` of this checkout, as users run it)",
    )
    args = parser.parse_args(argv)
    if (args.replay is None) != (args.base is None):
        parser.error("--replay and --base go together")
    if args.quick:
        args.runs, args.sizes = min(args.runs, 3), "1,10"
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(args.cases) - set(ALL_CASES + ON_REQUEST)
    if unknown or args.runs < 1:
        parser.error(f"unknown case(s) {sorted(unknown)}" if unknown else "--runs must be >= 1")
    return args


def run_cases(args: argparse.Namespace, work: Path) -> tuple[list[CaseResult], dict]:
    results: list[CaseResult] = []
    notes: dict = {"install": "the running interpreter's patchkit (--editable)"}
    if not args.editable and set(args.cases) - set(ON_REQUEST):  # the main job makes its own install
        python, seconds = cases.regular_install(work)
        cases.use_interpreter(python)
        notes["install"] = f"regular `pip install` of this checkout, new venv ({seconds:.0f} s, untimed)"
        print(f"[bench] measuring {python} ({notes['install']})", file=sys.stderr, flush=True)

    def add(new: list[CaseResult]) -> None:
        for result in new:
            progress(result)
        results.extend(new)

    if "split" in args.cases:
        if args.replay is not None:
            name = f"split+proof {args.replay.name}"
            real = args.replay.resolve(), args.base.resolve()
            add([cases.split_case("1", name, *real, None, args.runs, work / "real", 1.0)])
        synthetic, notes["synthetic"] = cases.synthetic_cases(args.sizes, args.runs, work, progress)
        results.extend(synthetic)
    if "apply" in args.cases:
        if args.replay is not None:
            add([hotpath.real_apply_check_case(args.replay.resolve(), args.base.resolve(), args.runs, work)])
        add(cases.apply_cases(args.runs, work))
    if "startup" in args.cases:
        startup = cases.startup_cases(args.runs, work)
        imports = hotpath.startup_imports(args.runs, work)
        for result in startup:
            result.extra["imports"] = imports.get(result.name)
        add(startup)
    if "audit" in args.cases:
        add(audit_case.audit_cases(args.runs, work))
    if "mainjob" in args.cases:
        add(mainjob.mainjob_cases(args.runs, work))
    if "testfloor" in args.cases:
        add(testfloor.testfloor_cases(args.runs, work, args.audit_json))
    return results, notes


def progress(result: CaseResult) -> None:
    """One line per finished case on stderr, so a long run shows where it is."""
    ratio = f", ratio {result.ratio:.2f}x" if result.ratio is not None else ""
    figure = result.unavailable or f"median {result.candidate.median:.3f} s{ratio}"
    print(f"[bench] {result.case} {result.name}: {figure}", file=sys.stderr, flush=True)


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.3f}{unit}"


def render_table(results: list[CaseResult], notes: dict, runs: int) -> str:
    header = ("case", "measurement", "median s", "peak MB", "baseline", "base med s", "ratio", "target", "")
    rows = []
    for r in results:
        if r.unavailable:
            rows.append((r.case, r.name, r.unavailable, "", "", "", "", r.target, ""))
            continue
        rows.append(
            (
                r.case,
                r.name,
                _fmt(r.candidate.median),
                f"{r.candidate.peak_rss_mb:.0f}",
                r.baseline_name,
                _fmt(r.baseline.median if r.baseline is not None else None),
                _fmt(r.ratio, "x"),
                r.target,
                r.verdict or "",
            )
        )
    growth = notes.get("synthetic", {}).get("growth", {})
    if growth.get("exponent") is not None:
        segments = ", ".join(f"{k} {v}" for k, v in growth["segments"].items())
        rows.append(
            (
                "1",
                f"growth exponent ({segments})",
                f"{growth['exponent']:.2f}",
                "",
                "log-log slope",
                "",
                "",
                growth["target"],
                growth["verdict"],
            )
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"medians over {runs} run(s); ratio = median / baseline median (same run, interleaved); "
             f"patchkit: {notes.get('install', '?')}"]  # fmt: skip
    for row in [header, tuple("-" * w for w in widths), *rows]:
        lines.append("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def render_notes(results: list[CaseResult]) -> str:
    """Under the table: import profiles of the hot paths and the cold main job's stage table."""
    lines = []
    for r in results:
        imports = r.extra.get("imports")
        if imports:
            top = ", ".join(f"{k} {v}" for k, v in imports["by_package_ms"].items())
            lines.append(f"imports of {r.name}: {imports['total_ms']} ms summed self time (median), "
                         f"{imports['modules']} modules; by package (ms): {top}")  # fmt: skip
        if r.extra.get("floor_s") is not None:
            lines.append(f"{r.name}: {r.extra['note']}; per patch {r.extra['per_patch']}; "
                         f"pytest --durations witness {r.extra['pytest_durations_witness']}; "
                         f"probes {r.extra['probe']}")  # fmt: skip
        if r.extra.get("stages"):
            lines += [f"{r.name}: {r.extra['note']}; steps {r.extra['steps_s']}",
                      mainjob.stage_table(r.extra["stages"])]  # fmt: skip
    return "\n".join(lines)


def record(args: argparse.Namespace, results: list[CaseResult], notes: dict, seconds: float) -> dict:
    return {
        "tool": "patchkit bench",
        "runs": args.runs,
        "sizes": args.sizes,
        "replay": str(args.replay) if args.replay else None,
        "base": str(args.base) if args.base else None,
        "python": sys.version.split()[0],
        "install": notes.get("install"),
        "machine": {"platform": platform.platform(), "cpus": _cpus()},
        "wall_s": round(seconds, 1),
        "cases": [r.to_dict() for r in results],
        **notes,
    }


def _cpus() -> int | None:
    import os

    return os.cpu_count()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results, notes = run_cases(args, work.resolve())
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(render_table(results, notes, args.runs))
    print(render_notes(results))
    if args.json_out is not None:
        data = record(args, results, notes, time.perf_counter() - started)
        args.json_out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"JSON: {args.json_out}")
    return 0
