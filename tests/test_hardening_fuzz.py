"""Every input parser, fed mutated real inputs: each input parses or raises UserError, never more.

CI profile: ~3,000 inputs (600 per parser) plus every kept case in tests/fuzz/corpus/.
Long profile: ``PATCHKIT_LONG=1 pytest tests/test_hardening_fuzz.py`` (200,000 per parser) or
``python -m tests.fuzz --inputs 1000000``.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.cli import app
from tests.fuzz import engine
from tests.fuzz.targets import TARGETS

LONG = os.environ.get("PATCHKIT_LONG") == "1"
PER_TARGET = 200_000 if LONG else 600
KEPT = sorted(p for p in engine.CORPUS.glob("*/*") if p.parent.name in TARGETS)
KNOWN_RENDER_GAPS = sorted(engine.CORPUS.glob("audit-render/*"))


@pytest.mark.filterwarnings("ignore::FutureWarning")  # re.compile of fuzzed patterns
@pytest.mark.parametrize("target", list(TARGETS))
def test_mutated_inputs_parse_or_raise_user_error(target: str) -> None:
    stats = engine.run(target, PER_TARGET, seed=zlib.crc32(target.encode()))
    assert stats.inputs == PER_TARGET
    assert not stats.crashes, "\n\n".join(c.detail for c in stats.crashes.values())


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("case", KEPT, ids=[f"{p.parent.name}/{p.name}" for p in KEPT])
def test_kept_corpus_case(case: Path) -> None:
    crash = engine.check_one(case.parent.name, case.read_bytes())
    assert crash is None, crash.detail


@pytest.mark.parametrize("case", KNOWN_RENDER_GAPS, ids=[p.name for p in KNOWN_RENDER_GAPS])
def test_render_cases_load_cleanly_or_are_refused(case: Path) -> None:
    """Records that once crashed the renderers: now refused with a JSON path, or rendered."""
    crash = engine.check_one("audit-render", case.read_bytes())
    assert crash is None, crash.detail


def test_seeds_are_valid_inputs() -> None:
    """The seeds parse: mutations start from real inputs, not from refusals."""
    for target in TARGETS:
        for seed in sorted((engine.SEEDS / target).glob("*")):
            if target == "series" and seed.name != "series":
                continue
            engine.TARGETS[target](seed.read_bytes())


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("mbox/crash-627678d160d12072", ["split", "{case}", "--base", "{tmp}"]),
        ("audit/crash-e92cbcfd6df39d44", ["report", "{case}", "--md", "{tmp}/r.md"]),
    ],
)
def test_cli_turns_a_kept_case_into_one_line_and_exit_2(tmp_path: Path, name: str, args: list[str]) -> None:
    case = engine.CORPUS / name
    result = CliRunner().invoke(app, [a.format(case=case, tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    assert result.output.startswith("patchkit: error: ") and str(case) in result.output
