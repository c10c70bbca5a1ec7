"""The re-audit after an edit of one line of one patch: what a maintainer waits for in the edit loop.

In a checkout whose series has been audited once with ``--select S`` (its cache warm), each edit
rewrites one added line of the patch (``--old``, the line as the patch adds it, without the ``+``)
into one of ``--new`` (one edit per value, each a new revision of the patch, in turn) and runs the
installed ``patchkit audit --select S`` there, timed. Per edit it reports the wall seconds and, from
the audit record, per patch: whether its tests gate came from the cache, how many tests ran with
the patch, how many outcomes were carried from a recorded run (``testrun/carry``) or left out, and
the base side's run / cached / carried counts. The median is over the edits (each a different
revision, so none is served by the gate cache).

The baseline, in the same command (``--baseline-select``, e.g. ``upstream``): one untimed audit of
the unedited series with that selection (its cache warm, as ours was), then the edits of
``--baseline-new`` (revisions not audited before), timed the same way; the ratio of the medians.
The patch file is restored at the end.

    python -m bench.reaudit --repo DIR --patch 0001-tool-parser.patch --old LINE --new A --new B \
        [--select affected] [--baseline-select upstream --baseline-new C --baseline-new D] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def edit(text: str, old: str, new: str) -> str:
    """The patch with its one added line ``+old`` rewritten to ``+new`` (hunk counts unchanged)."""
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if line == "+" + old]
    if len(hits) != 1:
        raise SystemExit(f"--old must name exactly one added line of the patch; found {len(hits)}")
    lines[hits[0]] = "+" + new
    return "\n".join(lines)


def summarise(record: dict) -> dict:
    """Per patch: the tests gate's cache flag and what each side ran, carried, left out."""
    out = {}
    for patch in record.get("patches", []):
        gate = next((g for g in patch["gates"] if g["gate"] == "tests"), None)
        if gate is None:
            continue
        details = gate.get("details", {})
        groups = details.get("groups") or {}
        demand = details.get("base_on_demand") or {}
        out[patch["patch"]] = {
            "status": gate["status"],
            "cached": bool(gate.get("cached")),
            # run here with the patch: both groups (affected first, then the rest), carried ones not
            "patched_ran": groups["first"] + groups.get("rest", 0)
            if "first" in groups
            else sum((details.get("patched") or {}).values()),
            "patched_carried": groups.get("carried", 0),
            "left_out": groups.get("left_out", 0),
            "base_run": demand.get("run", 0),
            "base_cached": demand.get("cached", 0),
            "base_carried": demand.get("carried", 0),
            "counts": details.get("counts", {}),
            "seconds": round(gate.get("duration", 0.0), 1),
        }
    return out


def run(repo: Path, select: str, patchkit: str, out: Path) -> tuple[float, int, dict]:
    started = time.perf_counter()
    proc = subprocess.run([patchkit, "audit", "--select", select, "--json", str(out)], cwd=repo,
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - started
    record = json.loads(out.read_text("utf-8")) if out.is_file() else {}
    return seconds, proc.returncode, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reaudit", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--patch", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", action="append", required=True)
    parser.add_argument("--select", default="affected")
    parser.add_argument("--baseline-select", default=None)
    parser.add_argument("--baseline-new", action="append", default=[])
    parser.add_argument("--patchkit", default=shutil.which("patchkit") or "patchkit")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.baseline_select and not args.baseline_new:
        parser.error("--baseline-select needs --baseline-new (its own revisions)")
    target = args.repo / "patches" / args.patch
    original = target.read_text("utf-8")
    results: dict[str, list[dict]] = {}
    plan = [(args.select, args.new)]
    if args.baseline_select:
        plan.append((args.baseline_select, args.baseline_new))
    try:
        for n, (select, values) in enumerate(plan):
            if n:  # the baseline's cache warm with the unedited series, as ours was
                target.write_text(original, "utf-8")
                warm = args.repo / "reports" / "reaudit-warm.json"
                seconds, code, _ = run(args.repo, select, args.patchkit, warm)
                print(f"{select:9} warm-up (unedited, untimed in the medians): {seconds:.1f} s exit {code}",
                      file=sys.stderr)  # fmt: skip
            for k, value in enumerate(values):
                target.write_text(edit(original, args.old, value), "utf-8")
                out = args.repo / "reports" / f"reaudit-{select}-{k}.json"
                seconds, code, record = run(args.repo, select, args.patchkit, out)
                row = {"edit": value, "seconds": round(seconds, 1), "exit": code,
                       "verdict": record.get("verdict"), "patches": summarise(record)}  # fmt: skip
                results.setdefault(select, []).append(row)
                _show(select, k, row)
    finally:
        target.write_text(original, "utf-8")
    summary: dict = {s: {"median_s": statistics.median(r["seconds"] for r in rows), "runs": len(rows)}
                     for s, rows in results.items()}  # fmt: skip
    if args.baseline_select:
        ours, base = summary[args.select]["median_s"], summary[args.baseline_select]["median_s"]
        summary["ratio"] = round(ours / base, 3) if base else None
    for select, s in summary.items():
        print(f"{select}: {s}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": results}, indent=2), "utf-8")
    return 0


def _show(select: str, k: int, row: dict) -> None:
    print(f"{select:9} edit {k + 1}: {row['seconds']:7.1f} s exit {row['exit']} verdict {row['verdict']}",
          file=sys.stderr)  # fmt: skip
    for name, p in row["patches"].items():
        print(f"    {name:32} {'cached' if p['cached'] else 'ran':6} patched ran {p['patched_ran']:4} "
              f"carried {p['patched_carried']:4} left out {p['left_out']:4} | base run {p['base_run']:3} "
              f"cached {p['base_cached']:3} carried {p['base_carried']:3} | {p['seconds']:6.1f} s",
              file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
