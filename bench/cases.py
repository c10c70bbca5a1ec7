"""The benchmark cases: each measures patchkit against a named baseline in the same run."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import synth
from bench.measure import CommandFailed, Samples, growth_exponent, measure_pair


@dataclass
class CaseResult:
    """One row of the table: candidate median, baseline median, their ratio, and the target."""

    case: str
    name: str
    candidate: Samples | None = None
    baseline_name: str = ""
    baseline: Samples | None = None
    target: str = ""
    verdict: str | None = None  # PASS / MISS, None when no target applies
    unavailable: str | None = None  # "not available: why" instead of a number
    extra: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.candidate is None or self.baseline is None or self.baseline.median <= 0:
            return None
        return self.candidate.median / self.baseline.median

    def to_dict(self) -> dict:
        return {
            "case": self.case,
            "name": self.name,
            "available": self.unavailable is None,
            "reason": self.unavailable,
            "samples_s": self.candidate.to_dict()["samples_s"] if self.candidate else None,
            "median_s": round(self.candidate.median, 4) if self.candidate else None,
            "peak_rss_mb": round(self.candidate.peak_rss_mb, 1) if self.candidate else None,
            "baseline": self.baseline_name,
            "baseline_median_s": round(self.baseline.median, 4) if self.baseline else None,
            "ratio": round(self.ratio, 3) if self.ratio is not None else None,
            "target": self.target,
            "verdict": self.verdict,
            "candidate": self.candidate.to_dict() if self.candidate else None,
            "baseline_detail": self.baseline.to_dict() if self.baseline else None,
            **({"extra": self.extra} if self.extra else {}),
        }


# The interpreter whose patchkit is measured: the bench's own (``--editable``) or, by default, a
# venv with a regular ``pip install`` of this checkout, as users get it (bytecode compiled by pip,
# no editable-install finder in every start-up).
_PYTHON = [sys.executable]


def use_interpreter(python: str) -> None:
    _PYTHON[0] = python


def interpreter() -> str:
    return _PYTHON[0]


def regular_install(work: Path) -> tuple[str, float]:
    """``python -m venv`` + ``pip install <this checkout>`` under ``work``: its python and the seconds
    it took (outside every timed region)."""
    venv, started = work / "install-venv", time.perf_counter()
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = str(venv / "bin" / "python")
    proc = subprocess.run([python, "-m", "pip", "install", "-q", str(root)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install {root} failed: {proc.stderr.strip()[-300:]}")
    return python, time.perf_counter() - started


def patchkit_command() -> list[str]:
    """The installed console script beside the measured interpreter (a pyenv shim would add its
    own start-up)."""
    script = Path(interpreter()).with_name("patchkit")
    return [str(script)] if script.exists() else [interpreter(), "-m", "patchkit"]


def git_env(work: Path) -> dict:
    """git never looks above the work dir, so ``git apply`` can't mistake an outer repo for the tree."""
    return {**os.environ, "GIT_CEILING_DIRECTORIES": str(work), "GIT_CONFIG_NOSYSTEM": "1"}


def replay_root(replay: Path, base: Path) -> str:
    """'vllm' when the replay's paths are relative to the package (like opt21-25), else '.'."""
    for line in replay.read_text("utf-8", errors="replace").splitlines():
        if line.startswith("--- a/"):
            rel = line[6:].strip()
            return "." if (base / rel).is_file() else "vllm"
    return "."


def _fresh_copy(source: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, symlinks=True)


def _git_apply_script(replay: Path, root: str, tree: Path, check_only: bool = False) -> list[str]:
    """What a human does by hand: ``git apply --check`` then ``git apply``, inside the tree."""
    directory = "" if root == "." else f" --directory={root}"
    check = f"git apply --check{directory} '{replay}'"
    return [
        "sh",
        "-c",
        f"cd '{tree}' && " + (check if check_only else f"{check} && git apply{directory} '{replay}'"),
    ]


def _guard(case: str, name: str, fn) -> CaseResult:
    try:
        return fn()
    except CommandFailed as exc:
        return CaseResult(case, name, unavailable=f"failed: {exc}")


# -- case 1: parse + split + proof ------------------------------------------------------------------


def split_case(
    case: str,
    name: str,
    replay: Path,
    base: Path,
    rules: Path | None,
    runs: int,
    work: Path,
    target: float | None,
) -> CaseResult:
    root = replay_root(replay, base)
    out, copy = work / "split-out", work / "git-apply-copy"
    command = [*patchkit_command(), "split", str(replay), "--base", str(base), "--out", str(out)]
    if rules is not None:
        command += ["--rules", str(rules)]

    def run() -> CaseResult:
        cand, baseline = measure_pair(
            command,
            _git_apply_script(replay, root, copy),
            runs,
            cwd=work,
            prepare=lambda _: shutil.rmtree(out, ignore_errors=True),
            prepare_baseline=lambda _: _fresh_copy(base, copy),
            env=git_env(work),
        )
        result = CaseResult(case, name, cand, "git apply --check + git apply (whole replay)", baseline)
        if target is not None:
            result.target = f"median <= {target:g} s"
            result.verdict = "PASS" if cand.median <= target else "MISS"
        return result

    work.mkdir(parents=True, exist_ok=True)
    result = _guard(case, name, run)
    shutil.rmtree(copy, ignore_errors=True)
    return result


def synthetic_cases(
    sizes: list[int], runs: int, work: Path, progress: Callable[[CaseResult], None] = lambda _: None
) -> tuple[list[CaseResult], dict]:
    """One split case per size, then the growth exponent of the medians against the size."""
    results, shapes = [], {}
    for size in sizes:
        replay = synth.generate(work / f"synth-{size}x", scale=size)
        shapes[size] = replay.to_dict()
        target = 20.0 if size == 100 else None
        result = split_case(
            "1",
            f"split+proof synthetic {size}x",
            replay.mbox,
            replay.base,
            replay.rules,
            runs,
            work / f"run-{size}x",
            target,
        )
        result.extra = {
            "size": size,
            "commits": replay.commits,
            "files": replay.files,
            "hunks": replay.hunks,
            "added_lines": replay.added,
        }
        results.append(result)
        progress(result)
    measured = [(r.extra["size"], r.candidate.median) for r in results if r.candidate]
    growth = {"exponent": None, "segments": {}}
    if len(measured) >= 2:
        growth["exponent"] = round(growth_exponent(*zip(*measured)), 3)
        for (s0, t0), (s1, t1) in zip(measured, measured[1:]):
            growth["segments"][f"{s0}x->{s1}x"] = round(growth_exponent([s0, s1], [t0, t1]), 3)
        growth["target"] = "exponent <= 1.2"
        growth["verdict"] = "PASS" if growth["exponent"] <= 1.2 else "MISS"
    return results, {"growth": growth, "shapes": shapes}


# -- case 2: apply --------------------------------------------------------------------------------


def _site_packages(base: Path, dest: Path) -> Path:
    """A site-packages dir holding base/vllm plus a vllm dist-info whose RECORD is true."""
    _fresh_copy(base / "vllm", dest / "vllm")
    info = dest / "vllm-0.0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.0\n", encoding="utf-8")
    rows = []
    for path in sorted((dest / "vllm").rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{path.relative_to(dest).as_posix()},sha256={digest},{len(data)}\n")
    rows += ["vllm-0.0.0.dist-info/METADATA,,\n", "vllm-0.0.0.dist-info/RECORD,,\n"]
    (info / "RECORD").write_text("".join(rows), encoding="utf-8")
    return dest


def available(verb: str) -> str | None:
    proc = subprocess.run([*patchkit_command(), verb, "--help"], capture_output=True, text=True)
    if proc.returncode != 0:
        return (
            f"`patchkit {verb} --help` exits {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-160:]}"
        )
    return None


def apply_cases(runs: int, work: Path, scale: int = 1) -> list[CaseResult]:
    """apply --check and apply of a split series to a checkout and a site-packages tree vs git apply."""
    names = [f"apply{flag} -> {kind}" for kind in ("checkout", "site-packages") for flag in (" --check", "")]
    reason = available("apply")
    if reason:
        return [CaseResult("2", n, unavailable=f"not available: {reason}") for n in names]
    replay = synth.generate(work / f"synth-{scale}x", scale=scale)
    series = work / "apply-series"
    split = [
        *patchkit_command(),
        "split",
        str(replay.mbox),
        "--base",
        str(replay.base),
        "--rules",
        str(replay.rules),
        "--out",
        str(series),
    ]
    proc = subprocess.run(split, capture_output=True, text=True)
    if proc.returncode != 0:
        return [
            CaseResult("2", n, unavailable=f"not available: split failed: {proc.stderr[-160:]}")
            for n in names
        ]
    patches = sorted(series.glob("*.patch"))
    whole = work / "apply-series.diff"  # the same diff, concatenated, for git
    whole.write_bytes(b"".join(p.read_bytes() for p in patches))
    return [
        _apply_case(kind, check, series, whole, replay.base, runs, work)
        for kind in ("checkout", "site-packages")
        for check in (True, False)
    ]


def _apply_case(
    kind: str, check: bool, series: Path, whole: Path, base: Path, runs: int, work: Path
) -> CaseResult:
    """One target and mode: patchkit on a fresh tree per run, git on a fresh copy per run."""
    name = f"apply{' --check' if check else ''} -> {kind}"
    tree, git_tree = work / f"apply-{kind}", work / f"apply-{kind}-git"
    if kind == "checkout":
        where = ["--target", "checkout", "--path", str(tree)]
    else:
        where = ["--target", "site-packages", "--site-packages", str(tree)]
    command = [*patchkit_command(), "apply", str(series), *where, *(["--check"] if check else [])]
    git = _git_apply_script(whole, ".", git_tree, check_only=check)  # series paths are repo-rooted

    def prepare(_: int) -> None:
        shutil.rmtree(tree, ignore_errors=True)
        _fresh_copy(base, tree) if kind == "checkout" else _site_packages(base, tree)

    def run() -> CaseResult:
        cand, baseline = measure_pair(
            command,
            git,
            runs,
            cwd=work,
            prepare=prepare,
            prepare_baseline=lambda _: _fresh_copy(base, git_tree),
            env=git_env(work),
        )
        label = f"bare git apply{' --check' if check else ''} of the same diff"
        result = CaseResult("2", name, cand, label, baseline)
        if check:
            result.target = "ratio <= 10x"
            result.verdict = "PASS" if (result.ratio or 0) <= 10 else "MISS"
        return result

    result = _guard("2", name, run)
    shutil.rmtree(tree, ignore_errors=True)
    shutil.rmtree(git_tree, ignore_errors=True)
    return result


# -- case 3: start-up -----------------------------------------------------------------------------


def startup_cases(runs: int, work: Path) -> list[CaseResult]:
    baseline = [interpreter(), "-c", "pass"]
    results = []
    help_run = lambda: _startup("patchkit --help", [*patchkit_command(), "--help"], baseline, runs, work)  # noqa: E731
    result = _guard("3", "patchkit --help", help_run)
    if result.candidate:
        result.target = "median <= 0.15 s"
        result.verdict = "PASS" if result.candidate.median <= 0.15 else "MISS"
    results.append(result)
    reason = available("status")
    if reason:
        results.append(CaseResult("3", "patchkit status (no-op)", unavailable=f"not available: {reason}"))
        return results
    empty = work / "status-empty-checkout"
    (empty / "vllm").mkdir(parents=True, exist_ok=True)
    status = [*patchkit_command(), "status", "--target", "checkout", "--path", str(empty)]
    results.append(
        _guard(
            "3",
            "patchkit status (no-op)",
            lambda: _startup("patchkit status (no-op)", status, baseline, runs, work),
        )
    )
    return results


def _startup(name: str, command: list[str], baseline: list[str], runs: int, work: Path) -> CaseResult:
    cand, base = measure_pair(command, baseline, runs, cwd=work)
    return CaseResult("3", name, cand, "python -c pass", base)
