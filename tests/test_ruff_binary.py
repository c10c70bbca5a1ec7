"""Which ruff the gate runs: the base's pre-commit pin, installed once from the index (hash-checked),
else patchkit's own ruff dependency; always with the reason."""

import hashlib
import zipfile

import pytest

from patchkit.report.i18n import message_text
from patchkit.tools import ruff_binary

PRE_COMMIT = """repos:
- repo: https://github.com/pre-commit/pre-commit-hooks
  rev: v5.0.0
  hooks:
  - id: trailing-whitespace
- repo: https://github.com/astral-sh/ruff-pre-commit
  rev: v9.9.9  # the version pre-commit would run
  hooks:
  - id: ruff-check
"""
FAKE_RUFF = "#!/bin/sh\necho 'ruff 9.9.9'\n"


def test_the_pin_is_the_ruff_pre_commit_rev():
    assert ruff_binary.pinned_version(PRE_COMMIT) == "9.9.9"
    assert ruff_binary.pinned_version("repos:\n- repo: https://github.com/psf/black\n  rev: 24.1.0\n") is None
    assert ruff_binary.pinned_version(None) is None


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A local PEP 503 index holding one hand-made ruff 9.9.9 wheel; returns a function that
    (re)writes its page with the given sha256 (default: the right one)."""
    wheel = tmp_path / "files" / "ruff-9.9.9-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("ruff-9.9.9.data/scripts/ruff", FAKE_RUFF)
        archive.writestr("ruff-9.9.9.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    right = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = tmp_path / "simple" / "ruff" / "index.html"
    page.parent.mkdir(parents=True)

    def listing(sha256: str = right) -> None:
        page.write_text(f'<a href="../../files/{wheel.name}#sha256={sha256}">{wheel.name}</a>\n')

    listing()
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    ruff_binary.choose.cache_clear()
    yield listing
    ruff_binary.choose.cache_clear()


def test_the_pinned_ruff_is_installed_once_into_the_cache(index, tmp_path):
    tool = ruff_binary.choose(PRE_COMMIT)
    assert (tool.source, tool.version) == ("pinned", "9.9.9")
    assert tool.command[0].startswith(str(tmp_path / "cache" / "tools"))
    assert message_text(tool.why) == "pinned by the base's .pre-commit-config.yaml"
    index("0" * 64)  # the index now lists another hash: the cached, checked install is reused
    ruff_binary.choose.cache_clear()
    assert ruff_binary.choose(PRE_COMMIT).command == tool.command


def test_a_wheel_whose_hash_does_not_match_is_refused_and_the_fallback_says_why(index, tmp_path):
    index("0" * 64)
    tool = ruff_binary.choose(PRE_COMMIT)
    assert tool.source in ("dependency", "path") and tool.version != "9.9.9"
    why = message_text(tool.why)
    assert "the pinned ruff 9.9.9 could not be installed" in why and "sha256 mismatch" in why
    assert not list((tmp_path / "cache").glob("tools/ruff-*"))  # nothing unchecked is kept


def test_no_index_means_no_install_and_the_reason_says_so(index, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    tool = ruff_binary.choose(PRE_COMMIT)
    assert tool.version != "9.9.9"
    assert "the package index is off (PIP_NO_INDEX / pip's no-index)" in message_text(tool.why)
