"""A cache entry carries the key it was written under and a checksum of its content (issue 26):
any entry that is not exactly what patchkit wrote is a miss — said once, recomputed, never a
traceback, never trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit import cache

ROOT = Path(__file__).resolve().parents[1]
APPLY = ROOT / "tests" / "fixtures" / "apply"


def _flip(path: Path) -> None:
    path.write_text(path.read_text().replace('"failed"', '"passed"'))


def _stray(path: Path) -> None:
    path.write_text(path.read_text().replace('"failed"', '"fa\x01iled"'))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


DAMAGE = {
    "stray-byte": _stray,
    "empty-object": lambda p: p.write_text("{}"),
    "wrong-status": lambda p: p.write_text(p.read_text().replace('"failed"', '"banana"')),
    "directory": _directory,
    "failed-to-passed": _flip,
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:20]),
    "nested": lambda p: p.write_text("[" * 100000 + "]" * 100000),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_entry_is_a_miss_said_once(tmp_path: Path, monkeypatch, capsys, kind: str) -> None:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    result = {"gate": "dco", "status": "failed", "message": "unsigned"}
    path = cache.put_json("audit-gate", "k1", result)
    assert cache.get_json("audit-gate", "k1") == result
    DAMAGE[kind](path)
    capsys.readouterr()
    assert cache.get_json("audit-gate", "k1") is None
    assert cache.get_json("audit-gate", "k1") is None
    err = capsys.readouterr().err
    assert err.count("is damaged") == 1 and "Traceback" not in err, err
    cache.put_json("audit-gate", "k1", result)  # recomputed: written again whole
    assert cache.get_json("audit-gate", "k1") == result


def test_an_entry_copied_under_another_key_is_a_miss(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    one = cache.put_json("audit-gate", "k1", {"status": "failed"})
    two = cache.put_json("audit-gate", "k2", {"status": "passed"})
    two.write_bytes(one.read_bytes())
    assert cache.get_json("audit-gate", "k2") is None


def test_an_audit_never_trusts_a_hand_edited_result(tmp_path: Path) -> None:
    env = {**os.environ, "PATCHKIT_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "patchkit", "audit", str(APPLY / "series"), "--base", str(APPLY / "base"),
            "--gates", "apply,dco", "--json", str(tmp_path / "a.json")]  # fmt: skip
    assert subprocess.run(argv, env=env, capture_output=True).returncode == 0
    for path in (tmp_path / "cache" / "audit-gate").glob("*.json"):
        text = path.read_text()
        path.write_text(text.replace('"passed"', '"failed"').replace("signed off", "NOT signed off"))
    second = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr
    record = json.loads((tmp_path / "a.json").read_text())
    assert {g["status"] for p in record["patches"] for g in p["gates"]} == {"passed"}
    assert "is damaged" in second.stderr


def test_short_corrupted_cache_profile(tmp_path: Path) -> None:
    from bench.cache_corrupt import main

    figures = tmp_path / "cc.json"
    assert main(["--rounds", "6", "--work", str(tmp_path / "w"), "--json", str(figures)]) == 0
    result = json.loads(figures.read_text())
    assert result["tracebacks"] == 0 and result["trusted_corrupt"] == 0 and result["rounds"] == 6
