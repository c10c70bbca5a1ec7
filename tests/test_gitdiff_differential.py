"""patchkit's parse and apply against git's, on patches real git / GNU diff write (see tests/gitdiff)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitdiff import GIT_WRITERS, run_case

CASES = 200


@pytest.mark.parametrize("block", range(8))
def test_generated_cases_agree_with_git(tmp_path: Path, block: int) -> None:
    problems = []
    for seed in range(block * CASES // 8, (block + 1) * CASES // 8):
        case = run_case(seed, tmp_path)
        problems += [f"seed {seed} ({case.writer}): {p}" for p in case.problems]
    assert problems == []


@pytest.mark.parametrize("writer", [*GIT_WRITERS, "gnu"])
def test_every_writer_is_exercised(tmp_path: Path, writer: str) -> None:
    for seed in range(100_000, 100_002):
        case = run_case(seed, tmp_path, writer)
        assert case.problems == [], case.problems
