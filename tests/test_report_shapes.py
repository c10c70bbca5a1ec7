"""Four shapes the report got wrong: the environment printed as Python reprs, one upgrade sentence
per forced field on one line range, per-patch readers that did not see the CODEOWNERS record the
series lead names, and a negation wrapped onto the next line of a commit message."""

from __future__ import annotations

import json
import re

from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.audit.model import AuditResult, PatchAudit
from patchkit.cli import app
from patchkit.diff.model import Commit
from patchkit.guide import review_guide
from patchkit.report.html import render_html
from patchkit.report.words import in_all_languages
from patchkit.values import Pin
from tests.test_guide import file_patch
from tests.test_guide_lead import audit, lead

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()


def _result(environment: dict) -> AuditResult:
    pa = PatchAudit(
        patch="0001-x.patch", domain="core", title={"en": "x"}, gates=[], verdict="ready", reasons=[]
    )
    return AuditResult("series", Pin(source="path", path="/base"), [pa], "ready", environment)


def test_the_environment_is_a_definition_list_not_python_reprs():
    env = {
        "python": "3.11.7",
        "series_patches": ["0001-a.patch", "0002-b.patch"],
        "upstream_missing": [],
        "tests": {"interpreter": "/venv/bin/python", "torch": "2.13.0", "extra": {"cuda": False}},
    }
    html = render_html(_result(env), "en")
    block = html[html.index('<section id="environment"') :][:3000]
    assert "['" not in block and "{'" not in block and "': " not in block
    assert "<dt><code>series_patches</code></dt><dd>0001-a.patch, 0002-b.patch</dd>" in block
    assert "<dt><code>upstream_missing</code></dt><dd>none</dd>" in block
    nested = re.search(r"<dt><code>tests</code></dt><dd><dl class=\"kv env\">(.*?)</dl></dd>", block)
    assert nested and "<dt><code>interpreter</code></dt><dd>/venv/bin/python</dd>" in nested.group(1)
    assert "<dt><code>extra.cuda</code></dt><dd>false</dd>" in nested.group(1)
    assert "<dd>0001-a.patch、0002-b.patch</dd>" in render_html(_result(env), "zh")


FOUR_FORCED = (
    "def f(vllm_config):\n    pass\n",
    "def f(vllm_config):\n"
    "    vllm_config.cache_config.block_size = 16\n"
    "    vllm_config.cache_config.swap_space = 0\n"
    "    vllm_config.scheduler_config.max_num_seqs = 8\n"
    "    vllm_config.scheduler_config.max_num_batched_tokens = 4096\n",
)


def test_one_upgrade_sentence_for_the_fields_forced_on_one_line_range():
    pa = audit({"vllm/mod.py": FOUR_FORCED})
    forced = [f for f in pa.guide["findings"] if f["kind"] == "forced-setting"]
    assert len(forced) == 4  # each field is still its own finding, with its line
    text = lead(pa)
    assert text.count("if you set") == 1 and "check it is not overridden" not in text
    for setting, value in (
        ("cache_config.block_size", "16"),
        ("cache_config.swap_space", "0"),
        ("scheduler_config.max_num_seqs", "8"),
        ("scheduler_config.max_num_batched_tokens", "4096"),
    ):
        assert f"`{setting}` (to `{value}`)" in text
    assert "(vllm/mod.py, lines 2–5)" in text
    zh = lead(pa, "zh")
    assert zh.count("若你自己设置了") == 1 and "第 2–5 行" in zh
    assert (
        sum("are overridden" in str(in_all_languages(f)) for f in pa.guide["lead"]["params"]["sentences"])
        <= 1
    )


def test_two_forced_fields_far_apart_stay_two_sentences():
    far = "def f(vllm_config):\n    vllm_config.cache_config.block_size = 16\n" + "    x = 1\n" * 30
    far += "    vllm_config.cache_config.swap_space = 0\n"
    text = lead(audit({"vllm/mod.py": ("def f(vllm_config):\n    pass\n", far)}))
    assert text.count("if you set") == 2


def test_per_patch_readers_and_the_series_lead_name_the_same_codeowners_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = fake_base(tmp_path / "base")
    (base / ".github").mkdir()
    (base / ".github" / "CODEOWNERS").write_text("# owners\n* @everyone\n/vllm/ @alice @bob\n")
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    series = write_series(
        tmp_path / "series",
        {"0001-calc.patch": patch_text(calc, trailers="Signed-off-by: Ada Dev <ada@example.org>")},
    )
    out = tmp_path / "audit.json"
    result = CliRunner().invoke(
        app,
        [
            "audit",
            str(series),
            "--base",
            str(base),
            "--gates",
            "apply,dco",
            "--json",
            str(out),
            "--html",
            str(tmp_path / "a.html"),
        ],
    )
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    patch = record["patches"][0]
    assert patch["reviewers"] == ["@alice", "@bob"]
    assert patch["owner_lines"] == [
        {"line": 3, "pattern": "/vllm/", "owners": ["@alice", "@bob"], "files": 1}
    ]
    own, whole = patch["guide"]["lead"]["en"], record["guide"]["lead"]["en"]
    expected = "Who should read it: @alice, @bob (CODEOWNERS line 3 `/vllm/`)."
    assert expected in own and expected in whole
    assert "no CODEOWNERS or labels in the record" not in own
    html = (tmp_path / "a.html").read_text()
    assert "CODEOWNERS line 3</span>" not in html and "CODEOWNERS line 3 <code>/vllm/</code>" in html


def _message_findings(body: str) -> list[dict]:
    calc = file_patch("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    commit = Commit(sha=None, author="Ada", email="ada@example.org", date="", subject="calc: swap", body=body)
    found = review_guide(
        [calc],
        {"vllm/calc.py": CALC.encode()}.get,
        {"vllm/calc.py": CALC.replace("a + b", "b + a").encode()}.get,
        [commit],
        "core",
    )
    return [f for f in found["findings"] if f["kind"] == "message-names-untouched-file"]


def test_a_negation_on_the_next_line_of_a_wrapped_sentence_is_no_claim():
    assert _message_findings("Swap the operands. The registry in vllm/envs.py is left\nuntouched.\n") == []
    assert _message_findings("Swap the operands; vllm/envs.py is not\ntouched by this commit.\n") == []
    # a sentence that claims a change is still checked, also beside a negated one on the same line
    claimed = _message_findings("Also updates vllm/envs.py. The rest is left\nuntouched.\n")
    assert [f["message"]["params"]["name"] for f in claimed] == ["vllm/envs.py"]
    # a list item is its own line: the negation above it does not cover it
    listed = _message_findings("Nothing else is\nchanged.\n- adds vllm/envs.py\n")
    assert [f["message"]["params"]["name"] for f in listed] == ["vllm/envs.py"]


def test_one_upgrade_sentence_for_the_variables_read_on_one_line_range():
    names = [f"VLLM_ACME_TTL_P{n}" for n in (25, 50, 75, 90)]
    new = "import os\n" + "".join(
        f"{n[5:]} = int(os.getenv('{n}', '{60 * i}'))\n" for i, n in enumerate(names, 1)
    )
    text = lead(audit({"vllm/mod.py": ("import os\n", new)}))
    upgrade = text.split("Before upgrading:")[1].split("Follow-ups:")[0]
    assert upgrade.count("if you run with") == 1
    assert all(f"`{n}` '{60 * i}'" in upgrade for i, n in enumerate(names, 1))
    assert "(vllm/mod.py, lines 2–5)" in upgrade


def test_files_are_listed_and_shown_in_the_guides_reading_order():
    """The guide says contract, consumers, tests; the file list and the diffs below it read in that
    order, not alphabetically (files the guide does not order come last, as the diff had them)."""
    diff = "".join(
        file_diff(path, "x = 1\n", "x = 2\n")
        for path in ("vllm/a_user.py", "vllm/b_other.py", "vllm/envs.py")
    )
    order = [
        {"path": "vllm/envs.py", "role": "contract", "why": {"en": "read first", "zh": "先读"}},
        {"path": "vllm/a_user.py", "role": "consumer", "why": {"en": "then", "zh": "然后"}},
    ]
    files = [
        {"path": p, "added": 1, "removed": 1} for p in ("vllm/a_user.py", "vllm/b_other.py", "vllm/envs.py")
    ]
    pa = PatchAudit(
        patch="0001-x.patch", domain="core", title={"en": "x"}, gates=[], verdict="ready", reasons=[],
        files=files, diff=diff, guide={"order": order},
    )  # fmt: skip
    html = render_html(AuditResult("series", Pin(source="path", path="/base"), [pa], "ready"), "en")
    listed = re.search(r'<ul class="plain files">(.*?)</ul>', html, re.S).group(1)
    assert re.findall(r"<code>(vllm/[a-z_]+\.py)</code>", listed) == [
        "vllm/envs.py",
        "vllm/a_user.py",
        "vllm/b_other.py",
    ]
    shown = re.findall(r'<details class="file" id="p1-f\d+" open>\s*<summary><code>([^<]+)</code>', html)
    assert shown == ["vllm/envs.py", "vllm/a_user.py", "vllm/b_other.py"]
