"""A newcomer's first commands work together: ``split`` writes where ``audit`` and ``apply`` read,
with no option naming the series, in a new directory with or without a patchkit.toml (``split`` once
wrote ``split-out/`` and the next command said "not a series directory"). A split into a directory
that holds a series stops with one line unless ``--replace`` says so; the replaced series is kept
under the project's state dir; ``--base DIR`` is recorded the same way by ``split`` and ``audit``."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def _patchkit(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHKIT_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "patchkit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _digests(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.fixture
def newcomer(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(a new empty directory, a replay, a base tree, a cache) — fixtures of ours."""
    work, base = tmp_path / "new", tmp_path / "base"
    work.mkdir()
    shutil.copytree(FIXTURES / "base", base)
    return work, FIXTURES / "replays" / "tangled.mbox", base, tmp_path / "cache"


@pytest.mark.parametrize("config", [None, '[series]\ndir = "my-series"\n'])
def test_split_then_audit_and_apply_with_no_other_option(newcomer, config) -> None:
    work, replay, base, cache = newcomer
    series = work / "patches"
    if config is not None:  # a project that names its series dir: every command takes it
        (work / "patchkit.toml").write_text(config)
        series = work / "my-series"
    split = _patchkit("split", str(replay), "--base", str(base), cwd=work, cache=cache)
    assert split.returncode == 0, split.stderr
    assert (series / "series").is_file() and not (work / "split-out").exists()
    audit = _patchkit("audit", "--base", str(base), "--gates", "apply,dco", cwd=work, cache=cache)
    record = json.loads((work / "reports" / "audit.json").read_text())
    assert Path(record["series_dir"]).resolve() == series.resolve()
    assert [p["patch"] for p in record["patches"]] == (series / "series").read_text().split()
    gates = {(p["patch"], g["gate"]): g["status"] for p in record["patches"] for g in p["gates"]}
    assert {s for (_, gate), s in gates.items() if gate == "apply"} == {"passed"}
    # the fixture's replay has commits without a sign-off: dco says so, exit 1 (a gate failed)
    assert audit.returncode == 1 and "failed" in {s for (_, gate), s in gates.items() if gate == "dco"}
    apply = _patchkit("apply", "--target", "checkout", "--path", str(base), "--check", cwd=work, cache=cache)
    assert apply.returncode == 0, apply.stderr
    assert "nothing written" in apply.stdout and f"{len(record['patches'])} patch(es)" in apply.stdout
    # --base DIR is one record in both commands: the path and its tree hash
    split_base = json.loads((series / "split.json").read_text())["base"]
    assert split_base == record["base"] and len(split_base["tree_hash"]) == 64
    edit = _patchkit("edit", "--base", str(base), "--json", "edit.json", cwd=work, cache=cache)
    assert edit.returncode == 0, edit.stderr  # the edit loop starts from the same series
    made = json.loads((work / "edit.json").read_text())
    assert Path(made["series"]).resolve() == series.resolve()
    assert len(made["patches"]) == len(record["patches"])


def test_split_never_replaces_a_series_silently(newcomer) -> None:
    work, replay, base, cache = newcomer
    assert _patchkit("split", str(replay), "--base", str(base), cwd=work, cache=cache).returncode == 0
    series = work / "patches"
    first = sorted((series / "series").read_text().split())
    # the user's own state of the series: a hand edit, a patch of their own, a note beside it
    edited = series / first[0]
    edited.write_text(edited.read_text().replace("\n---\n", "\nreviewed by hand\n---\n", 1))
    (series / "9999-mine.patch").write_text((series / first[-1]).read_text())
    (series / "series").write_text((series / "series").read_text() + "9999-mine.patch\n")
    (series / "NOTES.md").write_text("mine\n")
    before = _digests(series)
    again = _patchkit("split", str(replay), "--base", str(base), cwd=work, cache=cache)
    assert again.returncode == 2
    line = again.stderr.strip()
    assert "\n" not in line and "--out DIR" in line and "--replace" in line, again.stderr
    assert _digests(series) == before  # nothing touched
    replaced = _patchkit("split", str(replay), "--base", str(base), "--replace", cwd=work, cache=cache)
    assert replaced.returncode == 0, replaced.stderr
    kept = [p for p in (work / ".patchkit" / "replaced").iterdir()]
    assert len(kept) == 1 and f"the old one is kept in {kept[0]}" in replaced.stdout
    assert _digests(kept[0]) == before  # the whole old series, byte for byte
    now = (series / "series").read_text().split()
    assert sorted(now) == first and not (series / "9999-mine.patch").exists()  # the new series only
    assert "reviewed by hand" not in edited.read_text()
    assert (series / "NOTES.md").read_text() == "mine\n"  # not the series': left alone
    other = _patchkit("split", str(replay), "--base", str(base), "--out", "second", cwd=work, cache=cache)
    assert other.returncode == 0 and (work / "second" / "series").is_file()  # --out: the other choice
