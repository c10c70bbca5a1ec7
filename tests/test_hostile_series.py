"""Hostile series dirs (issue 26): a series file or patch that is a FIFO, a link to /dev/zero, a
file past the size cap, a split.json of 100,000 nested brackets — each one line, exit 2, within
bounded time (20 s) and memory (address space capped at 2 GiB), nothing written outside the
target. status/apply: a file vanishing mid-read is drift; a refused apply leaves no trace."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.apply import plan as apply_plan
from patchkit.apply import target as apply_target

ROOT = Path(__file__).resolve().parents[1]
APPLY = ROOT / "tests" / "fixtures" / "apply"
REBASE = ROOT / "tests" / "fixtures" / "rebase"
SECONDS = 20
MEMORY = 2 << 30


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def patchkit(*args: str, cwd: Path) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "patchkit", *args], cwd=cwd, capture_output=True,
                              text=True, timeout=SECONDS, preexec_fn=_limits,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"patchkit {args[0]} hung past {SECONDS} s")
    return proc.returncode, proc.stderr + proc.stdout, time.monotonic() - started


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def hostile_series(tmp_path: Path, case: str) -> Path:
    series = tmp_path / "series"
    shutil.copytree(APPLY / "series", series)
    if case == "series-fifo":
        (series / "series").unlink()
        os.mkfifo(series / "series")
    elif case == "series-dev-zero":
        (series / "series").unlink()
        os.symlink("/dev/zero", series / "series")
    elif case == "patch-fifo":
        (series / "0002-envs.patch").unlink()
        os.mkfifo(series / "0002-envs.patch")
    elif case == "patch-dev-zero":
        (series / "0002-envs.patch").unlink()
        os.symlink("/dev/zero", series / "0002-envs.patch")
    elif case == "patch-too-large":
        with open(series / "0002-envs.patch", "r+b") as handle:
            handle.truncate(300 << 20)  # sparse: 300 MiB of zeros
    elif case == "split-json-nested":
        (series / "split.json").write_text("[" * 100000 + "]" * 100000)
    elif case == "split-json-fifo":
        os.mkfifo(series / "split.json")
    return series


CASES = ["series-fifo", "series-dev-zero", "patch-fifo", "patch-dev-zero", "patch-too-large",
         "split-json-nested", "split-json-fifo"]  # fmt: skip


PAIRS = [
    (verb, case)
    for verb in ("apply", "rebase")
    for case in CASES
    if verb == "rebase" or not case.startswith("split-json")
]  # apply to a checkout reads no split.json


@pytest.mark.parametrize(("verb", "case"), PAIRS)
def test_a_hostile_series_is_one_line_exit_2(tmp_path: Path, case: str, verb: str) -> None:
    series = hostile_series(tmp_path, case)
    target = tmp_path / "target"
    shutil.copytree(APPLY / "base", target)
    before_tmp, before_target = listing(tmp_path), listing(target)
    if verb == "apply":
        args = ["apply", str(series), "--target", "checkout", "--path", str(target)]
    else:
        args = ["rebase", str(series), "--from-base", str(APPLY / "base"), "--to-base", str(target), "--out",
                str(tmp_path / "out")]  # fmt: skip
    if case.startswith("split-json"):  # the old base from split.json: it must be read
        args = ["rebase", str(series), "--to-base", str(target), "--out", str(tmp_path / "out")]
    code, said, seconds = patchkit(*args, cwd=tmp_path)
    lines = [line for line in said.strip().splitlines() if line.startswith("patchkit:")]
    assert code == 2 and "Traceback" not in said and len(lines) == 1, said
    assert seconds < SECONDS
    assert listing(target) == before_target and listing(tmp_path) == before_tmp


def test_a_file_vanishing_mid_read_is_drift_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "target"
    shutil.copytree(APPLY / "base", target)
    chosen = apply_target.checkout_target(target)
    real_lstat = os.lstat

    def lstat_then_editor_removes(path, *args, **kwargs):
        info = real_lstat(path, *args, **kwargs)
        reader = sys._getframe(1).f_code.co_name == "read_file"  # the check just before the read
        if reader and str(path).endswith("pool.py") and os.path.exists(path):
            os.unlink(path)  # an editor's save-by-rename, between the check and the read
        return info

    monkeypatch.setattr(apply_target.os, "lstat", lstat_then_editor_removes)
    state = {"files": {"vllm/pool.py": {"post": "0" * 64}}}
    problems = apply_plan.drift(chosen, state)
    assert problems and "vllm/pool.py" in problems[0] and "now absent" in problems[0]


def test_a_refused_apply_leaves_no_trace_in_the_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    shutil.copytree(APPLY / "base", target)
    (target / "vllm" / "pool.py").write_text("something else entirely\n")
    before = listing(target)
    code, said, _ = patchkit("apply", str(APPLY / "series"), "--target", "checkout", "--path", str(target),
                             cwd=tmp_path)  # fmt: skip
    assert code == 1 and "Traceback" not in said, said
    assert listing(target) == before  # no .patchkit/lock, no .patchkit/base/
