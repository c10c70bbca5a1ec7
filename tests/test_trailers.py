"""Trailers as git reads them (issue 25, item 5): patchkit's port of git's trailer rules against
``git interpret-trailers --parse`` on generated messages, and the DCO gate on real git output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchkit.audit.gates import PatchUnderAudit
from patchkit.audit.gates.dco import dco_gate
from patchkit.diff.mail import parse_trailers
from patchkit.diff.parse import parse_text
from patchkit.diff.trailers import git_trailers
from patchkit.report.words import gate_summary
from tests.trailers import disagreement, git_parse

BLOCK = 100


@pytest.mark.parametrize("start", range(0, 600, BLOCK))
def test_generated_messages_are_read_as_git_reads_them(start: int) -> None:
    """600 generated messages (seeds 0-599), 0 disagreements with git interpret-trailers --parse;
    the long run: ``python -m tests.trailers --messages 20000``."""
    problems = [d for seed in range(start, start + BLOCK) if (d := disagreement(seed))]
    assert not problems, problems[:3]


SIGNED = "Signed-off-by: Ada Dev <ada@example.org>"
ADA = [("Signed-off-by", "Ada Dev <ada@example.org>")]
CASES = {
    "cherry-pick -x after the sign-off": (
        f"Fix it\n\nBody.\n\n{SIGNED}\n(cherry picked from commit {'a' * 40})\n",
        ADA,
    ),
    "lower-case key": ("Fix\n\nsigned-off-by: Ada Dev <ada@example.org>\n", [("signed-off-by", ADA[0][1])]),
    "prose, 25 % trailers, one git wrote": (
        f"Fix\n\nthis is prose\nand so is this\nand this\n{SIGNED}\n",
        ADA,
    ),
    "prose in the block, under 25 %": (f"Fix\n\nprose\nprose\nprose\nprose\n{SIGNED}\n", []),
    "prose with a token-looking trailer, no git one": ("Fix\n\nprose line\nReviewed-by: Bo <bo@x>\n", []),
    "a continuation line": ("Fix\n\nSigned-off-by: Ada\n  Dev <ada@example.org>\n", ADA),
    "not the last paragraph": (f"Fix\n\n{SIGNED}\n\nMore text after it.\n", []),
    "the title is never a trailer": (f"{SIGNED}\n", []),
    "a blank before the colon": ("Fix\n\nSigned-off-by : Ada Dev <ada@example.org>\n", ADA),
    "comments and a Conflicts block at the end": (f"Fix\n\n{SIGNED}\n\nConflicts:\n\tvllm/x.py\n# c\n", ADA),
}


@pytest.mark.parametrize("name", list(CASES))
def test_git_trailer_rules_case_by_case(name: str) -> None:
    message, expected = CASES[name]
    assert [(t.key, t.value) for t in git_trailers(message)] == expected
    assert git_parse(message, divider=False) == expected  # and git itself says the same


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    for role in ("AUTHOR", "COMMITTER"):
        env |= {f"GIT_{role}_NAME": "Ada Dev", f"GIT_{role}_EMAIL": "ada@example.org"}
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def _backport(tmp_path: Path, signed: bool) -> str:
    """A real ``git cherry-pick -x`` of a commit onto a release branch, as ``git format-patch``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "calc.py").write_text("a = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "branch", "release")
    (repo / "calc.py").write_text("a = 2\n")
    _git(repo, "commit", "-q", "-a", *(["-s"] if signed else []), "-m", "calc: a is 2\n\nBecause it is.")
    fix = _git(repo, "rev-parse", "HEAD").strip()
    _git(repo, "checkout", "-q", "release")
    _git(repo, "cherry-pick", "-x", fix)
    return _git(repo, "format-patch", "-1", "--stdout")


def _gate(text: str):
    parsed = parse_text(text, "0001-backport.patch")
    files = [fp for p in parsed for fp in p.files]
    patch = PatchUnderAudit(
        "0001-backport.patch", 0, text, files, [p.commit for p in parsed], "calc", {"en": "c"}
    )
    return dco_gate(patch)


def test_a_signed_cherry_pick_x_backport_passes_dco(tmp_path: Path) -> None:
    text = _backport(tmp_path, signed=True)
    assert "(cherry picked from commit " in text and "Signed-off-by: Ada Dev" in text
    result = _gate(text)
    assert result.status == "passed", gate_summary(result)
    assert result.evidence[0].tool == "git interpret-trailers" and result.evidence[0].counts["agreed"] == 1
    assert [t.key for t in parse_text(text, "x")[0].commit.trailers] == ["Signed-off-by"]


def test_an_unsigned_cherry_pick_x_backport_fails_dco(tmp_path: Path) -> None:
    result = _gate(_backport(tmp_path, signed=False))
    assert result.status == "failed" and "lack the author's sign-off" in gate_summary(result)


def test_the_parser_reads_the_whole_message_title_first() -> None:
    assert [t.key for t in parse_trailers(f"Subject\n\n{SIGNED}\n")] == ["Signed-off-by"]
    assert parse_trailers(f"{SIGNED}\n") == []  # a message of one paragraph: its title
