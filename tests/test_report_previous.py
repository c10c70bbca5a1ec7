"""What changed since the last revision, kept without a flag (interdiff/previous.py): the record an
audit replaces is kept beside it as the prior revision, a re-run of the same revision keeps that one,
the cache keeps one per series, another series' record is never taken for this one's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.model import AuditResult
from patchkit.interdiff.previous import prior_path, since_last_revision

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "fixtures" / "report" / "audit_small.json"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGNED = "Signed-off-by: Ada Dev <ada@example.org>"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _record(edit: str = "") -> AuditResult:
    """The small record; ``edit`` changes the first patch's diff (another revision of it)."""
    result = AuditResult.from_dict(json.loads(SMALL.read_text("utf-8")))
    if edit:
        result.patches[0].diff += f"+{edit}\n"
    return result


def _write(path: Path, result: AuditResult) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict()), encoding="utf-8")


def test_the_replaced_record_is_kept_and_compared(tmp_path):
    record = tmp_path / "reports" / "audit.json"
    first = _record()
    assert since_last_revision(first, record, use_cache=False) is None  # nothing before it
    _write(record, first)
    second = _record(edit="x = 1")
    since = since_last_revision(second, record, use_cache=False)
    assert prior_path(record) == tmp_path / "reports" / "audit.previous.json"
    assert prior_path(record).read_bytes() == json.dumps(first.to_dict()).encode()
    statuses = {name: entry["status"] for name, entry in since["patches"].items()}
    assert statuses == {"0001-spec-decode.patch": "changed", "0002-logging.patch": "unchanged"}
    assert since["record"] == str(prior_path(record)) and since["created"] == first.created
    _write(record, second)
    again = since_last_revision(_record(edit="x = 1"), record, use_cache=False)  # the same revision
    assert prior_path(record).read_bytes() == json.dumps(first.to_dict()).encode()  # still the prior one
    assert again["patches"]["0001-spec-decode.patch"]["status"] == "changed"


def test_a_change_in_the_first_file_of_a_patch_counts(tmp_path):
    """An audit record's diff starts with its first file's ``diff --git`` line (no mail header): a
    change there is a change (it was read as starting at the second file, so 0001 of the own series
    showed "unchanged" after a real edit of its tests/test_envs.py)."""

    def two_files(first_new: str) -> AuditResult:
        result = _record()
        result.patches[0].diff = file_diff("vllm/a.py", "x = 1\n", first_new) + file_diff(
            "vllm/b.py", "y = 1\n", "y = 2\n"
        )
        return result

    record = tmp_path / "audit.json"
    _write(record, two_files("x = 2\n"))
    since = since_last_revision(two_files("x = 3\n"), record, use_cache=False)
    assert since["patches"]["0001-spec-decode.patch"]["status"] == "changed"


def test_another_series_record_is_not_this_ones_previous_revision(tmp_path):
    record = tmp_path / "audit.json"
    other = _record()
    other.series_dir = "/elsewhere/series"
    for audit in other.patches:
        audit.domain = "something-else"
    _write(record, other)
    assert since_last_revision(_record(edit="y = 2"), record, use_cache=False) is None
    assert not prior_path(record).exists()


def test_the_cache_keeps_the_last_revision_when_no_record_is_beside(tmp_path):
    assert since_last_revision(_record(), None, use_cache=True) is None
    since = since_last_revision(_record(edit="z = 3"), None, use_cache=True)
    assert since["patches"]["0001-spec-decode.patch"]["status"] == "changed"
    assert "audit-records" in since["record"]
    assert since_last_revision(_record(edit="z = 3"), None, use_cache=False) is None  # --no-cache


def test_a_damaged_prior_record_means_no_since(tmp_path):
    record = tmp_path / "audit.json"
    prior_path(record).write_text('{"patches": [{"patch": "0001-spec-decode.patch"}]}')  # no domain
    _write(record, _record())
    assert since_last_revision(_record(), record, use_cache=False) is None


def _audit(tmp_path: Path, series: Path, base: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHKIT_CACHE": str(tmp_path / "cache")}
    gates = ["--gates", "apply,dco"]
    argv = [sys.executable, "-m", "patchkit", "audit", str(series), "--base", str(base), *gates]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)


def test_two_audits_of_two_revisions_mark_what_changed(tmp_path):
    """``patchkit audit`` twice, the series edited in between, no flag: the second report marks the
    edited patch in its table, HTML and terminal alike; the first report had no such column."""
    base = fake_base(tmp_path / "base")
    greet = file_diff("vllm/greet.py", None, "def hello():\n    return 'hi'\n")
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    series = {
        "0001-calc.patch": patch_text(calc, trailers=SIGNED),
        "0002-greet.patch": patch_text(greet, subject="greet", trailers=SIGNED),
    }
    write_series(tmp_path / "series", series)
    first = _audit(tmp_path, tmp_path / "series", base)
    assert first.returncode == 0, first.stderr
    page = tmp_path / "reports" / "audit.html"
    assert "Since last revision" not in first.stdout and 'class="since-mark' not in page.read_text()
    edited = file_diff("vllm/greet.py", None, "def hello():\n    return 'hello'\n")
    series["0002-greet.patch"] = patch_text(edited, subject="greet", trailers=SIGNED)
    write_series(tmp_path / "series", series)
    second = _audit(tmp_path, tmp_path / "series", base)
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "reports" / "audit.previous.json").is_file()
    rows = {line.split()[1]: line.split()[-1] for line in second.stdout.splitlines() if ".patch" in line}
    assert rows == {"0001-calc.patch": "unchanged", "0002-greet.patch": "changed"}
    html = page.read_text()
    assert '<tr class="patch-row changed" data-patch="0002-greet.patch">' in html
    assert '<tr class="patch-row" data-patch="0001-calc.patch">' in html
    data = json.loads((tmp_path / "reports" / "audit.json").read_text())
    assert data["since"]["counts"]["changed"] == 1 and data["since"]["record"].endswith("audit.previous.json")
