"""The step check in a forked child gives the in-process answer, and falls back when the child fails."""

from __future__ import annotations

import os
import time

import pytest

from patchkit.analysis import syntax as stepcheck

GOOD = (b"X = {\n    'a': 1,\n}\n", "100644")
BROKEN = (b"X = {\n    'a': (\n}\n", "100644")
STEPS = [
    ("0000/vllm/envs.py", GOOD, BROKEN),  # breaks a file that parsed: named
    ("0001/vllm/envs.py", BROKEN, GOOD),
    ("0001/vllm/cli.py", GOOD, GOOD),
    ("0001/vllm/notes.txt", GOOD, BROKEN),  # not Python: not checked
]
ORDER = ["tool-parser", "serving"]
EXPECTED = [
    "0001-tool-parser leaves vllm/envs.py unparsable at line 3: "
    "closing parenthesis '}' does not match opening parenthesis '(' on line 2"
]


def test_forked_check_equals_in_process_check() -> None:
    assert stepcheck.unparsable_steps(STEPS, ORDER, {}) == EXPECTED
    pending = stepcheck.start(STEPS, ORDER, {})
    assert pending._pid is not None, "there was Python to compile, so a child was started"
    assert pending.result() == EXPECTED
    assert pending.result() == EXPECTED  # collected once, then remembered


def test_nothing_to_compile_starts_no_child() -> None:
    final = {"vllm/envs.py": GOOD[0], "vllm/cli.py": GOOD[0]}
    steps = [s for s in STEPS if not s[0].endswith(".txt") and s[2] == GOOD]
    pending = stepcheck.start(steps, ORDER, final)
    assert pending._pid is None and pending.result() == []


def test_a_failing_child_is_recomputed_not_taken_as_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    real = stepcheck._syntax_error

    def crashes_in_child(source, path):
        if os.getpid() != parent:
            raise RuntimeError("child dies")
        return real(source, path)

    monkeypatch.setattr(stepcheck, "_syntax_error", crashes_in_child)
    pending = stepcheck.start(STEPS, ORDER, {})
    assert pending._pid is not None
    assert pending.result() == EXPECTED


def test_parent_and_child_share_the_files_and_agree(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A slow child: the parent compiles the small files itself and waits only for the last one."""
    parent = os.getpid()
    real = stepcheck._syntax_error
    in_parent: list[str] = []

    def slow_in_child(source, path):
        if os.getpid() != parent:
            time.sleep(0.4)
        else:
            in_parent.append(path)
        return real(source, path)

    steps = [(f"0000/m{i}.py", GOOD, (GOOD[0] + b"#" * i, "100644")) for i in range(5)]
    steps.append(("0000/vllm/envs.py", GOOD, BROKEN))
    monkeypatch.setattr(stepcheck, "_syntax_error", slow_in_child)
    pending = stepcheck.start(steps, ORDER, {})
    assert pending.result() == EXPECTED
    assert in_parent, "the parent took part"
    assert "m4.py" not in in_parent, "the largest file is the child's, the parent waited for it"


def test_without_fork_the_check_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHKIT_NO_FORK", "1")
    pending = stepcheck.start(STEPS, ORDER, {})
    assert pending._pid is None and pending.result() == EXPECTED
