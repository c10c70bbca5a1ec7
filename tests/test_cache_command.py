"""``patchkit cache``: what the cache holds and which patchkit it belongs to; pruning removes other
versions' results (which pile up today), and with --older-than / --all more, --dry-run nothing."""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from patchkit import cache
from patchkit.cli import app

runner = CliRunner()


@pytest.fixture()
def filled(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    mine = cache.put_json("audit-gate", "aaa", {"ok": 1})
    other = cache.cache_root() / "audit-gate" / "bbb.0.0.9-0123456789abcdef.json"
    other.write_text("{}\n")
    entry = cache.build_entry(
        "sdist", "f" * 64, lambda tmp: (tmp / "vllm-0.33.0.tar.gz").write_bytes(b"x" * 5000)
    )
    old_tmp = cache.cache_root() / "base" / ".tmp-abc"
    old_tmp.mkdir(parents=True)
    (old_tmp / "half").write_bytes(b"y" * 100)
    day_and_more = time.time() - cache.LEFTOVER_AGE - 60
    os.utime(old_tmp, (day_and_more, day_and_more))
    return {"mine": mine, "other": other, "sdist": entry, "tmp": old_tmp}


def test_show_names_kinds_sizes_and_the_patchkit_they_belong_to(filled):
    result = runner.invoke(app, ["cache"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"cache {cache.cache_root()} (this patchkit: {cache.code_identity()})"
    gate = next(line for line in lines if line.startswith("audit-gate"))
    assert "this patchkit: 1" in gate and "0.0.9-0123456789abcdef: 1" in gate
    assert "content-keyed (any patchkit): 1" in next(line for line in lines if line.startswith("sdist"))
    assert "unfinished builds: 1" in next(line for line in lines if line.startswith("base"))
    assert "2 of no use to this patchkit" in result.output
    assert all(p.exists() for p in filled.values())  # showing removes nothing


def test_json_lists_every_entry(filled, tmp_path):
    out = tmp_path / "cache.json"
    assert runner.invoke(app, ["cache", "--json", str(out)]).exit_code == 0
    record = json.loads(out.read_text())
    by_name = {e["name"]: e for e in record["entries"]}
    assert by_name[filled["other"].name]["stale"] is True and by_name[filled["mine"].name]["stale"] is False
    assert by_name["f" * 64]["code"] is None and by_name["f" * 64]["size"] >= 5000


def test_prune_removes_other_versions_results_and_unfinished_builds_only(filled):
    dry = runner.invoke(app, ["cache", "--prune", "--dry-run"])
    assert dry.exit_code == 0 and "would free" in dry.output and all(p.exists() for p in filled.values())
    result = runner.invoke(app, ["cache", "--prune"])
    assert result.exit_code == 0, result.output
    assert "removed audit-gate: 1 entry" in result.output and "a build that never finished" in result.output
    assert not filled["other"].exists() and not filled["tmp"].exists()
    assert filled["mine"].exists() and filled["sdist"].is_dir()
    assert cache.get_json("audit-gate", "aaa") == {"ok": 1}


def test_older_than_and_all(filled):
    assert runner.invoke(app, ["cache", "--older-than", "1h"]).exit_code == 0
    assert filled["mine"].exists() and filled["sdist"].is_dir()  # written just now
    week_ago = time.time() - 8 * 86400
    os.utime(filled["sdist"], (week_ago, week_ago))
    result = runner.invoke(app, ["cache", "--older-than", "1w"])
    assert "last written more than 1w ago" in result.output and not filled["sdist"].exists()
    assert runner.invoke(app, ["cache", "--all"]).exit_code == 0
    assert cache.entries() == []


def test_a_bad_age_is_one_line_exit_2(filled):
    result = runner.invoke(app, ["cache", "--older-than", "soon"])
    assert result.exit_code == 2 and "--older-than 'soon': expected a number and a unit" in result.output
