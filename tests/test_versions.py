"""Versions and file names compared by packaging's rules (issue 27): a generated 200-case table
against packaging's own parse, the spellings that strings got wrong, local builds against a pin."""

from __future__ import annotations

import random

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from patchkit import versions
from patchkit.base import package_index


def _spellings(rng: random.Random) -> tuple[str, str]:
    """(a canonical version, another PEP 440 spelling of a version near it)."""
    release = [rng.randint(0, 12) for _ in range(rng.randint(1, 3))]
    canonical = ".".join(map(str, release))
    suffix, other_suffix = "", ""
    kind = rng.choice(["", "post", "pre", "dev", "local"])
    n = rng.randint(0, 3)
    if kind == "post":
        suffix, other_suffix = (
            f".post{n}",
            rng.choice([f"-post{n}", f"-{n}" if n else ".post0", f".post{n}", f"post{n}"]),
        )
    elif kind == "pre":
        tag, alias = rng.choice([("rc", "c"), ("a", "alpha"), ("b", "beta"), ("rc", "rc")])
        suffix, other_suffix = f"{tag}{n}", rng.choice([f"{alias}{n}", f"-{alias}.{n}", f".{tag}{n}"])
    elif kind == "dev":
        suffix, other_suffix = f".dev{n}", rng.choice([f"-dev{n}", f"dev{n}", f".dev{n}"])
    elif kind == "local":
        suffix = other_suffix = rng.choice(["+cpu", "+g1a2b3c", "+cu121"])
    other_release = (
        release + [0] * rng.randint(0, 2) if rng.random() < 0.7 else [*release[:-1], release[-1] + 1]
    )
    prefix = rng.choice(["", "v", "V"]) if rng.random() < 0.3 else ""
    return canonical + suffix, prefix + ".".join(map(str, other_release)) + other_suffix


CASES = [_spellings(random.Random(seed)) for seed in range(200)]


@pytest.mark.parametrize("pinned, spelled", CASES)
def test_two_spellings_are_the_same_version_exactly_when_packaging_says_so(pinned, spelled):
    assert versions.same(pinned, spelled) == (Version(pinned) == Version(spelled))
    sdist = f"Vllm_Fork-{spelled}.tar.gz"
    assert versions.sdist_of(sdist, "vllm-fork", pinned) == (Version(spelled) == Version(pinned))
    wheel = f"vllm_fork-{Version(spelled)}-py3-none-any.whl"
    assert versions.wheel_of(wheel, "VLLM.fork", pinned) == (Version(spelled) == Version(pinned))


def test_the_table_covers_equal_and_unequal_spellings():
    equal = sum(Version(a) == Version(b) for a, b in CASES)
    assert len(CASES) == 200 and 60 <= equal <= 180
    assert sum(a != b for a, b in CASES if Version(a) == Version(b)) >= 50  # spelled differently


@pytest.mark.parametrize("filename, name, version", [
    ("vllm-0.6.3.post1.tar.gz", "vllm", "0.6.3-post1"),
    ("vllm-0.6.3.post1.tar.gz", "vllm", "0.6.3.post1"),
    ("vllm-1.0.tar.gz", "vllm", "1.0.0"),
    ("vllm-1.0.0.zip", "vllm", "1.0"),
    ("vllm_ascend-0.8.3rc1.tar.gz", "vllm-ascend", "0.8.3-rc1"),
])  # fmt: skip
def test_the_sdist_the_issue_named_is_found_for_other_spellings(filename, name, version):
    assert package_index._is_sdist_of(filename, name, version)


@pytest.mark.parametrize("filename, name, version", [
    ("vllm-0.6.3.tar.gz", "vllm", "0.6.3.post1"), ("vllm-extra-0.6.3.tar.gz", "vllm", "0.6.3"),
    ("vllm-0.6.3.tar.bz2", "vllm", "0.6.3"), ("vllm-0.6.3.tar.gz", "vllm", "not-a-version"),
])  # fmt: skip
def test_other_files_are_not_the_sdist(filename, name, version):
    assert not package_index._is_sdist_of(filename, name, version)


def test_wheels_of_the_same_release_spelled_otherwise_are_found():
    assert package_index._is_wheel_of("vllm-1.0-cp38-abi3-manylinux1_x86_64.whl", "vllm", "1.0.0")
    assert not package_index._is_wheel_of("vllm-1.0.1-cp38-abi3-manylinux1_x86_64.whl", "vllm", "1.0.0")


@pytest.mark.parametrize("installed, pinned, matches, label", [
    ("0.8.5+cpu", "0.8.5", True, "+cpu"), ("0.8.5+g1a2b3c4", "0.8.5", True, "+g1a2b3c4"),
    ("0.8.5", "0.8.5.0", True, None), ("v0.8.5", "0.8.5", True, None),
    ("0.8.5+cpu", "0.8.5+cu121", False, None), ("0.8.6+cpu", "0.8.5", False, None),
    ("0.8.5.post1", "0.8.5", False, None),
])  # fmt: skip
def test_a_local_build_of_the_pinned_release_matches_with_a_note(installed, pinned, matches, label):
    found, note = versions.installed_matches(installed, pinned)
    assert found is matches and (note is None if label is None else label in note)


def test_apply_accepts_a_local_build_of_the_pin_without_force(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from patchkit.commands import apply as command

    monkeypatch.setattr(command, "series_version", lambda project, series_dir: ("0.8.5", "patchkit.toml"))
    target = SimpleNamespace(dist=SimpleNamespace(name="vllm", version="0.8.5+cpu"))
    note = command.check_version(None, target, tmp_path, force=False)
    assert "matches the pin 0.8.5" in note and "+cpu" in note
    target.dist.version = "0.8.6"
    with pytest.raises(Exception, match="--force"):
        command.check_version(None, target, tmp_path, force=False)


def test_names_are_normalised_as_pep_503_says():
    assert canonicalize_name("Vllm_Fork") == package_index.normalize_name("Vllm_Fork")
