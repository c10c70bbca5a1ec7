from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchkit.analysis.depends import compute_dependencies
from patchkit.base.tree import BaseTree, detect_prefix
from patchkit.diff.parse import parse_files, parse_text
from patchkit.errors import UserError
from patchkit.series.files import load_entries, write_series
from patchkit.split.proof import prove
from patchkit.split.replay import split_replay
from patchkit.split.rules import load_rules

ORDER = ["tool-parser", "prefix-caching", "spec-decode", "serving"]


def run_split(replays: list[Path], base: Path, out: Path):
    replay = parse_files(replays)
    tree = BaseTree(base)
    prefix = detect_prefix(replay, tree)
    result = split_replay(replay, tree, load_rules(), prefix)
    compute_dependencies(tree, result.series.patches)
    write_series(out, result.series, result.texts)
    proof = prove(tree, load_entries(out), result.states)
    return result, proof, prefix


@pytest.fixture
def split_mbox(fixtures: Path, tmp_path: Path):
    return run_split([fixtures / "replays" / "tangled.mbox"], fixtures / "base", tmp_path / "out")


def test_one_patch_per_domain_in_rules_order(split_mbox, tmp_path: Path) -> None:
    result, proof, prefix = split_mbox
    assert prefix == ""
    assert proof.ok, proof.differences
    out = tmp_path / "out"
    names = [f"{i + 1:04d}-{d}.patch" for i, d in enumerate(ORDER)]
    assert (out / "series").read_text() == "".join(n + "\n" for n in names)
    assert sorted(p.name for p in out.glob("*.patch")) == names
    files = {sp.domain: sorted(fp.path for fp in sp.files) for sp in result.series.patches}
    assert files == {
        "tool-parser": [
            "vllm/envs.py",
            "vllm/tool_parsers/legacy_tool_parser.py",
            "vllm/tool_parsers/x_tool_parser.py",
        ],
        "prefix-caching": ["vllm/v1/core/block_pool.py", "vllm/v1/core/prefix_cache/lru.py"],
        "spec-decode": ["vllm/config/speculative.py", "vllm/envs.py"],
        "serving": ["vllm/entrypoints/openai/api_server.py"],
    }


def test_sources_dependencies_and_mixed_hunk(split_mbox) -> None:
    result, _, _ = split_mbox
    series = result.series
    by_domain = {sp.domain: sp for sp in series.patches}
    # commit 0 = Alice (3 domains), 1 = Bob (prefix caching), 2 = 陈小明 (tool-parser follow-up)
    assert {d: sp.source_commits for d, sp in by_domain.items()} == {
        "tool-parser": [0, 2],
        "prefix-caching": [1],
        "spec-decode": [0],  # the mixed envs.py hunk's tool lines came from commit 2, not these
        "serving": [0],
    }
    # spec-decode's envs.py hunk has the tool-parser lines as context
    assert {d: sp.depends_on for d, sp in by_domain.items()} == {
        "tool-parser": [], "prefix-caching": [], "spec-decode": ["tool-parser"], "serving": [],
    }  # fmt: skip
    envs = [a for a in series.assignments if a.file == "vllm/envs.py"]
    assert [(a.domain, a.added, a.removed, a.mixed, a.hunk) for a in envs] == [
        ("tool-parser", 2, 0, True, 0),
        ("spec-decode", 2, 0, True, 0),
    ]
    assert envs[0].commits == [0, 2] and envs[1].commits == [0]
    assert not any(a.mixed for a in series.assignments if a.file != "vllm/envs.py")
    spec_envs = next(fp for fp in by_domain["spec-decode"].files if fp.path == "vllm/envs.py")
    assert [ln for ln in spec_envs.hunks[0].lines if ln[0] in "+-"] == [
        "+    # SM70: limit for multi-token prediction",
        '+    "VLLM_SM70_MTP_X": lambda: int(os.getenv("VLLM_SM70_MTP_X", "0")),',
    ]


def test_patch_headers_authorship_and_trailers(split_mbox, tmp_path: Path) -> None:
    out = tmp_path / "out"
    text = {d: (out / f"{i + 1:04d}-{d}.patch").read_text() for i, d in enumerate(ORDER)}
    parsed = {d: parse_text(t, d)[0].commit for d, t in text.items()}
    assert "Patchkit-Domain: tool-parser\n" in text["tool-parser"]
    assert "Patchkit-Source: 1c14d3573429 Qwen3X tool fix" in text["tool-parser"]
    assert (
        "Patchkit-Source: 8602d3b3259b 修复工具解析器默认值 (陈小明 <xiaoming@example.com>)"
        in text["tool-parser"]
    )
    assert (parsed["tool-parser"].author, parsed["tool-parser"].email) == (
        "Alice Example",
        "alice@example.com",
    )
    assert parsed["tool-parser"].trailer_values("Signed-off-by") == [
        "Alice Example <alice@example.com>",
        "陈小明 <xiaoming@example.com>",
    ]
    assert parsed["tool-parser"].trailer_values("Co-developed-by") == ["Dana Lee <dana@example.com>"]
    # Bob never signed off: patchkit must not add one
    assert parsed["prefix-caching"].author == "Bob Builder"
    assert parsed["prefix-caching"].trailer_values("Signed-off-by") == []
    assert "Signed-off-by" not in text["prefix-caching"]
    assert parsed["prefix-caching"].date == "Tue, 4 Feb 2025 11:00:00 +0000"
    # spec-decode comes from Alice alone: 陈小明's sign-off must not leak in
    assert parsed["spec-decode"].trailer_values("Signed-off-by") == ["Alice Example <alice@example.com>"]
    assert "xiaoming" not in text["spec-decode"]
    assert parsed["spec-decode"].trailer_values("Patchkit-Domain") == ["spec-decode"]
    assert parsed["serving"].subject == "serving: HTTP serving and the OpenAI-compatible API"


def test_series_applies_with_git_and_equals_replay(
    split_mbox, fixtures, tmp_path, base_copy, git_apply, tree_hash
):
    expected = base_copy("expected")
    git_apply(expected, (fixtures / "replays" / "tangled.mbox").read_bytes())
    got = base_copy("got")
    for name in (tmp_path / "out" / "series").read_text().split():
        git_apply(got, (tmp_path / "out" / name).read_bytes())
    assert not (got / "vllm/tool_parsers/legacy_tool_parser.py").exists()
    assert (got / "vllm/v1/core/prefix_cache/lru.py").is_file()
    assert tree_hash(got) == tree_hash(expected)
    assert tree_hash(got) != tree_hash(base_copy("base"))


def test_package_rooted_replay_gives_same_series(split_mbox, fixtures, tmp_path) -> None:
    result, proof, prefix = run_split(
        [fixtures / "replays" / "tangled-pkg.mbox"], fixtures / "base", tmp_path / "pkg"
    )
    assert prefix == "vllm/" and proof.ok
    assert result.series.path_prefix == "vllm/"
    for name in (tmp_path / "out" / "series").read_text().split():
        assert (tmp_path / "pkg" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_per_item_files_give_same_series_as_one_mbox(split_mbox, fixtures, tmp_path) -> None:
    items = sorted((fixtures / "replays" / "tangled-items").glob("*.patch"))
    assert len(items) == 3
    _, proof, _ = run_split(items, fixtures / "base", tmp_path / "items")
    assert proof.ok
    names = (tmp_path / "out" / "series").read_text().split()
    assert (tmp_path / "items" / "series").read_text().split() == names
    for name in names:
        assert (tmp_path / "items" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_split_is_deterministic(fixtures, tmp_path) -> None:
    replay = [fixtures / "replays" / "tangled.mbox"]
    run_split(replay, fixtures / "base", tmp_path / "one")
    run_split(replay, fixtures / "base", tmp_path / "two")
    one = {p.name: p.read_bytes() for p in (tmp_path / "one").iterdir()}
    two = {p.name: p.read_bytes() for p in (tmp_path / "two").iterdir()}
    assert one.keys() == two.keys() and one == two


def test_replay_that_does_not_fit_base_is_user_error(fixtures, tmp_path) -> None:
    base = tmp_path / "other"
    (base / "vllm").mkdir(parents=True)
    (base / "vllm" / "envs.py").write_text("x = 1\n")
    replay = parse_files([fixtures / "replays" / "tangled.mbox"])
    with pytest.raises(UserError) as info:
        detect_prefix(replay, BaseTree(base))
    assert "does not fit the base" in str(info.value)
    assert info.value.where.startswith(str(fixtures / "replays" / "tangled.mbox") + ":")


def test_replay_whose_hunks_do_not_apply_is_user_error(fixtures, base_copy) -> None:
    base = base_copy()
    (base / "vllm" / "envs.py").write_text("changed\n")
    replay = parse_files([fixtures / "replays" / "tangled.mbox"])
    with pytest.raises(UserError) as info:
        split_replay(replay, BaseTree(base), load_rules(), "")
    assert "replay does not apply" in str(info.value) and "vllm/envs.py" in str(info.value)
    assert info.value.where == f"{fixtures / 'replays' / 'tangled.mbox'}:37"  # envs.py's diff --git line


def test_ambiguous_root_names_both(fixtures, tmp_path) -> None:
    base = tmp_path / "both"
    shutil.copytree(fixtures / "base", base)
    shutil.copytree(fixtures / "base" / "vllm", base, dirs_exist_ok=True)  # envs.py at '' and vllm/
    replay = parse_files([fixtures / "replays" / "tangled-pkg.mbox"])
    with pytest.raises(UserError) as info:
        detect_prefix(replay, BaseTree(base))
    assert "'.'" in str(info.value) and "'vllm/'" in str(info.value)


def test_split_json_records_assignments(split_mbox, tmp_path) -> None:
    record = json.loads((tmp_path / "out" / "split.json").read_text())
    assert [p["domain"] for p in record["patches"]] == ORDER
    assert sum(a["mixed"] for a in record["assignments"]) == 2
    assert record["commits"][2]["author"] == "陈小明"
