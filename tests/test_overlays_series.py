"""Overlays listed in a series: split writes them, verify / apply / audit use them in series order."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from test_apply import run, tree_digest

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.base.tree import BaseTree
from patchkit.errors import UserError
from patchkit.report.words import fill_words
from patchkit.series.files import load_entries, read_series_lines
from patchkit.values import Pin

FIXTURES = Path(__file__).parent / "fixtures" / "overlays"
NEW_FILE = "vllm/tool_parsers/y_tool_parser.py"
REWRITE = "vllm/v1/core/block_pool.py"
SMALL = "vllm/entrypoints/openai/api_server.py"
OVERLAY_1 = "overlays/0001-tool-parser-vllm_tool_parsers_y_tool_parser.py.toml"
OVERLAY_2 = "overlays/0002-prefix-caching-vllm_v1_core_block_pool.py.toml"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def split(tmp_path: Path, *options: str) -> Path:
    out = tmp_path / "out"
    code, text = run("split", str(FIXTURES / "replay.mbox"), "--base", str(FIXTURES / "base"),
                     "--out", str(out), *options)  # fmt: skip
    assert code == 0, text
    return out


@pytest.fixture
def series(tmp_path: Path) -> Path:
    return split(tmp_path, "--overlay-threshold", "0.5")


def test_split_writes_overlays_listed_after_their_patch(series: Path) -> None:
    assert read_series_lines(series) == [
        ("patch", "0001-tool-parser.patch"),
        ("overlay", OVERLAY_1),
        ("overlay", OVERLAY_2),  # prefix-caching's patch became empty: the overlay stands alone
        ("patch", "0003-serving.patch"),
    ]
    assert not (series / "0002-prefix-caching.patch").exists()
    entries = {e.name: e for e in load_entries(series)}
    tool_files = [fp.path for p in entries["0001-tool-parser.patch"].patches for fp in p.files]
    assert tool_files == ["vllm/tool_parsers/x_tool_parser.py"]  # the small change stays a diff
    assert [fp.path for p in entries["0003-serving.patch"].patches for fp in p.files] == [SMALL]
    new, rewrite = entries[OVERLAY_1].overlay, entries[OVERLAY_2].overlay
    assert (new.target, new.base_sha256, new.reason) == (NEW_FILE, "absent", "new file")
    base_pool = (FIXTURES / "base" / REWRITE).read_bytes()
    assert (rewrite.target, rewrite.reason) == (REWRITE, "rewrites 60% of the file")
    assert rewrite.base_sha256 == hashlib.sha256(base_pool).hexdigest()
    record = json.loads((series / "split.json").read_text())
    assert {p["domain"]: p.get("overlays") for p in record["patches"]} == {
        "tool-parser": [OVERLAY_1], "prefix-caching": [OVERLAY_2], "serving": None,
    }  # fmt: skip
    assert record["proof"]["ok"] is True


def test_default_split_has_no_overlays(tmp_path: Path) -> None:
    out = split(tmp_path)
    assert not (out / "overlays").exists()
    assert all(kind == "patch" for kind, _ in read_series_lines(out))
    assert not any("overlays" in p for p in json.loads((out / "split.json").read_text())["patches"])


def test_threshold_out_of_range_is_refused(tmp_path: Path) -> None:
    code, text = run("split", str(FIXTURES / "replay.mbox"), "--base", str(FIXTURES / "base"),
                     "--overlay-threshold", "1.5")  # fmt: skip
    assert code == 2 and "--overlay-threshold" in text


def test_apply_gives_base_plus_replay_and_reverse_restores(series: Path, tmp_path: Path) -> None:
    expected = tmp_path / "expected"
    shutil.copytree(FIXTURES / "base", expected)
    plain = split(tmp_path / "plain")  # the default split (diffs only) gives base + replay
    assert run("apply", str(plain), "--target", "checkout", "--path", str(expected))[0] == 0
    shutil.rmtree(expected / ".patchkit")
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "base", tree)
    code, text = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0, text
    assert {k: v for k, v in tree_digest(tree).items() if ".patchkit" not in k} == tree_digest(expected)
    assert run("apply", "--target", "checkout", "--path", str(tree), "--reverse")[0] == 0
    shutil.rmtree(tree / ".patchkit", ignore_errors=True)
    assert tree_digest(tree) == tree_digest(FIXTURES / "base")


@pytest.mark.parametrize(
    ("tamper", "code", "message"),
    [
        ("content", 2, "does not match content_sha256"),
        ("base", 1, "the overlay replaces " + "0" * 64),
    ],
)
def test_tampered_overlay_is_refused_nothing_changed(series: Path, tmp_path: Path, tamper: str,
                                                    code: int, message: str) -> None:  # fmt: skip
    toml = series / OVERLAY_2
    if tamper == "content":
        toml.with_suffix(".new").write_bytes(b"BLOCK_0 = 'evil'\n")
    else:
        text = toml.read_text()
        old = next(line for line in text.splitlines() if line.startswith("base_sha256"))
        toml.write_text(text.replace(old, f'base_sha256 = "{"0" * 64}"'))
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "base", tree)
    got, text = run("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert got == code and message in text, text
    assert tree_digest(tree) == tree_digest(FIXTURES / "base")


def test_audit_runs_the_gates_over_overlays(series: Path) -> None:
    base = FIXTURES / "base"
    options = AuditOptions(gates=["apply", "ruff", "dco"], use_cache=False)
    result = fill_words(run_audit(series, BaseTree(base), Pin(path=str(base)), _rules(), options))
    by_name = {pa.patch: pa for pa in result.patches}
    assert list(by_name) == ["0001-tool-parser.patch", OVERLAY_2, "0003-serving.patch"]
    tool = by_name["0001-tool-parser.patch"]
    gates = {g.gate: g for g in tool.gates}
    assert gates["apply"].status == "passed" and gates["dco"].status == "passed"
    assert gates["apply"].details["overlays"][0]["target"] == NEW_FILE
    assert gates["ruff"].status == "failed", gates["ruff"].summary  # the overlay's unused import
    assert [(f["file"], f["code"]) for f in gates["ruff"].details["findings"]] == [(NEW_FILE, "F401")]
    assert {f["path"] for f in tool.files} == {"vllm/tool_parsers/x_tool_parser.py", NEW_FILE}
    assert f"+++ b/{NEW_FILE}" in tool.diff and "+import os" in tool.diff
    alone = by_name[OVERLAY_2]  # a patch whose only content is an overlay
    assert alone.domain == "prefix-caching"
    assert [(g.gate, g.status) for g in alone.gates] == [("apply", "passed"), ("ruff", "passed"),
                                                         ("dco", "passed")]  # fmt: skip
    assert [f["path"] for f in alone.files] == [REWRITE] and f"--- a/{REWRITE}" in alone.diff


def test_audit_apply_gate_checks_the_overlay_preimage(series: Path) -> None:
    toml = series / OVERLAY_2
    toml.write_text(_rehash(toml))
    base = FIXTURES / "base"
    options = AuditOptions(gates=["apply"], use_cache=False)
    result = fill_words(run_audit(series, BaseTree(base), Pin(path=str(base)), _rules(), options))
    alone = next(pa for pa in result.patches if pa.patch == OVERLAY_2)
    assert alone.verdict == "blocked" and "the overlay replaces" in alone.gates[0].summary


@pytest.mark.parametrize("name", ["../x.toml", "/etc/x.toml", "overlays/../../x.toml"])
def test_overlay_line_leaving_the_series_dir_is_refused(series: Path, name: str) -> None:
    (series / "series").write_text(f"0001-tool-parser.patch\noverlay {name}\n")
    with pytest.raises(UserError, match="overlay name .* leaves the series directory"):
        load_entries(series)


def _rehash(toml: Path) -> str:
    """The toml with a base_sha256 that matches nothing."""
    text = toml.read_text()
    old = next(line for line in text.splitlines() if line.startswith("base_sha256"))
    return text.replace(old, f'base_sha256 = "{"1" * 64}"')


def _rules():
    from patchkit.split.rules import load_rules

    return load_rules()
