"""Case 7 (issue 28): the own series' audit unsharded and in N test shards run one after another
on this machine, in the same command; the ratio of the slowest shard's gate time to the unsharded
audit's, and whether the merged shards give the unsharded record (verdicts, per-test outcomes,
regressed / still-failing counts).

Every run gets a new, empty ``PATCHKIT_CACHE`` whose environment entries (the base, the sdist, the
test venv, the hook tools) are links to the shared cache: the gates, the base sides, the guide and
the plan's collection start cold in each run, as on N separate CI runners, and no venv is rebuilt.
The durations the shards balance by come from a record given with ``--durations-from`` (e.g. a cold
main job's ``reports/audit.json``) through ``patchkit ci durations`` (without it: by counts); the
shards run first, then the unsharded audit. With ``--unsharded-first`` the unsharded audit runs
first (its jobs ordered by ``--durations-from``, if given) and the shards balance by its record —
its durations and the test ids of its slow files — as CI's next sharded run would by the last
run's (the record says which). ``testshards.json`` is written after each run. Each
run's CPU seconds (its process tree, ``getrusage``) are kept beside its wall and gate seconds: on a
machine other work shares, the CPU ratio is the steadier figure.

    python -m bench.testshards --shards 4 --durations-from /work/fresh/reports/audit.json --work DIR
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.35  # the slowest shard's gate time / the unsharded audit's
SHARED = ("base", "sdist", "testenv", "tools")  # the environment, reused; everything else cold


def _cache(work: Path, name: str) -> dict[str, str]:
    """A new cache for one run: links to the shared environment entries, nothing else."""
    shared = Path(os.environ.get("PATCHKIT_CACHE") or Path.home() / ".cache" / "patchkit")
    root = work / f"cache-{name}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for entry in SHARED:
        if (shared / entry).exists():
            (root / entry).symlink_to(shared / entry)
    return {**os.environ, "PATCHKIT_CACHE": str(root)}


def _audit(series: Path, out: Path, env: dict, log: Path, shard: str | None) -> tuple[float, int, dict]:
    config = str(REPO / "patchkit.toml")
    command = [sys.executable, "-m", "patchkit", "audit", str(series), "--config", config, "--json", str(out)]
    command += ["--shard", shard] if shard else []
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("ab") as sink:
        sink.write(f"\n$ {' '.join(command)}\n".encode())
        sink.flush()
        code = subprocess.run(command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT).returncode
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    record = json.loads(out.read_text("utf-8")) if out.is_file() else {}
    record["_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)
    return wall, code, record


def gate_seconds(record: dict) -> float:
    return sum(s["seconds"] for s in record.get("stages", []) if s["name"] == "audit.gates")


def comparable(record: dict) -> dict:
    """What the merged record must share with the unsharded one: per patch its verdict, and per
    gate its status, message, and the tests gate's counts, listed test ids per category, base and
    patched counts and causes."""
    out = {}
    for pa in record["patches"]:
        gates = {}
        for g in pa["gates"]:
            d = g.get("details", {})
            gates[g["gate"]] = {"status": g["status"], "message": g.get("message"),
                                **({k: d.get(k) for k in ("counts", "tests", "base", "patched", "causes")}
                                   if g["gate"] == "tests" else {})}  # fmt: skip
        out[pa["patch"]] = {"verdict": pa["verdict"], "gates": gates}
    return {"verdict": record["verdict"], "patches": out}


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b), key=str)
            for d in differences(a.get(k), b.get(k), f"{path}.{k}")
        ]
    return [] if a == b else [f"{path}: {str(a)[:200]} != {str(b)[:200]}"]


def counts(record: dict) -> dict:
    wanted = ("regressed", "still-failing")
    return {pa["patch"]: {c: n for c, n in g["details"].get("counts", {}).items() if c in wanted}
            for pa in record["patches"] for g in pa["gates"] if g["gate"] == "tests"}  # fmt: skip


def run(shards: int, work: Path, durations_from: Path | None, reference: Path | None = None,
        reference_cpu: float | None = None, unsharded_first: bool = False) -> dict:  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    log = work / "testshards.log"
    series = work / "series"
    shutil.rmtree(series, ignore_errors=True)
    shutil.copytree(REPO / "patches", series)
    (series / "test-durations.json").unlink(missing_ok=True)
    result: dict = {"shards": shards, "uptime_before": _uptime()}
    whole: dict | None = None
    def durations(record: Path) -> None:
        subprocess.run([sys.executable, "-m", "patchkit", "ci", "durations", str(record), "--out",
                        str(series / "test-durations.json")], check=True, cwd=REPO)  # fmt: skip

    if unsharded_first and reference is None:  # it orders its jobs by --durations-from, if given
        if durations_from is not None:
            durations(durations_from)
            result["unsharded_durations_from"] = str(durations_from)
        whole = _unsharded(series, work, log, result)
        durations_from = work / "whole.json"  # the shards: by this run's record, as CI's next run
    if durations_from is not None:  # else the shards balance by counts
        durations(durations_from)
        result["durations_from"] = str(durations_from)
    parts = []
    for i in range(1, shards + 1):
        out = work / f"shard-{i}.json"
        wall, code, record = _audit(series, out, _cache(work, f"shard-{i}"), log, f"{i}/{shards}")
        parts.append(out)
        info = record.get("environment", {}).get("test_shards", {})
        result[f"shard {i}/{shards}"] = {"wall_s": round(wall, 1), "gates_s": round(gate_seconds(record), 1),
                                         "exit": code, "plan": info.get("plan"), "split": info.get("split"),
                                         "cpu_s": record["_cpu_s"],
                                         "uptime_after": _uptime()}  # fmt: skip
        (work / "testshards.json").write_text(json.dumps(result, indent=1))  # so far
    if whole is None and reference is None:
        whole = _unsharded(series, work, log, result)
    elif whole is None and reference is not None:  # an unsharded record from elsewhere (said: not this run)
        whole = json.loads(reference.read_text("utf-8"))
        result["unsharded"] = {"record": str(reference), "gates_s": round(gate_seconds(whole), 1),
                               "cpu_s": reference_cpu, "note": "not run by this command"}  # fmt: skip
    (work / "testshards.json").write_text(json.dumps(result, indent=1))
    slowest = max(result[f"shard {i}/{shards}"]["gates_s"] for i in range(1, shards + 1))
    result["ratio_slowest_shard_to_unsharded_gates"] = round(slowest / result["unsharded"]["gates_s"], 3)
    result["target"] = f"<= {TARGET}"
    if result["unsharded"].get("cpu_s"):
        top = max(result[f"shard {i}/{shards}"]["cpu_s"] for i in range(1, shards + 1))
        result["ratio_largest_shard_cpu_to_unsharded_cpu"] = round(top / result["unsharded"]["cpu_s"], 3)
    result["verdict"] = "PASS" if result["ratio_slowest_shard_to_unsharded_gates"] <= TARGET else "MISS"
    from patchkit.commands.report import load, merge

    merged = json.loads(json.dumps(merge([load(p) for p in parts]).to_dict()))
    (work / "merged.json").write_text(json.dumps(merged, indent=1))
    result["merged_differences"] = differences(comparable(merged), comparable(whole))
    result["regressed_still_failing"] = {"unsharded": counts(whole), "merged": counts(merged)}
    return result


def _unsharded(series: Path, work: Path, log: Path, result: dict) -> dict:
    wall, code, whole = _audit(series, work / "whole.json", _cache(work, "whole"), log, None)
    result["unsharded"] = {"wall_s": round(wall, 1), "gates_s": round(gate_seconds(whole), 1), "exit": code,
                           "cpu_s": whole["_cpu_s"], "uptime_after": _uptime()}  # fmt: skip
    return whole


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-testshards"))
    parser.add_argument("--durations-from", type=Path, default=None)
    parser.add_argument(
        "--unsharded-record", type=Path, default=None, help="skip the unsharded run: use this"
    )
    parser.add_argument("--unsharded-cpu", type=float, default=None, help="its CPU seconds, if known")
    parser.add_argument("--unsharded-first", action="store_true",
                        help="run the unsharded audit first; the shards balance by its record")  # fmt: skip
    args = parser.parse_args(argv)
    result = run(args.shards, args.work.resolve(), args.durations_from, args.unsharded_record,
                 args.unsharded_cpu, args.unsharded_first)  # fmt: skip
    text = json.dumps(result, indent=1)
    (args.work / "testshards.json").write_text(text)
    print(text)
    return 0 if result["verdict"] == "PASS" and not result["merged_differences"] else 1


if __name__ == "__main__":
    sys.exit(main())
