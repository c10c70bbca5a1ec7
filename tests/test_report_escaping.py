"""Every Markdown report field goes through the same escaping; the record validator covers the
empty lists a renderer reads the first item of (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from patchkit.audit.model import AuditResult, CiStepRef, FocusedTest
from patchkit.report import validate
from patchkit.report.markdown import render_markdown

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "fixtures" / "report" / "audit_small.json"
EVIL = "<img src=x onerror=alert(1)>|x"


def small() -> AuditResult:
    return AuditResult.from_dict(json.loads(SMALL.read_text("utf-8")))


def test_a_focused_tests_accelerator_is_escaped_like_every_field() -> None:
    result = small()
    step = CiStepRef(label=EVIL, key="k", file=EVIL, device=EVIL)
    result.patches[0].focused_tests = [FocusedTest(path=EVIL, why="changed", steps=[step], accelerator=EVIL)]
    result.patches[0].reviewers = [EVIL]
    result.patches[0].owner_lines = [{"line": EVIL}]
    text = render_markdown(result, "en")
    assert "<img" not in text and text.count("&lt;img src=x onerror=alert(1)&gt;") >= 6


def test_escaping_is_the_same_everywhere_and_idempotent() -> None:
    from patchkit.report.markdown import _cell  # noqa: PLC2701 - the one escaping, tested directly

    assert _cell(_cell(EVIL)) == _cell(EVIL) == "&lt;img src=x onerror=alert(1)&gt;\\|x"


def test_empty_steps_is_a_validator_problem_not_an_index_error(tmp_path: Path) -> None:
    result = small()
    result.patches[0].focused_tests = [FocusedTest(path="tests/test_x.py", why="changed", steps=[])]
    assert any("focused_tests[0].steps: expected at least one item" in p for p in validate.problems(result))
    render_markdown(result, "en")  # and the renderer itself never indexes an empty list
    record = json.loads(SMALL.read_text("utf-8"))
    record["patches"][0]["focused_tests"] = [{"path": "tests/test_x.py", "why": "changed", "steps": []}]
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(record))
    argv = [sys.executable, "-m", "patchkit", "report", str(path), "--md", str(tmp_path / "r.md")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "steps: expected at least one item" in proc.stderr
