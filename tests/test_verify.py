from __future__ import annotations

from pathlib import Path

from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_files
from patchkit.series.files import load_entries, write_series
from patchkit.split.proof import prove
from patchkit.split.replay import split_replay
from patchkit.split.rules import load_rules


def split_to(out: Path, fixtures: Path):
    tree = BaseTree(fixtures / "base")
    result = split_replay(parse_files([fixtures / "replays" / "tangled.mbox"]), tree, load_rules(), "")
    write_series(out, result.series, result.texts)
    return tree, result


def test_proof_holds_for_a_good_series(fixtures: Path, tmp_path: Path) -> None:
    tree, result = split_to(tmp_path / "out", fixtures)
    proof = prove(tree, load_entries(tmp_path / "out"), result.states)
    assert proof.ok and proof.differences == []
    assert proof.files_checked == 7
    assert proof.base_hash == proof.series_hash


def test_proof_fails_when_a_patch_is_dropped(fixtures: Path, tmp_path: Path) -> None:
    tree, result = split_to(tmp_path / "out", fixtures)
    series = tmp_path / "out" / "series"
    series.write_text("".join(n + "\n" for n in series.read_text().split() if "serving" not in n))
    proof = prove(tree, load_entries(tmp_path / "out"), result.states)
    assert not proof.ok
    assert proof.differences == ["vllm/entrypoints/openai/api_server.py: content differs from base + replay"]
    assert proof.base_hash != proof.series_hash


def test_proof_fails_when_a_patch_is_edited(fixtures: Path, tmp_path: Path) -> None:
    tree, result = split_to(tmp_path / "out", fixtures)
    patch = tmp_path / "out" / "0002-prefix-caching.patch"
    patch.write_text(patch.read_text().replace("+        self.move_to_end(key)", "+        pass"))
    proof = prove(tree, load_entries(tmp_path / "out"), result.states)
    assert proof.differences == ["vllm/v1/core/prefix_cache/lru.py: content differs from base + replay"]


def test_proof_reports_a_patch_that_does_not_apply(fixtures: Path, tmp_path: Path) -> None:
    tree, result = split_to(tmp_path / "out", fixtures)
    series = tmp_path / "out" / "series"
    names = series.read_text().split()
    series.write_text("".join(n + "\n" for n in names if "tool-parser" not in n))  # spec-decode needs it
    proof = prove(tree, load_entries(tmp_path / "out"), result.states)
    assert not proof.ok
    assert any(d.startswith("0003-spec-decode.patch: vllm/envs.py: hunk #1") for d in proof.differences)
