"""Promises that name their tests (issue 25, item 6): every promise of docs/guarantees.md (each row
of its tables) and of SECURITY.md (each bullet of "What patchkit promises") names at least one test
as ``tests/<file>.py::<function>``, and every test it names exists in the suite.

A reference is ``tests/x.py::test_name`` (``::test_other`` right after it in the same promise is
another test of that file), a glob such as ``tests/x.py::test_item06_*`` (it must match one), or a
whole file ``tests/x.py`` (it must exist; it does not count as naming a test by itself)."""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PROMISE_FILES = ("docs/guarantees.md", "SECURITY.md")
_REFERENCE = re.compile(r"(tests/[\w/]+\.py)(?:::([\w*]+(?:::[\w*]+)?))?|(?<![\w/.)])::([\w*]+(?:::[\w*]+)?)")


@dataclass
class Promise:
    where: str  # file:line
    text: str


@dataclass
class Reference:
    path: str
    name: str | None  # function (or Class::method), a glob, or None for a whole file


def promises(relative: str) -> list[Promise]:
    """The promises of one file: table rows (not header or rule rows), and the bullets of a
    "What patchkit promises" section."""
    lines = (ROOT / relative).read_text("utf-8").splitlines()
    found: list[Promise] = []
    in_promises = False
    bullet: list[str] = []
    start = 0

    def close() -> None:
        if bullet:
            found.append(Promise(f"{relative}:{start}", " ".join(bullet)))
            bullet.clear()

    for number, line in enumerate(lines, 1):
        if line.startswith("#"):
            close()
            in_promises = line.lstrip("#").strip().lower() == "what patchkit promises"
            continue
        stripped = line.strip()
        if stripped.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|", stripped):
            following = lines[number] if number < len(lines) else ""
            if not re.fullmatch(r"\s*\|[\s|:-]+\|\s*", following):  # the header row sits above the rule
                found.append(Promise(f"{relative}:{number}", stripped))
            continue
        if in_promises and line.startswith("- "):
            close()
            bullet.append(line[2:])
            start = number
        elif in_promises and bullet and stripped:
            bullet.append(stripped)
        elif not stripped:
            close()
    close()
    return found


def references(text: str) -> list[Reference]:
    refs: list[Reference] = []
    for match in _REFERENCE.finditer(text):
        path, name, more = match.groups()
        if path:
            refs.append(Reference(path, name))
        elif refs:  # "::test_other" after a file: another test of the same file
            refs.append(Reference(refs[-1].path, more))
    return refs


@cache
def named_tests(path: str) -> frozenset[str]:
    """Every test function of a test file: top-level ``test*`` and ``Class::test*``."""
    tree = ast.parse((ROOT / path).read_text("utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{n.name}" for n in node.body if isinstance(n, ast.FunctionDef)}
    return frozenset(n for n in names if n.split("::")[-1].startswith("test"))


def problems(promise: Promise) -> list[str]:
    refs = references(promise.text)
    found = []
    if not any(r.name for r in refs):
        found.append(f"{promise.where}: names no test (tests/<file>.py::<function>): {promise.text[:90]}")
    for ref in refs:
        if not (ROOT / ref.path).is_file():
            found.append(f"{promise.where}: {ref.path} does not exist")
        elif ref.name and not fnmatch.filter(named_tests(ref.path), ref.name):
            found.append(f"{promise.where}: {ref.path}::{ref.name} is no test in that file")
    return found


@pytest.mark.parametrize("relative", PROMISE_FILES)
def test_every_promise_names_tests_that_exist(relative: str) -> None:
    listed = promises(relative)
    assert len(listed) >= 10, f"{relative}: found only {len(listed)} promises"
    found = [p for promise in listed for p in problems(promise)]
    assert not found, "\n".join(found)


def test_the_checker_finds_what_it_must(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A promise without a test, a test that does not exist and a glob matching nothing are found;
    a header row, a rule row and the "does not promise" bullets are not promises."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "def test_one():\n    pass\n\n\nclass TestB:\n    def test_two(self):\n        pass\n"
    )
    (tmp_path / "G.md").write_text(
        "| Promise | Proved by |\n|---|---|\n"
        "| kept | `tests/test_a.py::test_one`, `::TestB::test_two` |\n"
        "| no test | `tests/test_a.py` |\n"
        "| gone | `tests/test_a.py::test_three` |\n"
        "| glob | `tests/test_a.py::test_o*`, `tests/test_a.py::test_z*` |\n"
        "\n## What patchkit promises\n\n- **Kept.** (`tests/test_a.py::test_one`).\n- **Bare.** It is so.\n"
        "  Still the same bullet.\n\n## What patchkit does not promise\n\n- anything else\n"
    )  # fmt: skip
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    named_tests.cache_clear()
    listed = promises("G.md")
    assert [p.where for p in listed] == ["G.md:3", "G.md:4", "G.md:5", "G.md:6", "G.md:10", "G.md:11"]
    said = {p.where: problems(p) for p in listed}
    named_tests.cache_clear()
    assert said["G.md:3"] == [] and said["G.md:10"] == []
    assert "names no test" in said["G.md:4"][0]
    assert said["G.md:5"] == ["G.md:5: tests/test_a.py::test_three is no test in that file"]
    assert said["G.md:6"] == ["G.md:6: tests/test_a.py::test_z* is no test in that file"]
    assert "names no test" in said["G.md:11"][0] and "Still the same bullet" in listed[-1].text
