"""Reports from a hand-written AuditResult: Markdown and JUnit goldens, JUnit schema, i18n, merge, CLI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from patchkit.audit.model import AuditResult
from patchkit.report import render_all
from patchkit.report.html import render_html
from patchkit.report.i18n import catalogue, default_lang, t
from patchkit.report.junit import render_junit
from patchkit.report.markdown import render_markdown

FIXTURES = Path(__file__).parent / "fixtures" / "report"


def load(name: str = "audit_small.json") -> AuditResult:
    return AuditResult.from_dict(json.loads((FIXTURES / name).read_text("utf-8")))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_markdown_golden(lang):
    assert render_markdown(load(), lang) == (FIXTURES / f"golden.{lang}.md").read_text("utf-8")


def test_junit_golden():
    assert render_junit(load(), "en") == (FIXTURES / "golden.junit.xml").read_text("utf-8")


def test_junit_valid_against_schema_and_never_passes_what_did_not_run():
    xmlschema = pytest.importorskip("xmlschema")
    text = render_junit(load(), "en")
    xmlschema.XMLSchema(str(FIXTURES / "junit-10.xsd")).validate(text)
    root = ET.fromstring(text)
    cases = {(s.get("name"), c.get("name")): c for s in root.iter("testsuite") for c in s.iter("testcase")}
    tests = cases[("0001-spec-decode.patch", "tests")]  # requested, could not run: an error, never a pass
    assert tests.find("error").get("message") == "could not run: no CUDA device"
    assert cases[("0001-spec-decode.patch", "ruff")].find("failure") is not None
    assert cases[("0002-logging.patch", "tests")].find("skipped") is not None


def test_junit_skips_a_could_not_run_gate_the_project_accepts():
    result = load()
    result.environment["optional_gates"] = ["tests"]
    root = ET.fromstring(render_junit(result, "en"))
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "0001-spec-decode.patch")
    tests = next(c for c in suite.iter("testcase") if c.get("name") == "tests")
    assert tests.find("skipped") is not None and tests.find("error") is None and suite.get("errors") == "0"


def test_junit_escapes_hostile_input():
    root = ET.fromstring(render_junit(load("audit_hostile.json"), "en"))
    assert root.find("testsuite").get("name").startswith("0001-<script>")  # data, not markup


def test_markdown_is_cut_under_the_limit_and_says_so():
    result = load()
    big = result.patches[0]
    big.guide["findings"] = big.guide["findings"] * 400
    result.patches = [big] * 30
    text = render_markdown(result, "en", limit=60_000)
    assert len(text) <= 60_000
    assert "Cut to stay under GitHub's comment limit" in text and "details of" in text


def test_markdown_neutralises_html():
    text = render_markdown(load("audit_hostile.json"), "en")
    assert "<script>" not in text and "<img" not in text


def test_catalogues_have_the_same_keys_and_placeholders():
    en, zh = catalogue("en"), catalogue("zh")
    assert en.keys() == zh.keys()
    import string

    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    assert {k: fields(v) for k, v in en.items()} == {k: fields(v) for k, v in zh.items()}
    # Chinese sentences follow each other with no separator; every other text is non-empty
    assert all(zh[k].strip() for k in zh if k not in ("list.sep.sentences", "list.sep.follow"))


def test_every_finding_kind_and_ui_key_used_exists():
    from patchkit import guide

    package = Path(guide.__file__).parent  # patchkit/guide/, a package of modules
    text = "".join(p.read_text() for p in sorted(package.glob("*.py")))
    import re

    for kind in set(re.findall(r'_finding\("([a-z-]+)"', text)):
        for prefix in ("finding", "kind", "follow"):
            assert f"{prefix}.{kind}" in catalogue("en"), f"{prefix}.{kind}"
    template = (package.parent / "report" / "templates" / "report.html.j2").read_text()
    for key in re.findall(r"_\('(ui\.[a-z_.-]+[a-z])'[,)]", template):
        assert key in catalogue("en"), key


def test_chinese_reads_naturally():
    assert t("ui.priority.close-read", "zh") == "建议精读"
    assert t("ui.priority.skim", "zh") == "可快速浏览"
    assert t("ui.dco.missing", "zh") == "缺少 DCO 签名（Signed-off-by）"


@pytest.mark.parametrize(
    ("env", "lang"),
    [({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN"}, "en"), ({}, "en")],
)
def test_default_language_from_locale(env, lang):
    assert default_lang(env) == lang


def test_html_links_every_finding_to_an_existing_line_id():
    import re

    html = render_html(load(), "en")
    ids = set(re.findall(r'id="([^"]+)"', html))
    hrefs = re.findall(r'class="where" href="#([^"]+)"', html)
    assert hrefs and all(h in ids for h in hrefs)
    assert 'href="#p1-f1-l11"' in html and 'href="#p1-f2-l3"' in html


def test_html_escapes_every_input_string():
    html = render_html(load("audit_hostile.json"), "zh")
    assert "<script>document" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html


def test_report_command_writes_everything(tmp_path):
    from typer.testing import CliRunner

    from patchkit.cli import app

    out = {k: tmp_path / f"r.{k}" for k in ("html", "md", "xml")}
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(FIXTURES / "audit_small.json"),
            "--html",
            str(out["html"]),
            "--md",
            str(out["md"]),
            "--junit",
            str(out["xml"]),
            "--lang",
            "zh",
        ],
    )
    assert res.exit_code == 1, res.output  # a gate failed
    assert "补丁集审查报告" in out["html"].read_text() and out["md"].read_text().startswith(
        "## 补丁集审查报告"
    )
    ET.fromstring(out["xml"].read_text())
    bad = CliRunner().invoke(app, ["report", str(tmp_path / "missing.json")])
    assert bad.exit_code == 2


def test_render_all_writes_only_what_is_asked(tmp_path):
    render_all(load(), md=tmp_path / "a.md")
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


def test_malformed_free_form_fields_are_refused_with_their_json_path(tmp_path):
    from patchkit.commands.report import load as load_record
    from patchkit.errors import UserError

    good = json.loads((FIXTURES / "audit_small.json").read_text("utf-8"))
    assert load_record(_write(tmp_path / "ok.json", good)).patches  # the fixture itself is renderable
    bad = json.loads(json.dumps(good))
    bad["patches"][0]["guide"]["findings"][0]["line"] = "twelve"
    with pytest.raises(UserError) as info:
        load_record(_write(tmp_path / "bad.json", bad))
    assert "patches[0].guide.findings[0].line: expected an integer, got str" in str(info.value)
    bad = json.loads(json.dumps(good))
    bad["patches"][0]["files"] = [{"path": "vllm/x.py"}]
    with pytest.raises(UserError) as info:
        load_record(_write(tmp_path / "bad2.json", bad))
    assert "patches[0].files[0].added: expected an integer" in str(info.value)


def _write(path, data):
    path.write_text(json.dumps(data), "utf-8")
    return path
