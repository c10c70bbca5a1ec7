"""Gate summaries and verdict reasons through the catalogues: a zh report of real gate results has no
English gate sentence, every key the code emits is in both catalogues, and records without keys
(or with keys this catalogue cannot render) still render, in English."""

from __future__ import annotations

import io
import json
import re
import string
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from rich.console import Console

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.model import AuditResult, GateResult, PatchAudit
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.report.html import render_html
from patchkit.report.i18n import catalogue, localise, message_text, reason_texts, summary_text
from patchkit.report.junit import render_junit
from patchkit.report.markdown import render_markdown
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.testrun.testselect import ENV_RULES, SUMMARY_ORDER, Comparison, summary_message
from patchkit.ui.summary import print_audit
from patchkit.values import Message, Pin

PACKAGE = Path(__file__).parent.parent / "patchkit"
REPORTS = Path(__file__).parent / "fixtures" / "report"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()

# Every English gate sentence the gates and verdicts can write, as a fragment that only it has.
ENGLISH_GATE_FRAGMENTS = (
    "lack the author",
    "commit(s)",
    "finding(s)",
    "applies alone",
    "applies in series",
    "does not apply at its place",
    "could not run here",
    "the verdict is incomplete",
    "failed:",
    "passed on both",
    "could-not-run (",
    "ran on both the base",
    "passed with the patch",
    "no witness recorded",
    "its outcome",
    "all gates passed",
    "no Signed-off-by",
)


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> tuple[dict, dict]:
    """A real audit (every gate) of an unsigned series, as the JSON ``patchkit audit`` writes; then
    the same audit again, every gate served from the cache."""
    tmp_path = tmp_path_factory.mktemp("i18n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
        first, again = _audit_json(tmp_path), _audit_json(tmp_path)
    return first, again


def _audit_json(tmp_path: Path) -> dict:
    root = tmp_path / "base"
    if not root.exists():
        fake_base(root)
    first = CALC.replace("import os\n", "import os\nimport sys\n")  # F401: an unused import
    patches = {
        "0001-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, first)),
        "0002-hub.patch": patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n")),
        "0003-calc.patch": patch_text(
            file_diff("vllm/calc.py", first, first.replace("sys\n", "sys  # argv\n"))
        ),
        "0004-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, CALC.replace("os\n", "os  # env\n"))),
    }
    series = write_series(tmp_path / "series", patches)
    pin = Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    settings = TestSettings(python=sys.executable, base_root=root, base_hash=pin.tree_hash, test_timeout=120)
    options = AuditOptions(gates=["apply", "ruff", "dco", "tests"], settings={"tests": settings})
    result = fill_words(
        run_audit(series, BaseTree(root), pin, load_rules(FAKE_TREE / "domains.toml"), options)
    )
    return json.loads(json.dumps(result.to_dict()))


def _visible_text(html: str) -> str:
    body = re.sub(r"<(style|script)[^>]*>.*?</\1>", "", html, flags=re.S)
    body = re.sub(r'<table class="code">.*?</table>', "", body, flags=re.S)  # the diff is data
    return re.sub(r"<[^>]+>", " ", body)


def test_zh_report_of_real_gate_results_has_no_english_gate_sentence(audited):
    record = AuditResult.from_dict(audited[0])
    statuses = {(p.patch, g.gate): g.status for p in record.patches for g in p.gates}
    assert statuses[("0001-calc.patch", "ruff")] == "failed"
    assert statuses[("0004-calc.patch", "apply")] == "failed"  # after 0001 its context is gone
    assert record.patches[2].gates[0].summary == "applies in series; needs 0001-calc.patch first"
    assert statuses[("0002-hub.patch", "tests")] == "could-not-run"
    english = render_html(record, "en") + render_markdown(record, "en")
    assert "lack the author" in english and "finding(s) added by the patch: F401" in english
    for text in (_visible_text(render_html(record, "zh")), render_markdown(record, "zh")):
        for fragment in ENGLISH_GATE_FRAGMENTS:
            assert fragment not in text, fragment
        assert "1 个提交中有 1 个缺少作者的 Signed-off-by：1111111111" in text
        assert "补丁新引入 1 个 ruff 问题：F401" in text
        assert "dco 未通过：" in text and "在序列中的位置上打不上" in text
        assert "按序列顺序可以打上；需要先打 0001-calc.patch" in text
        assert "tests 在本机无法运行：打补丁后没有任何选中的测试通过" in text and "没有加速卡 1 个" in text
        assert not re.search(r"\b(gate|reason|dco\.commit|tests\.part)\.[a-z-]+", text)  # no raw key
    assert "没有 Signed-off-by（作者 Ada Dev &lt;ada@example.org&gt;）" in render_html(record, "zh")
    console = Console(file=io.StringIO(), width=200)
    print_audit(record, "zh", console=console)
    shown = console.file.getvalue()  # the four patches share the reason: one line names them all
    patches = "0001-calc.patch、0002-hub.patch、0003-calc.patch、0004-calc.patch（4 个补丁）"
    assert f"{patches}：dco 未通过：1 个提交中有 1 个缺少作者的 Signed-off-by" in shown


def test_english_render_of_a_message_is_the_recorded_summary(audited):
    record = AuditResult.from_dict(audited[0])
    for patch in record.patches:
        assert reason_texts(patch, "en") == patch.reasons and len(patch.reason_messages) == len(patch.reasons)
        for gate in patch.gates:
            assert gate.message is not None and message_text(gate.message, "en") == gate.summary


def _emitted_keys() -> set[str]:
    """Every catalogue key patchkit's gates, verdicts and test comparison can put in a message:
    the key literals in the source, plus the families built from a name (test categories, causes)."""
    text = "".join(p.read_text("utf-8") for p in sorted(PACKAGE.rglob("*.py")))
    families = r"gate|reason|dco\.commit|tests\.run|wheel|ui\.witness"
    keys = set(re.findall(rf'"((?:{families})\.[a-z.-]+[a-z])"', text))
    parts = ("passed", "passed-teardown", "could-not-run", "regressed", *SUMMARY_ORDER)
    keys |= {f"tests.part.{c}" for c in parts}
    keys |= {f"tests.cause.{rule.name}" for rule in ENV_RULES} | {"tests.cause.count"}
    keys |= {f"wheel.status.{status}" for status in ("applied", "partly-applied", "skipped")}
    return keys


def test_every_key_the_code_can_emit_is_in_both_catalogues_with_the_same_placeholders():
    en, zh = catalogue("en"), catalogue("zh")
    keys = _emitted_keys()
    assert len(keys) > 45, sorted(keys)  # the scan found the gates' keys, not nothing
    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for key in sorted(keys):
        assert key in en and key in zh, key
        assert fields(en[key]) == fields(zh[key]), key
        assert not re.search(
            r"[A-Za-z]{4,} [a-z]{3,} [a-z]{3,}", re.sub(r"`[^`]*`|\{[^}]*\}", "", zh[key])
        ), f"{key}: English left in the zh text"


def test_comparison_summary_reads_as_chinese():
    cmp = Comparison()
    for test_id in ("a", "b"):
        cmp.add("passed", test_id)
    cmp.add("could-not-run", "c")
    cmp.causes["no-accelerator"] += 1
    message = summary_message(cmp)
    assert message_text(message) == "2 passed on both; 1 of 3 could-not-run (no-accelerator); 0 regressed"
    assert (
        message_text(message, "zh") == "2 个在打补丁前后都通过；3 个中 1 个无法运行（没有加速卡）；0 个回归"
    )


def test_a_record_without_keys_still_renders_in_english():
    """audit_small.json predates message keys: every summary and reason falls back to its English."""
    record = AuditResult.from_dict(json.loads((REPORTS / "audit_small.json").read_text("utf-8")))
    assert all(g.message is None for p in record.patches for g in p.gates)
    html, md = render_html(record, "zh"), render_markdown(record, "zh")
    for text in (html, md):
        assert "applies alone and in series" in text and "ruff: 1 new finding" in text
    assert "plain diff without commit metadata" in render_junit(record, "en")


@pytest.mark.parametrize(
    "message",
    [
        {"key": "gate.nope"},  # a key from a newer patchkit
        {"key": "gate.dco.missing", "params": {"bad": 1}},  # a missing param
        {"key": "gate.dco.missing", "params": {"bad": {"x": 1}, "total": 1, "commits": []}},  # not data
        {"key": "gate.dco.missing", "params": {"bad": None, "total": 1, "commits": []}},
        {"key": "reason.failed", "params": {"gate": "dco", "summary": {"key": "ui.none" * 3}}},
        {"params": {}},
        "gate.dco.missing",
        {"key": "gate.tests.compared", "params": {"parts": [[[[[[[[[["deep"]]]]]]]]]]}},
    ],
)
def test_a_message_that_cannot_be_rendered_falls_back_to_the_english(message):
    assert localise(message, "zh", "the English summary") == "the English summary"
    gate = GateResult("dco", "failed", "the English summary")
    record = json.loads(json.dumps(gate.to_dict()))
    record["message"] = message
    try:
        gate = GateResult.from_dict(record)
    except (ValueError, TypeError):
        return  # refused at load time (a report names its JSON path): also never a raw key
    assert summary_text(gate, "zh") == "the English summary"


def test_reasons_that_do_not_pair_with_their_messages_are_shown_in_english():
    audit = PatchAudit("p", "d", {"en": "d"}, [], "needs-work", ["dco failed: x", "ruff failed: y"])
    audit.reason_messages = [Message("reason.failed", {"gate": "dco", "summary": "x"})]
    assert reason_texts(audit, "zh") == ["dco failed: x", "ruff failed: y"]
    audit.reason_messages.append(Message("reason.failed", {"gate": "ruff", "summary": "y"}))
    assert reason_texts(audit, "zh") == ["dco 未通过：x", "ruff 未通过：y"]


def test_cached_results_carry_their_message(audited):
    again = AuditResult.from_dict(audited[1])
    gates = [g for p in again.patches for g in p.gates if g.status != "skipped"]
    assert gates and all(g.cached and g.message is not None for g in gates)
    text = render_markdown(again, "zh")
    assert "缺少作者的 Signed-off-by" in text and "lack the author" not in text


def test_patchkit_own_ruff_findings_are_translated_ruffs_are_kept() -> None:
    from patchkit.report.html import own_ruff_message

    ours = {"code": "blank-line-at-eof", "message": "blank line at end of file"}
    ruffs = {"code": "SIM102", "message": "Use a single `if` statement instead of nested `if` statements"}
    assert own_ruff_message(ours, "zh") == "文件末尾有多余空行"
    assert own_ruff_message(ours, "en") == "blank line at end of file"
    assert own_ruff_message(ruffs, "zh") == ruffs["message"]
    assert own_ruff_message("not a finding", "zh") == ""
