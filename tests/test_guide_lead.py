"""The lead paragraph: three priorities with a reading time, decisions, order, readers, upgrade advice;
the gates' findings (ruff F821, the imports gate) folded in; the series lead; deterministic words."""

from __future__ import annotations

from patchkit.audit.model import GateResult, PatchAudit
from patchkit.guide import finish, review_guide, series_lead
from patchkit.report.words import in_all_languages
from tests.test_guide import file_patch

MOD = "vllm/mod.py"


def audit(changes: dict, gates=(), name="0001-x.patch", depends_on=(), **extra) -> PatchAudit:
    files = [file_patch(p, o, n) for p, (o, n) in changes.items()]
    pre = {p: (o.encode() if o is not None else None) for p, (o, _) in changes.items()}
    post = {p: (n.encode() if n is not None else None) for p, (_, n) in changes.items()}
    raw = review_guide(files, pre.get, post.get, [], "core")  # messages, not yet words
    pa = PatchAudit(
        patch=name,
        domain="core",
        title={"en": name},
        gates=list(gates),
        verdict="ready",
        reasons=[],
        files=[{"path": fp.path, "added": fp.added, "removed": fp.removed} for fp in files],
        depends_on=list(depends_on),
    )
    pa.guide = {k: v for k, v in raw.items()}
    for key, value in extra.items():
        setattr(pa, key, value)  # reviewers / labels, as the upstream-metadata record carries them
    pa.guide = finish(pa)
    return pa


def lead(pa: PatchAudit, lang: str = "en") -> str:
    return in_all_languages(pa.guide["lead"])[lang]


def ruff(*findings: dict) -> GateResult:
    return GateResult("ruff", "failed" if findings else "passed", "", {"findings": list(findings)})


FORCED = ("def f(c):\n    pass\n", "def f(c):\n    c.cache_config.enable_prefix_caching = False\n")


def test_three_levels_with_a_reading_time():
    close = audit({MOD: FORCED})
    assert close.guide["priority"]["level"] == "close-read"
    assert lead(close).startswith("Worth a close read, about ") and lead(close, "zh").startswith(
        "值得精读，约 "
    )
    skim = audit({MOD: ("x = 1\n", "import os\nx = 1\ntry:\n    y = 2\nexcept Exception:\n    pass\n")})
    assert skim.guide["priority"]["level"] == "skim" and lead(skim, "zh").startswith("可快速浏览")
    skip = audit({"tests/test_mod.py": ("def test_a():\n    pass\n", "def test_a():\n    assert 1\n")})
    assert skip.guide["priority"]["level"] == "skip" and lead(skip, "zh").startswith("可以跳过")


def test_reading_time_grows_with_size_and_kernels_read_slower():
    small = audit({MOD: ("x = 1\n", "x = 2\n")}).guide["priority"]["minutes"]
    body = "".join(f"v{i} = {i}\n" for i in range(300))
    python = audit({MOD: ("", body)}).guide["priority"]["minutes"]
    kernel = audit({"csrc/k.cu": ("", body.replace("=", "+=").replace("\n", ";\n"))}).guide["priority"][
        "minutes"
    ]
    assert small < python < kernel


def test_decisions_upgrade_advice_and_order():
    pa = audit(
        {
            "vllm/config/cache.py": ("class C:\n    size: int = 1\n", "class C:\n    size: int = 2\n"),
            MOD: FORCED,
            "tests/test_mod.py": ("def test_a():\n    pass\n", "def test_a():\n    assert 1\n"),
        }
    )
    en, zh = lead(pa), lead(pa, "zh")
    assert "Decisions to judge: `cache_config.enable_prefix_caching` is forced to `False`" in en
    assert "if you set `cache_config.enable_prefix_caching` yourself" in en
    assert "if you never set `C.size`, check the new default 2 (was 1)" in en
    assert (
        "the contract vllm/config/cache.py, then its consumers vllm/mod.py, then the tests tests/test_mod.py"
        in en
    )
    assert "契约 vllm/config/cache.py → 消费方 vllm/mod.py → 测试 tests/test_mod.py" in zh
    assert "升级前请确认" in zh


def test_readers_from_the_record_when_present_else_the_area():
    bare = audit({MOD: FORCED})
    assert "the owners of the core area (no CODEOWNERS or labels in the record)" in lead(bare)
    owned = audit({MOD: FORCED}, reviewers=["@alice", "@bob"], labels=["v1"])
    assert "Who should read it: @alice, @bob (labels v1)." in lead(owned)
    assert "建议由 @alice、@bob 阅读（标签 v1）" in lead(owned, "zh")


def test_ruff_f821_on_a_code_path_escalates_to_close_read():
    change = {MOD: ("def f():\n    return 1\n", "def f():\n    return undefined_thing\n")}
    calm = audit(change, [ruff()])
    assert calm.guide["priority"]["level"] != "close-read"
    f821 = {"file": MOD, "line": 2, "code": "F821", "message": "Undefined name `undefined_thing`"}
    loud = audit(change, [ruff(f821)])
    assert loud.guide["priority"]["level"] == "close-read"
    (found,) = [f for f in loud.guide["findings"] if f["kind"] == "undefined-name"]
    assert found["severity"] == "high" and found["message"]["params"]["name"] == "undefined_thing"
    assert "`undefined_thing` is undefined at vllm/mod.py:2" in lead(loud)


def test_the_imports_gate_result_replaces_our_own_check():
    change = {
        "vllm/lib.py": ("def a():\n    pass\n", "def a():\n    pass\n\nB = 1\n"),
        "vllm/user.py": ("x = 1\n", "from vllm.lib import a, missing\n"),
    }
    own = audit(change)
    assert [
        f["message"]["params"]["name"] for f in own.guide["findings"] if f["kind"] == "import-missing"
    ] == ["missing"]
    gate = GateResult(
        "imports", "failed", "", {"missing": [{"file": "vllm/user.py", "line": 1, "name": "other"}]}
    )
    theirs = audit(change, [gate])
    names = [
        f["message"]["params"]["name"] for f in theirs.guide["findings"] if f["kind"] == "import-missing"
    ]
    assert names == ["other"]


def test_series_lead_and_determinism():
    first = audit({MOD: FORCED}, name="0001-a.patch")
    second = audit({"vllm/b.py": ("x = 1\n", "x = 2\n")}, name="0002-b.patch", depends_on=["0001-a.patch"])
    words = in_all_languages(series_lead([first, second]))
    assert words["en"].startswith("2 patches, about ")
    assert "1 worth a close read" in words["en"]
    assert "Read 0001-a.patch first: 0002-b.patch need(s) it." in words["en"]
    assert words["zh"].startswith("共 2 个补丁")
    again = in_all_languages(series_lead([audit({MOD: FORCED}, name="0001-a.patch"), second]))
    assert again == words and lead(first) == lead(audit({MOD: FORCED}, name="0001-a.patch"))


def test_upgrade_advice_skips_opt_in_variables_but_keeps_fallbacks():
    new = "import os\nA = os.getenv('VLLM_OPT_IN')\nB = os.getenv('VLLM_NEW', os.getenv('VLLM_OLD', '1'))\n"
    text = lead(audit({MOD: ("import os\n", new)}))
    assert "VLLM_OPT_IN" not in text.split("Before upgrading:")[1].split("Follow-ups:")[0]
    upgrade = text.split("Before upgrading:")[1].split("Follow-ups:")[0]
    # VLLM_NEW and its fallback VLLM_OLD, read on one line: one sentence names both
    assert "if you run with any of `VLLM_NEW`, `VLLM_OLD` unset" in upgrade


def test_a_large_change_without_high_findings_is_still_a_close_read():
    body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(800))
    pa = audit({MOD: (None, body), "tests/test_mod.py": (None, "def test_a():\n    assert 1\n")})
    assert not any(f["severity"] == "high" for f in pa.guide["findings"])
    assert pa.guide["priority"]["level"] == "close-read" and pa.guide["priority"]["minutes"] >= 60
    assert "min of changes to read" in in_all_languages(pa.guide["priority"]["reason"])["en"]
