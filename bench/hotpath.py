"""The hot paths: ``apply --check`` of a real replay's series against bare ``git apply --check`` of the
same replay, and what each short command spends on imports (``python -X importtime``)."""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
from collections import Counter
from pathlib import Path

from bench.cases import (
    CaseResult,
    _fresh_copy,
    _git_apply_script,
    _guard,
    git_env,
    interpreter,
    patchkit_command,
    replay_root,
)
from bench.measure import measure_pair

_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def real_apply_check_case(replay: Path, base: Path, runs: int, work: Path) -> CaseResult:
    """Split the replay (untimed), then ``patchkit apply --check`` of its series to a copy of the base
    against ``git apply --check`` of the replay itself in the same copy (--check writes nothing)."""
    name = f"apply --check -> checkout ({replay.name} series)"
    series, tree = work / "real-series", work / "real-apply-tree"
    shutil.rmtree(series, ignore_errors=True)
    split = [*patchkit_command(), "split", str(replay), "--base", str(base), "--out", str(series)]
    proc = subprocess.run(split, capture_output=True, text=True)
    if proc.returncode != 0:
        return CaseResult("2", name, unavailable=f"failed: split: {proc.stderr.strip()[-160:]}")
    _fresh_copy(base, tree)
    command = [
        *patchkit_command(),
        "apply",
        str(series),
        "--target",
        "checkout",
        "--path",
        str(tree),
        "--check",
    ]
    git = _git_apply_script(replay, replay_root(replay, base), tree, check_only=True)

    def run() -> CaseResult:
        cand, baseline = measure_pair(command, git, runs, cwd=work, env=git_env(work))
        result = CaseResult("2", name, cand, "bare git apply --check of the same replay", baseline)
        result.target = "ratio <= 10x"
        result.verdict = "PASS" if (result.ratio or 0) <= 10 else "MISS"
        return result

    result = _guard("2", name, run)
    if result.candidate is not None:
        result.extra["imports"] = import_profile(command[len(patchkit_command()) :], runs, work)
    shutil.rmtree(tree, ignore_errors=True)
    return result


def import_profile(args: list[str], runs: int, cwd: Path) -> dict:
    """Median (over ``runs``) of the summed self import time, by top-level package, and the modules
    with the largest cumulative time: what ``python -X importtime`` says a command loads."""
    samples: list[dict[str, tuple[int, int]]] = []
    for _ in range(runs):
        proc = subprocess.run([interpreter(), "-X", "importtime", "-m", "patchkit", *args],
                              capture_output=True, text=True, cwd=cwd)  # fmt: skip
        rows = {}
        for line in proc.stderr.splitlines():
            if match := _IMPORT_LINE.match(line):
                rows[match.group(4)] = (int(match.group(1)), int(match.group(2)))
        samples.append(rows)
    names = set().union(*samples)
    self_us = {n: statistics.median(s.get(n, (0, 0))[0] for s in samples) for n in names}
    cum_us = {n: statistics.median(s.get(n, (0, 0))[1] for s in samples) for n in names}
    packages: Counter = Counter()
    for module, us in self_us.items():
        packages[module.split(".")[0]] += us
    return {
        "modules": len(names),
        "total_ms": round(sum(self_us.values()) / 1000, 1),
        "patchkit_modules": sorted(n for n in names if n.startswith("patchkit")),
        "by_package_ms": {p: round(us / 1000, 1) for p, us in packages.most_common(8)},
        "top_cumulative_ms": {
            n: round(cum_us[n] / 1000, 1) for n in sorted(cum_us, key=cum_us.get)[-8:][::-1]
        },
    }


def startup_imports(runs: int, work: Path) -> dict:
    """The import profiles of ``--help`` and ``status`` (no-op), for the start-up rows."""
    empty = work / "status-empty-checkout"
    (empty / "vllm").mkdir(parents=True, exist_ok=True)
    status = ["status", "--target", "checkout", "--path", str(empty)]
    commands = {"patchkit --help": ["--help"], "patchkit status (no-op)": status}
    return {label: import_profile(args, runs, work) for label, args in commands.items()}
