"""``patchkit apply`` on a checkout: all or nothing, preimage checks, path safety, reverse."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit import git
from patchkit.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "apply"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no patchkit.toml (pin version, overlays) from the repo around us


def make_checkout(tmp_path: Path, git: bool = False) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "base", tree)
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series", series)
    if git:
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
    return tree, series


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts and ".patchkit" not in p.parts
    }


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def test_apply_check_reapply_reverse(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    before = tree_digest(tree)
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree), "--check")
    assert code == 0 and "would change 4 file(s)" in out
    assert tree_digest(tree) == before

    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0, out
    assert "max(n, 0)" in (tree / "vllm/pool.py").read_text()
    assert (tree / "vllm/helpers.py").read_text().startswith('"""Pool helpers')
    assert "assert True" in (tree / "tests/test_pool.py").read_text()
    assert (tree / ".patchkit/state.json").is_file()
    assert not (tree / ".patchkit/journal.json").exists()
    applied = tree_digest(tree)

    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0 and "already applied" in out
    assert tree_digest(tree) == applied

    code, out = run("apply", "--target", "checkout", "--path", str(tree), "--reverse")
    assert code == 0, out
    after = {k: v for k, v in tree_digest(tree).items() if not k.startswith(".patchkit")}
    assert after == before
    assert not (tree / "vllm/helpers.py").exists()


def test_result_matches_git_apply(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    expected = tmp_path / "expected"
    shutil.copytree(FIXTURES / "base", expected)
    for name in ("0001-pool.patch", "0002-envs.patch"):
        subprocess.run(["git", "apply", str(series / name)], cwd=expected, check=True)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    got = {k: v for k, v in tree_digest(tree).items() if not k.startswith(".patchkit")}
    assert got == tree_digest(expected)


def test_git_checkout_keeps_state_in_git_dir(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path, git=True)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    assert (tree / ".git/patchkit/state.json").is_file()
    assert not (tree / ".patchkit").exists()


def test_preimage_mismatch_changes_nothing(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    envs = tree / "vllm/envs.py"
    envs.write_text(envs.read_text().replace('LEVEL = "info"', 'LEVEL = "debug"'))
    before = tree_digest(tree)
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 1
    assert "0002-envs.patch: vllm/envs.py: hunk #1" in out and "expected" in out and "found" in out
    assert "nothing was changed" in out
    assert tree_digest(tree) == before  # pool.py of patch 1 untouched too


def test_blob_mismatch_outside_hunks_is_a_warning_like_git(tmp_path: Path) -> None:
    """git apply ignores an ``index`` line that names another preimage while the context matches."""
    tree, series = make_checkout(tmp_path)
    pool = tree / "vllm/pool.py"
    pool.write_text(pool.read_text().replace("LIMIT = 16", "LIMIT = 32"))
    witness = tmp_path / "witness"
    shutil.copytree(tree, witness, ignore=shutil.ignore_patterns(".git"))
    for name in (series / "series").read_text().split():
        assert git.apply((series / name).read_bytes(), witness).returncode == 0
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0 and "warning: vllm/pool.py: not the preimage blob 9fc2e87" in out
    assert "LIMIT = 32" in pool.read_text()
    for path in ("vllm/pool.py", "vllm/envs.py"):
        assert (tree / path).read_bytes() == (witness / path).read_bytes()


def _series_touching(tmp_path: Path, path: str) -> Path:
    series = tmp_path / "evil"
    series.mkdir()
    (series / "series").write_text("0001-evil.patch\n")
    (series / "0001-evil.patch").write_text(
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        "@@ -0,0 +1 @@\n+pwned\n"
        "diff --git a/vllm/zzz.py b/vllm/zzz.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/vllm/zzz.py\n@@ -0,0 +1 @@\n+x = 1\n"
    )
    return series


@pytest.mark.parametrize("path", ["../outside.py", "vllm/../../outside.py", "vllm/link/x.py", "vllm/file"])
def test_path_escapes_are_refused(tmp_path: Path, path: str) -> None:
    tree, _ = make_checkout(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, tree / "vllm/link")
    os.symlink(tmp_path / "target-file", tree / "vllm/file")
    series = _series_touching(tmp_path, path)
    before = tree_digest(tree)
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 2, out
    assert "0001-evil.patch" in out
    assert tree_digest(tree) == before
    assert not (tree / "vllm/zzz.py").exists()
    assert list(outside.iterdir()) == [] and not (tmp_path / "outside.py").exists()


def test_absolute_path_refused() -> None:
    from patchkit.apply.plan import Target, safe_path
    from patchkit.errors import UserError

    target = Target("checkout", Path("/tmp/x"), Path("/tmp/x/.patchkit"))
    for rel in ("/etc/passwd", "a/./b", ".patchkit/state.json", ".git/config"):
        with pytest.raises(UserError):
            safe_path(target, rel)


def test_other_series_applied_is_refused(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    (series / "series").write_text("0001-pool.patch\n")
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 1 and "reverse it first" in out


def test_reverse_refuses_drift_unless_forced(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    before = tree_digest(tree)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    (tree / "vllm/helpers.py").write_text("edited by hand\n")
    code, out = run("apply", "--target", "checkout", "--path", str(tree), "--reverse")
    assert code == 1 and "vllm/helpers.py: changed since apply" in out
    code, out = run("apply", "--target", "checkout", "--path", str(tree), "--reverse", "--force")
    assert code == 0, out
    assert {k: v for k, v in tree_digest(tree).items() if not k.startswith(".patchkit")} == before
