from __future__ import annotations

import pytest

from patchkit.errors import UserError
from patchkit.split.rules import Classifier, glob_regex, load_rules, parse_rules, path_matches

RULES = """
[[domain]]
name = "tools"
paths = ["pkg/tools/**"]
  [[domain.match]]
  paths = ["pkg/envs.py"]
  patterns = ['TOOL_\\w+']

[[domain]]
name = "spec"
paths = ["pkg/spec.py"]
  [[domain.match]]
  paths = ["pkg/envs.py"]
  patterns = ['SPEC_\\w+']

[[domain]]
name = "config"
paths = ["pkg/envs.py", "pkg/*.py"]
"""


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        (
            '[[domain]]\nname = "a"\npaths = ["x"]\npatterns = ["(unclosed"]\n',
            "domain #1 (a)",
            "'patterns': bad regex",
        ),
        ('[[domain]]\nname = "a"\npaths = ["x"]\npath = ["y"]\n', "domain #1 (a)", "unknown key(s) ['path']"),
        ('[[domain]]\nname = "a"\npatterns = ["x"]\n', "domain #1 (a)", "'patterns' needs 'paths'"),
        (
            '[[domain]]\nname = "a"\nfallback = true\n[[domain]]\nname = "b"\nfallback = true\n',
            "",
            "['a', 'b']",
        ),
        (
            '[[domain]]\nname = "a"\npaths = ["x"]\n[[domain]]\nname = "a"\npaths = ["y"]\n',
            "",
            "used twice: ['a']",
        ),
        ('[[domain]]\nname = "b"\npaths = ["x"]\n[[domain]]\nname = "Bad Name"\n', "domain #2", "'name'"),
        (
            '[[domain]]\nname = "a"\n[[domain.match]]\npaths = ["x"]\nregex = ["y"]\n',
            "domain #1 (a)",
            "match",
        ),
        ('[[domain]]\nname = "a"\npaths = []\n', "domain #1 (a)", "'paths' must be a non-empty list"),
        ('[[domain]]\nname = "a"\n', "domain #1 (a)", "needs 'paths'"),
        ("[[domain]\n", "", "invalid TOML"),
    ],
)
def test_rules_errors_name_domain_and_key(text: str, where: str, words: str) -> None:
    with pytest.raises(UserError) as info:
        parse_rules(text, "r.toml")
    assert info.value.where == (f"r.toml: {where}" if where else "r.toml")
    assert words in str(info.value)


def test_glob_semantics() -> None:
    assert glob_regex("vllm/**").match("vllm/a/b/c.py")
    assert glob_regex("vllm/*.py").match("vllm/envs.py")
    assert not glob_regex("vllm/*.py").match("vllm/config/model.py")  # * stays in one segment
    assert glob_regex("vllm/**/x.py").match("vllm/x.py")  # **/ may match no directory
    assert glob_regex("vllm/**/x.py").match("vllm/a/b/x.py")
    assert not glob_regex("vllm/?.py").match("vllm/ab.py")
    assert not glob_regex("vllm/a.py").match("vllm/a.pyc")  # anchored at the end
    assert not glob_regex("vllm/a+b.py").match("vllm/aab.py")  # regex characters are literal
    assert path_matches("vllm/v1/core/kv_cache_utils.py", ["x/**", "vllm/v1/core/kv_cache_*.py"]) == (
        "vllm/v1/core/kv_cache_*.py"
    )


def test_path_rule_and_pattern_anchors_win() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    [v] = c.classify_lines("pkg/tools/a.py", ["+x = 1"], "pkg/tools/a.py:3")
    assert (v.domain, v.reason) == ("tools", "path pkg/tools/**")
    # envs.py is claimed by the 'config' path rule, but a pattern anchor wins over it
    [v] = c.classify_lines("pkg/envs.py", ["+SPEC_LEN = 3"], "pkg/envs.py:3")
    assert v.domain == "spec" and v.reason == r"pattern /SPEC_\w+/ in pkg/envs.py"
    [v] = c.classify_lines("pkg/envs.py", ["+PLAIN = 3"], "pkg/envs.py:3")
    assert v.domain == "config"


def test_mixed_block_split_per_line_with_comment_above() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    block = [
        "+# tools switch",  # comment above TOOL_X → tools (also the leading line)
        "+TOOL_X = 1",
        "+tool_helper = 2",  # unanchored code follows the previous anchor
        "+",  # blank + comment just above SPEC_Y → spec
        "+# speculative",
        "+SPEC_Y = 2",
        "-OLD = 0",  # follows SPEC_Y
    ]
    verdicts = c.classify_lines("pkg/envs.py", block, "pkg/envs.py:7")
    assert [v.domain for v in verdicts] == ["tools", "tools", "tools", "spec", "spec", "spec", "spec"]
    assert verdicts[0].reason.endswith("(comment above)")
    assert verdicts[2].reason.endswith("(nearby line)")


def test_comment_block_follows_the_statement_below_it() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    comment = ["-# old words", "+# new words about the speculative length"]
    [old, new] = c.classify_lines("pkg/envs.py", comment, "pkg/envs.py:4", ["", "SPEC_LEN = 3"])
    assert old.domain == new.domain == "spec"
    assert new.reason.endswith("(the line it documents)")
    # code (not only comments) without an anchor does not look below: the path rule decides
    [v] = c.classify_lines("pkg/envs.py", ["+PLAIN = 1"], "pkg/envs.py:4", ["SPEC_LEN = 3"])
    assert v.domain == "config"
    # nothing anchored below either: the path rule decides
    [v, _] = c.classify_lines("pkg/envs.py", comment, "pkg/envs.py:4", ["PLAIN = 3"])
    assert v.domain == "config"


def test_no_rule_no_fallback_is_error_naming_file_line() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    with pytest.raises(UserError) as info:
        c.classify_lines("other/z.py", ["+a"], "other/z.py:12")
    assert info.value.where == "other/z.py:12"


def test_fallback_domain_used_when_nothing_claims() -> None:
    c = Classifier(parse_rules(RULES + '\n[[domain]]\nname = "rest"\nfallback = true\n', "r.toml"))
    [v] = c.classify_lines("other/z.py", ["+a"], "other/z.py:12")
    assert (v.domain, v.reason) == ("rest", "fallback domain")
    [v] = c.classify_lines("pkg/spec.py", ["+a"], "pkg/spec.py:1")
    assert v.domain == "spec"  # a real rule still comes first


@pytest.mark.parametrize(
    ("path", "line", "domain"),
    [
        ("vllm/tool_parsers/qwen3coder_tool_parser.py", "+def parse(self): ...", "tool-parser"),
        ("vllm/v1/core/block_pool.py", "+        self.free = []", "prefix-caching"),
        ("vllm/config/speculative.py", "+    num_lookahead: int = 0", "spec-decode"),
        ("vllm/envs.py", '+    "VLLM_QWEN3X_TOOL_FIX": lambda: False,', "tool-parser"),
        ("vllm/envs.py", '+    "VLLM_SM70_MTP_X": lambda: 0,', "spec-decode"),
        ("vllm/entrypoints/openai/cli_args.py", '+    parser.add_argument("--host")', "serving"),
        ("vllm/entrypoints/openai/cli_args.py", "+    tool_call_parser: str | None = None", "tool-parser"),
        (
            "vllm/entrypoints/openai/chat_completion/serving.py",
            '+        fmt = request.tool_call_format or "json"',
            "tool-parser",
        ),
        (
            "vllm/entrypoints/openai/chat_completion/serving.py",
            "+        await self._send_keepalive(interval=15)",
            "serving",
        ),
    ],
)
def test_default_rules_cover_vllm_paths(path: str, line: str, domain: str) -> None:
    classifier = Classifier(load_rules())
    [verdict] = classifier.classify_lines(path, [line], f"{path}:1")
    assert verdict.domain == domain


def test_default_rules_have_one_fallback_and_unique_names() -> None:
    domains = load_rules()
    assert [d.name for d in domains if d.fallback] == ["other"]
    assert len({d.name for d in domains}) == len(domains)
    assert Classifier(domains).classify_lines("README.md", ["+x"], "README.md:1")[0].domain == "other"


def test_a_definition_header_goes_with_the_body_that_names_its_domain() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    block = [
        "+def test_tool_timeout():",
        "+    assert TOOL_TIMEOUT == 5",  # tools
        "+",
        "+",
        "+# the spec length must not be zero",
        "+@pytest.mark.skip",
        "+def test_spec_len(",  # header lines without an anchor of their own ...
        "+    monkeypatch,",
        "+):",
        "+    assert SPEC_LEN == 3",  # ... go where the body goes: spec, not the tools above
        "+",
        "+",
    ]
    verdicts = c.classify_lines("pkg/envs.py", block, "pkg/envs.py:7")
    assert [v.domain for v in verdicts] == ["tools"] * 4 + ["spec"] * 8
    assert verdicts[0].reason.endswith("(the definition it opens)")
    assert verdicts[2].domain == "tools"  # the blank lines after a test close it, they stay
    assert verdicts[4].reason.endswith("(comment above the definition)")
    assert verdicts[5].reason.endswith("(the definition it opens)")


def test_a_nested_definition_stays_with_the_function_around_it() -> None:
    c = Classifier(parse_rules(RULES, "r.toml"))
    block = [
        "+def outer():",  # opens a unit: its first anchor is TOOL_X
        "+    x = TOOL_X",
        "+    def helper():",  # deeper than the block's outermost lines: not a unit of its own
        "+        return SPEC_Y",
        "+    return helper",
    ]
    verdicts = c.classify_lines("pkg/envs.py", block, "pkg/envs.py:7")
    assert [v.domain for v in verdicts] == ["tools", "tools", "tools", "spec", "spec"]
    assert verdicts[2].reason.endswith("(nearby line)")
    # a definition whose body names no domain follows the previous anchor, as any line does
    plain = ["+A = TOOL_A", "+def helper():", "+    return 1"]
    assert [v.domain for v in c.classify_lines("pkg/envs.py", plain, "pkg/envs.py:9")] == ["tools"] * 3
