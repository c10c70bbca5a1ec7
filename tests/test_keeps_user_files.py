"""Issue 14, apply side: nothing the user owns is lost — crash recovery, edits racing a write,
modes, hostile paths, site-packages byte-identity. One regression test per item of the issue."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from test_journal import Crash, digest, invoke, make_checkout
from test_sitepackages import fake_site_packages, record_ok, series_dir

from patchkit.txn import journal


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _checkout(tree: Path) -> list[str]:
    return ["--target", "checkout", "--path", str(tree)]


def _crash_at(monkeypatch: pytest.MonkeyPatch, step: str, before=None) -> None:
    def hook(name: str) -> None:
        if name == step:
            if before is not None:
                before()
            raise Crash(name)

    monkeypatch.setattr(journal, "fault_hook", hook)


def _patch(series: Path, name: str, body: str) -> None:
    (series / name).write_text(f"From: Dev <dev@example.com>\nSubject: [PATCH] {name}\n\n{body}")
    with (series / "series").open("a") as handle:
        handle.write(f"{name}\n")


# 1 -----------------------------------------------------------------------------------------------


def test_item01_recovery_keeps_edits_made_after_the_crash(tmp_path: Path, monkeypatch) -> None:
    tree, series = make_checkout(tmp_path)
    base = digest(tree)
    _crash_at(monkeypatch, "replace:3")  # helpers, pool, tests/test_pool replaced; envs not yet
    with pytest.raises(Crash):
        invoke("apply", str(series), *_checkout(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    (tree / "vllm/pool.py").write_text("# my edit of a file patchkit had replaced\n")
    (tree / "vllm/envs.py").write_text("# my edit of a file patchkit had not reached\n")
    code, out = invoke("status", *_checkout(tree))
    assert code == 1, out
    assert "vllm/pool.py: changed by someone else since the crash; kept" in out
    assert "vllm/envs.py: changed by someone else since the crash; kept" in out
    assert (tree / "vllm/pool.py").read_text().startswith("# my edit")
    assert (tree / "vllm/envs.py").read_text().startswith("# my edit")
    now = digest(tree)
    assert not (tree / "vllm/helpers.py").exists()  # patchkit's own new file: rolled back
    assert now["tests/test_pool.py"] == base["tests/test_pool.py"]
    assert not (tree / ".patchkit/journal.json").exists()


# 2 -----------------------------------------------------------------------------------------------


def test_item02_a_file_edited_between_check_and_write_aborts_the_apply(tmp_path: Path, monkeypatch) -> None:
    tree, series = make_checkout(tmp_path)
    base = digest(tree)
    edit = "# edited while patchkit was applying\n"
    monkeypatch.setattr(
        journal,
        "fault_hook",
        lambda n: (tree / "vllm/envs.py").write_text(edit) if n == "replace:1" else None,
    )
    code, out = invoke("apply", str(series), *_checkout(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    assert code == 1 and "changed while patchkit was writing" in out and "rolled back" in out, out
    assert (tree / "vllm/envs.py").read_text() == edit  # the edit is kept
    assert {k: v for k, v in digest(tree).items() if k != "vllm/envs.py"} == {
        k: v for k, v in base.items() if k != "vllm/envs.py"
    }
    code, out = invoke("status", *_checkout(tree))
    assert "nothing applied" in out and "consistent" not in out


def test_item02_a_directory_swapped_for_a_symlink_gets_no_write(tmp_path: Path, monkeypatch) -> None:
    tree, series = make_checkout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(tree / "tests/test_pool.py", outside / "test_pool.py")
    before_outside = (outside / "test_pool.py").read_bytes()

    def swap() -> None:
        shutil.rmtree(tree / "tests")
        (tree / "tests").symlink_to(outside)

    monkeypatch.setattr(journal, "fault_hook", lambda n: swap() if n == "replace:2" else None)
    code, out = invoke("apply", str(series), *_checkout(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    assert code == 1 and "symlink" in out, out
    assert (outside / "test_pool.py").read_bytes() == before_outside
    assert os.listdir(outside) == ["test_pool.py"]


# 3 -----------------------------------------------------------------------------------------------


def _mode_series(tmp_path: Path) -> tuple[Path, Path]:
    tree, series = tmp_path / "tree", tmp_path / "series"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin/run.sh").write_text("echo hi\n")
    (tree / "bin/other.txt").write_text("a\n")
    os.chmod(tree / "bin/run.sh", 0o644)
    series.mkdir()
    _patch(
        series,
        "0001-mode.patch",
        "diff --git a/bin/run.sh b/bin/run.sh\nold mode 100644\nnew mode 100755\n"
        "diff --git a/bin/other.txt b/bin/other.txt\n--- a/bin/other.txt\n+++ b/bin/other.txt\n"
        "@@ -1 +1 @@\n-a\n+b\n",
    )
    return tree, series


def test_item03_a_mode_only_change_is_rolled_back(tmp_path: Path, monkeypatch) -> None:
    tree, series = _mode_series(tmp_path)
    base = digest(tree)
    _crash_at(monkeypatch, "replace:1")
    with pytest.raises(Crash):
        invoke("apply", str(series), *_checkout(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    assert stat.S_IMODE(os.stat(tree / "bin/run.sh").st_mode) == 0o755  # the crash left it changed
    code, out = invoke("apply", *_checkout(tree), "--recover")
    assert code == 0 and "1 of 3 file(s) restored" in out, out
    assert stat.S_IMODE(os.stat(tree / "bin/run.sh").st_mode) == 0o644
    assert digest(tree) == base


# 7 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["new", "change"])
def test_item07_setuid_setgid_sticky_are_never_set(tmp_path: Path, how: str) -> None:
    tree, series = tmp_path / "tree", tmp_path / "series"
    tree.mkdir()
    series.mkdir()
    (tree / "tool").write_text("x\n")
    if how == "new":
        body = (
            "diff --git a/suid b/suid\nnew file mode 104755\n--- /dev/null\n+++ b/suid\n@@ -0,0 +1 @@\n+y\n"
        )
        path = tree / "suid"
    else:
        body = "diff --git a/tool b/tool\nold mode 100644\nnew mode 106777\n"
        path = tree / "tool"
    _patch(series, "0001-mode.patch", body)
    code, out = invoke("apply", str(series), *_checkout(tree))
    assert code == 0, out
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755  # as git apply gives it


def test_item07_a_symlink_patch_is_refused_clearly(tmp_path: Path) -> None:
    tree, series = tmp_path / "tree", tmp_path / "series"
    tree.mkdir()
    series.mkdir()
    _patch(
        series,
        "0001-link.patch",
        "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n"
        "+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n",
    )
    code, out = invoke("apply", str(series), *_checkout(tree))
    assert code == 2 and "makes a symlink" in out and "Traceback" not in out, out
    assert not os.path.lexists(tree / "link")


# 8 -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "old,new",
    [
        ("../evil.py", "../evil.py"),
        ("/tmp/evil.py", "/tmp/evil.py"),
        ("vllm\\evil.py", "vllm\\evil.py"),
        ("vllm/pool.py", "tests/pool.py"),
    ],
    ids=["dotdot", "absolute", "backslash", "rename-out"],
)
def test_item08_site_packages_refuses_paths_leaving_the_package(tmp_path: Path, old: str, new: str) -> None:
    site = fake_site_packages(tmp_path / "site")
    before = digest(site)
    series = tmp_path / "series"
    series.mkdir()
    if old == new:  # a new file at a path that leaves the package
        body = f"--- /dev/null\n+++ b/{new}\n@@ -0,0 +1 @@\n+x\n"
    else:
        body = f"diff --git a/{old} b/{new}\nsimilarity index 100%\nrename from {old}\nrename to {new}\n"
    _patch(series, "0001-out.patch", body)
    code, out = invoke("apply", str(series), "--target", "site-packages", "--site-packages", str(site))
    assert code == 2 and "Traceback" not in out, out
    assert ("leaves the target root" in out) if old == new else ("moves a file between" in out), out
    assert "skipped" not in out
    assert digest(site) == before and not (site / ".patchkit/state.json").exists()


# 6 (apply) ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["vllm/" + "a" * 300 + ".py", "vllm/pool.py/inner.py"], ids=["long", "file-as-dir"]
)
def test_item06_hostile_paths_are_one_line(tmp_path: Path, path: str) -> None:
    tree, _ = make_checkout(tmp_path)
    series = tmp_path / "hostile"
    series.mkdir()
    _patch(
        series,
        "0001-x.patch",
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1 @@\n+x\n",
    )
    code, out = invoke("apply", str(series), *_checkout(tree))
    assert code == 2 and len(out.strip().splitlines()) == 2 and "Traceback" not in out, out


@pytest.mark.parametrize("name", ["state.json", "journal.json"])
def test_item06_malformed_state_or_journal_is_reported_and_moved_aside(tmp_path: Path, name: str) -> None:
    tree, series = make_checkout(tmp_path)
    (tree / ".patchkit").mkdir()
    (tree / ".patchkit" / name).write_text('{"files": 3' if name == "state.json" else "[1, 2]")
    code, out = invoke("status", *_checkout(tree))
    assert code == 1 and str(tree / ".patchkit" / name) in out and "moved it to" in out, out
    assert not (tree / ".patchkit" / name).exists()
    code, out = invoke("apply", str(series), *_checkout(tree))  # not stuck
    assert code == 0, out


# 9, 15 -------------------------------------------------------------------------------------------


def _compiled_site(tmp_path: Path) -> Path:
    """A site-packages tree as pip leaves it: modules byte-compiled, RECORD hashing the .pyc."""
    import compileall

    site = fake_site_packages(tmp_path / "site")
    compileall.compile_dir(site / "vllm", quiet=1)
    (info,) = site.glob("vllm-*.dist-info")
    rows = (info / "RECORD").read_text().splitlines()
    from test_sitepackages import _hash

    for pyc in sorted((site / "vllm/__pycache__").glob("*.pyc")):
        rows.insert(0, f"{pyc.relative_to(site)},{_hash(pyc.read_bytes())},{pyc.stat().st_size}")
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return site


def _sha_all(root: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_item09_item15_reverse_is_byte_identical_pyc_and_patchkit_dir_included(tmp_path: Path) -> None:
    site = _compiled_site(tmp_path)
    before, dirs = _sha_all(site), sorted(str(p) for p in site.rglob("*") if p.is_dir())
    target = ["--target", "site-packages", "--site-packages", str(site)]
    code, out = invoke("apply", str(series_dir(tmp_path)), *target)
    assert code == 0, out
    code, out = invoke("apply", *target, "--reverse")
    assert code == 0, out
    assert _sha_all(site) == before
    assert sorted(str(p) for p in site.rglob("*") if p.is_dir()) == dirs  # no .patchkit/, no new dirs
    code, out = invoke("status", *target)
    assert code == 0 and "drift" not in out, out
    assert record_ok(site) == []
    assert not (site / ".patchkit").exists()


def test_item15_status_names_skipped_patches_and_never_calls_them_applied(tmp_path: Path) -> None:
    site = fake_site_packages(tmp_path / "site")
    series = series_dir(tmp_path)
    _patch(
        series,
        "0003-reqs.patch",
        "diff --git a/requirements/common.txt b/requirements/common.txt\n"
        "new file mode 100644\n--- /dev/null\n+++ b/requirements/common.txt\n@@ -0,0 +1 @@\n+torch\n",
    )
    target = ["--target", "site-packages", "--site-packages", str(site)]
    code, out = invoke("apply", str(series), *target)
    assert code == 0, out
    assert out.count("requirements/common.txt") == 1  # said once
    code, out = invoke("status", *target)
    assert code == 0, out
    assert "applied: 2 patch(es)" in out
    assert "0003-reqs.patch (skipped, not part of the installed package: requirements/common.txt)" in out
    assert "0002-envs.patch (applied; skipped in part" in out


def test_item15_status_hashes_only_what_the_series_touched(tmp_path: Path, monkeypatch) -> None:
    site = fake_site_packages(tmp_path / "site")
    target = ["--target", "site-packages", "--site-packages", str(site)]
    assert invoke("apply", str(series_dir(tmp_path)), *target)[0] == 0
    from patchkit.apply import sitepackages

    hashed: list[int] = []
    real = sitepackages.record_hash
    monkeypatch.setattr(sitepackages, "record_hash", lambda data: hashed.append(len(data)) or real(data))
    code, out = invoke("status", *target)
    assert code == 0, out
    (info,) = site.glob("vllm-*.dist-info")
    rows = [r for r in (info / "RECORD").read_text().splitlines() if ",sha256=" in r]
    assert 0 < len(hashed) < len(rows)


# 12 ----------------------------------------------------------------------------------------------


def test_item12_reverse_removes_created_dirs_and_honours_the_series_dir(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    _patch(
        series,
        "0003-newdir.patch",
        "diff --git a/vllm/deep/er/new.py b/vllm/deep/er/new.py\n"
        "new file mode 100644\n--- /dev/null\n+++ b/vllm/deep/er/new.py\n@@ -0,0 +1 @@\n+x = 1\n",
    )
    base = digest(tree)
    assert invoke("apply", str(series), *_checkout(tree))[0] == 0
    other = tmp_path / "other"
    shutil.copytree(series, other)
    (other / "series").write_text("0001-pool.patch\n")
    code, out = invoke("apply", str(other), *_checkout(tree), "--reverse")
    assert code == 1 and "not the patches in" in out, out
    assert (tree / "vllm/deep/er/new.py").exists()
    code, out = invoke("apply", str(series), *_checkout(tree), "--reverse")
    assert code == 0, out
    assert digest(tree) == base and not (tree / "vllm/deep").exists() and not (tree / ".patchkit").exists()


def test_item12_lost_kept_bytes_are_named_without_suggesting_force(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    assert invoke("apply", str(series), *_checkout(tree))[0] == 0
    for kept in (tree / ".patchkit/base").iterdir():
        kept.unlink()
    for extra in ([], ["--force"]):
        code, out = invoke("apply", *_checkout(tree), "--reverse", *extra)
        assert code == 1 and "pre-apply bytes" in out and "lost" in out, out
        assert "--force" not in out and "changed since apply" not in out


def test_item12_a_leftover_journal_tmp_is_cleaned(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    (tree / ".patchkit").mkdir()
    (tree / ".patchkit/journal.json.tmp").write_text('{"status": "pen')  # a kill mid-write
    code, out = invoke("status", *_checkout(tree))
    assert code == 0, out
    assert not (tree / ".patchkit/journal.json.tmp").exists()


def test_item01_the_journal_records_post_images_and_modes(tmp_path: Path) -> None:
    """The journal records each file's post-image and mode (what recovery decides by)."""
    tree, series = make_checkout(tmp_path)
    pause = {}

    def hook(name: str) -> None:
        if name == "journal":
            pause["record"] = json.loads((tree / ".patchkit/journal.json").read_text())

    journal.fault_hook = hook
    try:
        assert invoke("apply", str(series), *_checkout(tree))[0] == 0
    finally:
        journal.fault_hook = None
    entry = pause["record"]["files"][1]
    assert {"new_sha256", "new_mode", "old_sha256", "old_mode"} <= set(entry)
    assert entry["new_mode"] == 0o644 and entry["old_mode"] == 0o644


def test_item02_an_edit_while_reverse_plans_is_kept(tmp_path: Path, monkeypatch) -> None:
    """Reverse reads each file once: the bytes it checked are the bytes the journal re-checks."""
    from patchkit.apply import plan

    tree, series = make_checkout(tmp_path)
    assert invoke("apply", str(series), *_checkout(tree))[0] == 0
    real, edit = plan.read_file, b"# edited while patchkit planned the reverse\n"

    def read_then_edit(path: Path):
        found = real(path)
        if path.name == "envs.py" and edit not in path.read_bytes():
            with open(path, "ab") as handle:  # the user saves right after patchkit read it
                handle.write(edit)
        return found

    monkeypatch.setattr(plan, "read_file", read_then_edit)
    code, out = invoke("apply", *_checkout(tree), "--reverse")
    monkeypatch.setattr(plan, "read_file", real)
    assert code == 1 and "changed while patchkit was writing" in out, out
    assert (tree / "vllm/envs.py").read_bytes().endswith(edit)
