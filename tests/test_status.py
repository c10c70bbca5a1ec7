"""``patchkit status``: consistent after apply (exit 0), names files changed by hand (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_apply import make_checkout, run


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_status_nothing_applied(tmp_path: Path) -> None:
    tree, _ = make_checkout(tmp_path)
    code, out = run("status", "--target", "checkout", "--path", str(tree))
    assert code == 0 and "nothing applied" in out


def test_status_consistent_then_drift(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    report = tmp_path / "status.json"
    code, out = run("status", str(series), "--target", "checkout", "--path", str(tree), "--json", str(report))
    assert code == 0 and "consistent" in out and "same patches" in out
    assert json.loads(report.read_text())["problems"] == []

    (tree / "vllm/pool.py").write_text("# edited by hand\n")
    (tree / "vllm/helpers.py").unlink()
    code, out = run("status", "--target", "checkout", "--path", str(tree), "--json", str(report))
    assert code == 1
    assert "vllm/pool.py: changed since apply" in out and "vllm/helpers.py: changed since apply" in out
    assert len(json.loads(report.read_text())["problems"]) == 2

    code, out = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 1 and "changed since" in out


def test_status_names_a_different_series(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    assert run("apply", str(series), "--target", "checkout", "--path", str(tree))[0] == 0
    (series / "series").write_text("0001-pool.patch\n")
    code, out = run("status", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 1 and "differs from" in out
