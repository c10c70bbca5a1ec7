"""Case 5: the README's main job — ``pip install . && patchkit audit`` in a fresh clone — cold (empty
patchkit, uv and pip caches) once, then the warm re-run ``--runs`` times.

The cold run downloads the vLLM sdist, builds the test venv (torch, vLLM's requirements) and runs
the upstream tests of every patch on both sides: minutes of two cores, so it runs once (its figure
is one sample, not a median) and only when asked for (``--cases mainjob``). Its stage table comes
from the audit's own JSON (``stages``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.cases import CaseResult, _guard
from bench.measure import Samples, measure_pair

REPO = Path(__file__).resolve().parents[1]
COLD_TARGET_S = 300.0
WARM_TARGET_S = 2.0


def _fresh_env(work: Path) -> dict[str, str]:
    caches = {"PATCHKIT_CACHE": "patchkit-cache", "UV_CACHE_DIR": "uv-cache", "PIP_CACHE_DIR": "pip-cache"}
    env = dict(os.environ)
    for variable, name in caches.items():
        path = work / name
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        env[variable] = str(path)
    env.pop("VIRTUAL_ENV", None)
    # as in a fresh shell that activated only the new venv: no other venv's tools (ruff, uv) on PATH
    keep = [
        d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d).parent / "pyvenv.cfg").exists()
    ]
    env["PATH"] = os.pathsep.join([str(work / "venv" / "bin"), *keep])
    return env


def _timed(command: list[str], cwd: Path, env: dict, log: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with log.open("ab") as out:
        code = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.perf_counter() - started, code


def mainjob_cases(runs: int, work: Path) -> list[CaseResult]:
    work = work / "mainjob"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    clone, venv, log = work / "clone", work / "venv", work / "mainjob.log"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)  # the committed HEAD
    env = _fresh_env(work)
    patchkit = str(venv / "bin" / "patchkit")

    install_s, code = _timed([sys.executable, "-m", "venv", str(venv)], work, env, log)
    pip_s, code = _timed([str(venv / "bin" / "pip"), "install", "-q", "."], clone, env, log)
    if code != 0:
        return [
            CaseResult("5", "main job (cold)", unavailable=f"failed: pip install . exit {code}; see {log}")
        ]
    audit_s, code = _timed([patchkit, "audit"], clone, env, log)
    report = clone / "reports" / "audit.json"
    if code not in (0, 1) or not report.is_file():
        return [
            CaseResult("5", "main job (cold)", unavailable=f"failed: patchkit audit exit {code}; see {log}")
        ]
    data = json.loads(report.read_text("utf-8"))
    cold = Samples(["python -m venv", "pip install .", "patchkit audit"], wall=[install_s + pip_s + audit_s],
                   cpu=[0.0], max_rss_kb=[0])  # fmt: skip
    result = CaseResult("5", "main job (cold: venv + pip install . + patchkit audit)", cold)
    result.target = f"one run <= {COLD_TARGET_S:g} s"
    result.verdict = "PASS" if cold.median <= COLD_TARGET_S else "MISS"
    result.extra = {
        "note": "one cold run (empty patchkit, uv and pip caches): a sample, not a median",
        "steps_s": {
            "venv": round(install_s, 1),
            "pip install .": round(pip_s, 1),
            "audit": round(audit_s, 1),
        },
        "audit_exit": code,
        "verdicts": {p["patch"]: p["verdict"] for p in data["patches"]},
        "stages": data.get("stages", []),
    }
    return [result, warm_case(work, runs)]


def warm_case(work: Path, runs: int) -> CaseResult:
    """The warm re-run of a finished cold run in ``work`` (its clone, venv and caches), ``runs`` times."""
    env = {**os.environ, **{v: str(work / n) for v, n in
                            (("PATCHKIT_CACHE", "patchkit-cache"), ("UV_CACHE_DIR", "uv-cache"),
                             ("PIP_CACHE_DIR", "pip-cache"))}}  # fmt: skip
    patchkit, clone = str(work / "venv" / "bin" / "patchkit"), work / "clone"
    warm = CaseResult("5", "main job warm re-run (patchkit audit)")

    def run_warm() -> CaseResult:
        cand, baseline = measure_pair([patchkit, "audit"], [patchkit, "--help"], runs, cwd=clone, env=env,
                                      ok_codes=(0, 1))  # fmt: skip
        warm.candidate, warm.baseline_name, warm.baseline = cand, "patchkit --help", baseline
        warm.target = f"median <= {WARM_TARGET_S:g} s"
        warm.verdict = "PASS" if cand.median <= WARM_TARGET_S else "MISS"
        return warm

    return _guard("5", warm.name, run_warm)


def stage_table(stages: list[dict]) -> str:
    """The cold run's stages as text: name, detail, start and seconds (stages may overlap)."""
    rows = [(s["name"], s["detail"], f"{s['start']:.1f}", f"{s['seconds']:.1f}") for s in stages
            if s["name"] != "tests.materialise"]  # fmt: skip
    header = ("stage", "detail", "start s", "seconds")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])
