"""Evidence by construction (issue 25, item 1): a ``passed`` carries the witness that ran; one module
(audit/verdict.py) decides verdicts, for fresh, cached and loaded results alike."""

from __future__ import annotations

import ast
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit import cache
from patchkit.audit.engine import AuditOptions, gate_key, load_patches, run_audit
from patchkit.audit.gates import GateContext, Trees
from patchkit.audit.gates.apply import series_states
from patchkit.audit.gates.registry import REGISTRY
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.model import AuditResult, Evidence, GateResult, PatchAudit
from patchkit.audit.verdict import NO_EVIDENCE, checked, decide_record, has_evidence, verdict_reasons
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.cli import app
from patchkit.report.i18n import catalogue, message_text
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.values import Pin

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
GATES_DIR = Path(__file__).parent.parent / "patchkit" / "audit" / "gates"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _scenarios(tmp_path: Path) -> tuple[BaseTree, Path]:
    """One series with every shape a gate meets: a clean Python change with a signed commit, a
    change that breaks a test, a new module, a docs-only change, an unsigned plain diff, and a
    patch whose context is gone (it does not apply)."""
    root = fake_base(tmp_path / "base")
    calc_ok = CALC.replace("import os", "import os  # env")
    patches = {
        "0001-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, calc_ok), trailers=SIGN),
        "0002-calc.patch": patch_text(
            file_diff("vllm/calc.py", calc_ok, calc_ok.replace("x * 2", "x * 3")), trailers=SIGN
        ),  # fmt: skip
        "0003-hub.patch": patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n"), trailers=SIGN),
        "0004-docs.patch": patch_text(file_diff("docs/x.md", None, "x\n"), trailers=SIGN),
        "0005-plain.patch": file_diff("vllm/extra.py", None, "X = 1\n"),
        "0006-stale.patch": patch_text(
            file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 4")), trailers=SIGN
        ),  # fmt: skip
    }
    return BaseTree(root), write_series(tmp_path / "series", patches)


def _settings(base: BaseTree, **changes) -> dict:
    tests = TestSettings(python=sys.executable, base_root=base.root, base_hash=tree_hash(base.root),
                         test_timeout=120, use_cache=False)  # fmt: skip
    return {"tests": replace(tests, **changes)}


def _walk(tmp_path: Path) -> list[GateResult]:
    """Every gate of the registry on every patch of the scenarios, with an interpreter, with a
    broken test environment and with none, called the way the engine calls it."""
    base, series = _scenarios(tmp_path)
    patches = load_patches(series, load_rules(FAKE_TREE / "domains.toml"))
    states = series_states(base, patches)
    results = []
    for settings in (_settings(base), _settings(base, env_error="torch: exit 1"), {}):
        for patch in patches:
            state = states[patch.index]
            ctx = GateContext(patch, patches[: patch.index], state, Trees(base, state.pre, state.post), [],
                              settings)  # fmt: skip
            for gate in REGISTRY.values():
                if gate.needs_applied and state.post is None:
                    continue  # the engine skips it (not_applied), never calls it
                results.append(gate.run(ctx))
    return results


def test_every_gate_in_the_registry_passes_only_with_its_witness(tmp_path):
    results = _walk(tmp_path)
    by_gate = {name: [r for r in results if r.gate == name] for name in REGISTRY}
    for name, found in by_gate.items():
        assert found, f"{name} never ran in the walk"
        for result in found:
            if result.status == "passed":
                assert has_evidence(result), (name, result.message)
                assert all(e.tool and e.outcome for e in result.evidence)
            # no gate leans on the demotion: each one records its witness itself
            assert result.message is None or result.message.key != NO_EVIDENCE, (name, result.details)
    passing = {name for name, found in by_gate.items() if any(r.status == "passed" for r in found)}
    assert {"apply", "ruff", "imports", "dco", "tests"} <= passing  # the walk reached every passing path
    en, zh = catalogue("en"), catalogue("zh")
    counted = {key for r in results for e in r.evidence for key in e.counts}
    assert counted and all(f"evidence.count.{k}" in en and f"evidence.count.{k}" in zh for k in counted)


def test_no_gate_module_builds_a_result_around_gate_result():
    """Gates construct results through ``gate_result`` / ``not_applied`` (which check evidence);
    a bare ``GateResult(...)`` in a gate module would bypass that."""
    for path in sorted(GATES_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
        names = {c.func.id for c in calls if isinstance(c.func, ast.Name)}
        assert "GateResult" not in names, path.name


def test_a_passed_without_evidence_is_demoted_with_the_reason():
    bare = GateResult("lint", "passed", "all clean")
    demoted = checked(bare)
    assert demoted.status == "could-not-run" and demoted.details["demoted"] == "passed without evidence"
    said = message_text(demoted.message)
    assert "without a witness" in said and "all clean" in said
    witnessed = replace(bare, evidence=[Evidence("ruff", "0.14.0", outcome="exit 0")])
    assert checked(witnessed) is witnessed
    assert checked(replace(bare, evidence=[Evidence("ruff")])).status == "could-not-run"  # no outcome
    verdict, reasons = verdict_reasons([bare])
    assert verdict == "incomplete" and "without a witness" in message_text(reasons[0])


def test_a_cached_passed_without_evidence_is_not_passed(tmp_path):
    """A cache entry (an older patchkit's, or a forged one) goes through the same decision."""
    base, series = _scenarios(tmp_path)
    pin = Pin(source="path", path=str(base.root), tree_hash=tree_hash(base.root))
    domains = load_rules(FAKE_TREE / "domains.toml")
    patches = load_patches(series, domains)
    key = gate_key("dco", patches[0], [], pin.tree_hash, REGISTRY["dco"].cache_config(None))
    cache.put_json("audit-gate", key, GateResult("dco", "passed", "signed").to_dict())
    result = run_audit(series, base, pin, domains, AuditOptions(gates=["dco"]))
    first = result.patches[0]
    assert first.gates[0].cached and first.gates[0].status == "could-not-run"
    assert first.verdict == "incomplete"
    assert result.patches[2].gates[0].status == "passed" and result.patches[2].gates[0].evidence


def _record(tmp_path: Path) -> Path:
    gates = [GateResult("apply", "passed", "applies"), GateResult("dco", "passed", "signed")]
    record = AuditResult("s", Pin(), [PatchAudit("0001-a.patch", "a", {"en": "a"}, gates, "ready",
                                                 ["all gates passed (apply, dco)"])], "ready")  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(record.to_dict()))
    return path


def test_patchkit_report_of_a_record_whose_passed_has_no_evidence_is_not_ready(tmp_path):
    md, junit = tmp_path / "r.md", tmp_path / "r.xml"
    run = CliRunner().invoke(app, ["report", str(_record(tmp_path)), "--md", str(md), "--junit", str(junit)])
    assert run.exit_code == 3, run.output  # incomplete, never "ready"
    text = md.read_text()
    assert "✅" not in text and "without a witness" in text and "incomplete" in text.lower()
    assert 'errors="2"' in junit.read_text()  # both gates: requested, not witnessed


def test_decide_record_keeps_a_witnessed_record_as_it_is():
    witness = [Evidence("git interpret-trailers", "2.39.5", outcome="exit 0")]
    gates = [GateResult("dco", "passed", "signed", evidence=witness)]
    record = AuditResult("s", Pin(), [PatchAudit("p", "a", {"en": "a"}, gates, "ready", ["x"])], "ready")
    assert decide_record(record) is False and record.patches[0].reasons == ["x"]


def _audit_json(tmp_path: Path, gates: str) -> tuple[int, dict]:
    base, series = _scenarios(tmp_path)
    out = tmp_path / "a.json"
    run = CliRunner().invoke(app, ["audit", str(series), "--base", str(base.root), "--gates", gates,
                                   "--json", str(out)])  # fmt: skip
    return run.exit_code, json.loads(out.read_text())


def test_gates_skipped_because_the_patch_does_not_apply_make_it_not_ready(tmp_path):
    """`--gates ruff,dco` on a patch that does not apply: ruff skipped, caused by the failed apply
    check; the patch is needs-work and the exit status 1 (was: ready, exit 0)."""
    code, data = _audit_json(tmp_path, "ruff,dco")
    stale = data["patches"][5]
    assert stale["patch"] == "0006-stale.patch"
    assert stale["verdict"] == "needs-work" and code == 1
    ruff = stale["gates"][0]
    assert (ruff["gate"], ruff["status"], ruff["cause"]) == ("ruff", "skipped", "apply")
    assert stale["gates"][1]["status"] == "passed"  # dco reads the message: it needs no tree
    assert any("did not run" in r and "apply failed" in r for r in stale["reasons"])


def test_every_report_shows_each_gates_witness(tmp_path):
    base, series = _scenarios(tmp_path)
    pin = Pin(source="path", path=str(base.root), tree_hash=tree_hash(base.root))
    options = AuditOptions(gates=["apply", "dco"])
    result = fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))
    from patchkit.report.html import render_html
    from patchkit.report.junit import render_junit
    from patchkit.report.markdown import render_markdown

    for lang, word in (("en", "Witness"), ("zh", "见证")):
        for text in (render_html(result, lang), render_markdown(result, lang), render_junit(result, lang)):
            assert word in text and "git interpret-trailers" in text and "patchkit apply engine" in text
    import io

    from rich.console import Console

    from patchkit.ui.console import set_verbosity
    from patchkit.ui.summary import print_audit

    console = Console(file=io.StringIO(), width=300)
    print_audit(result, "en", console=console)
    assert "Witness" not in console.file.getvalue()  # the tools that ran: -v and the JSON
    set_verbosity(1)
    try:
        print_audit(result, "en", console=console)
    finally:
        set_verbosity(0)
    assert "    Witness: patchkit apply engine" in console.file.getvalue()


def test_every_reader_of_a_record_gets_the_decided_verdicts(tmp_path):
    """``patchkit report``'s loader (also what ``patchkit wheel --audit`` reads) decides the record."""
    from patchkit.commands.report import load

    record = load(_record(tmp_path))
    assert record.verdict == "incomplete" and record.patches[0].verdict == "incomplete"
    assert [g.status for g in record.patches[0].gates] == ["could-not-run", "could-not-run"]
    assert all("without a witness" in reason for reason in record.patches[0].reasons)
