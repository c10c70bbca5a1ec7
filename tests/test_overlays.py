"""Overlays: whole-file replacements checked by base sha256, through the same journal."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from test_apply import make_checkout, run, tree_digest

from patchkit.errors import UserError
from patchkit.series.files import load_overlays


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def add_overlay(series: Path, name: str, target: str, base: str, content: bytes) -> None:
    directory = series / "overlays"
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.new").write_bytes(content)
    (directory / f"{name}.toml").write_text(
        f'target = "{target}"\nbase_sha256 = "{base}"\ncontent = "{name}.new"\nreason = "test"\n'
    )


def test_overlay_applies_and_reverses(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    before = tree_digest(tree)
    # overlays are checked against the file as the patches leave it (0002 would change envs.py)
    (series / "series").write_text("0001-pool.patch\n")
    base = hashlib.sha256((tree / "vllm/envs.py").read_bytes()).hexdigest()
    add_overlay(series, "envs", "vllm/envs.py", base, b"LEVEL = 'owned'\n")
    add_overlay(series, "extra", "vllm/extra.py", "absent", b"X = 1\n")
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0 and "1 patch(es), 2 overlay(s)" in out, out
    assert (tree / "vllm/envs.py").read_bytes() == b"LEVEL = 'owned'\n"
    assert (tree / "vllm/extra.py").read_bytes() == b"X = 1\n"
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[1].count("already applied")
    assert run("apply", "--target", "checkout", "--path", str(tree), "--reverse")[0] == 0
    assert tree_digest(tree) == before


def test_overlay_base_mismatch_changes_nothing(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    add_overlay(series, "envs", "vllm/envs.py", "0" * 64, b"x\n")
    before = tree_digest(tree)
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 1 and "overlay envs.toml: vllm/envs.py has sha256" in out
    assert tree_digest(tree) == before


@pytest.mark.parametrize("target", ["../x.py", "/etc/x.py", "vllm/../../x.py"])
def test_overlay_escaping_target_is_refused(tmp_path: Path, target: str) -> None:
    _, series = make_checkout(tmp_path)
    add_overlay(series, "evil", target, "absent", b"x\n")
    with pytest.raises(UserError, match="leaves the target root"):
        load_overlays(series)


def test_overlay_through_symlink_out_is_refused(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    (tmp_path / "out").mkdir()
    (tree / "vllm/link").symlink_to(tmp_path / "out")
    add_overlay(series, "evil", "vllm/link/x.py", "absent", b"x\n")
    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 2 and "symlink leading out" in out
    assert list((tmp_path / "out").iterdir()) == []
