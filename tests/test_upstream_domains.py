"""Domains past the rules: vLLM's labels, then its layout; tests travel with the code they test;
domains.toml extends the shipped rules; unclaimed changes are all named at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.errors import UserError
from patchkit.split.rules import Classifier, load_rules, parse_rules
from patchkit.split.upstream import extend_domains, imported_modules, layout_dir
from patchkit.upstream.mergify import parse_mergify

LABELS = parse_mergify(
    r"""
pull_request_rules:
- name: quant
  conditions: [files~=^vllm/model_executor/layers/quantization/]
  actions: {label: {add: [quantization]}}
- name: v1
  conditions: [files~=^vllm/v1/]
  actions: {label: {add: [v1]}}
- name: nvidia
  conditions: [files~=cuda]
  actions: {label: {add: [nvidia]}}
""",
    "m",
)
RULES = parse_rules(
    """
[[domain]]
name = "spec-decode"
paths = ["vllm/v1/spec_decode/**"]
[[domain]]
name = "other"
fallback = true
""",
    "r.toml",
)


def _verdict(domains, path):
    return Classifier(domains).path_domain(path)


def test_labels_then_layout_then_fallback() -> None:
    files = {p: b"x = 1\n" for p in (
        "vllm/v1/spec_decode/eagle.py",  # the rules
        "vllm/model_executor/layers/quantization/awq.py",  # a specific label
        "vllm/v1/attention/backends/flash.py",  # only the broad v1 label: the layout wins
        "vllm/platforms/cuda.py",  # an unanchored label: the layout wins
        "vllm/v1/cudagraph_dispatcher.py",  # no directory of its own: the broad label
        "csrc/attention/kernel.cu",  # mirrors vllm/v1/attention
        "vllm/_custom_ops.py",  # nothing: the fallback
    )}  # fmt: skip
    domains = extend_domains(RULES, LABELS, files)
    names = ["spec-decode", "quantization", "v1", "attention", "platforms", "other"]
    assert [d.name for d in domains] == names
    got = {p: _verdict(domains, p) for p in files}
    assert {p: v.domain for p, v in got.items()} == {
        "vllm/v1/spec_decode/eagle.py": "spec-decode",
        "vllm/model_executor/layers/quantization/awq.py": "quantization",
        "vllm/v1/attention/backends/flash.py": "attention",
        "vllm/platforms/cuda.py": "platforms",
        "vllm/v1/cudagraph_dispatcher.py": "v1",
        "csrc/attention/kernel.cu": "attention",
        "vllm/_custom_ops.py": "other",
    }
    assert got["vllm/model_executor/layers/quantization/awq.py"].reason.startswith("vLLM label quantization")
    assert got["vllm/v1/attention/backends/flash.py"].reason == "vLLM directory attention/"
    assert [d.origin for d in domains] == ["rules", "mergify", "mergify", "layout", "layout", "rules"]
    assert RULES[0].rules[0].paths == ["vllm/v1/spec_decode/**"]  # the caller's rules are not edited


def test_tests_travel_with_the_code_they_test() -> None:
    files = {
        "vllm/v1/sample/rejection_sampler.py": b"x = 1\n",
        "vllm/model_executor/layers/quantization/fp8.py": b"x = 1\n",
        "vllm/v1/attention/backends/flash.py": b"x = 1\n",
        # mirrored path: same directory, test_<stem>.py
        "tests/v1/sample/test_rejection_sampler.py": b"import torch\n",
        # imports: a changed module elsewhere
        "tests/kernels/test_flash_kernel.py": b"from vllm.v1.attention.backends.flash import (\n  A,\n)\n",
        # the mirrored directory when it imports nothing changed
        "tests/quantization/test_other.py": b"from vllm.config import X\n",
        # a rule that names the test keeps it
        "tests/v1/spec_decode/test_x.py": b"from vllm.v1.attention.backends import flash\n",
    }
    rules = parse_rules(RULES_TEXT_WITH_TESTS, "r.toml")
    domains = extend_domains(rules, LABELS, files)
    got = {p: _verdict(domains, p) for p in files if p.startswith("tests/")}
    assert got["tests/v1/sample/test_rejection_sampler.py"].domain == "sample"
    assert got["tests/v1/sample/test_rejection_sampler.py"].reason.endswith("(mirrored path)")
    assert got["tests/kernels/test_flash_kernel.py"].domain == "attention"
    assert got["tests/kernels/test_flash_kernel.py"].reason.endswith("(imports it)")
    assert got["tests/quantization/test_other.py"].domain == "quantization"
    assert got["tests/v1/spec_decode/test_x.py"].domain == "spec-decode"


RULES_TEXT_WITH_TESTS = """
[[domain]]
name = "spec-decode"
paths = ["vllm/v1/spec_decode/**", "tests/v1/spec_decode/**"]
[[domain]]
name = "other"
fallback = true
"""


def test_layout_and_imports_helpers() -> None:
    assert layout_dir("vllm/model_executor/layers/fused_moe/x.py") == "fused_moe"
    assert layout_dir("tests/kernels/attention/test_x.py") == "attention"
    assert layout_dir("csrc/ops.h") == "kernels"
    assert layout_dir("vllm/envs.py") is None and layout_dir("setup.py") is None
    text = "from vllm.a import b, c as d\nfrom vllm.e import (\n f,\n)\nimport vllm.g\nfrom os import path\n"
    assert imported_modules(text) == ["vllm/a.py", "vllm/a/__init__.py", "vllm/a/b.py", "vllm/a/c.py",
                                      "vllm/e.py", "vllm/e/__init__.py", "vllm/e/f.py",
                                      "vllm/g.py", "vllm/g/__init__.py"]  # fmt: skip


def test_rules_file_extends_the_defaults_unless_replace(tmp_path: Path) -> None:
    defaults = [d.name for d in load_rules()]
    extra = tmp_path / "domains.toml"
    extra.write_text('[[domain]]\nname = "mine"\npaths = ["vllm/mine/**"]\n'
                     '[[domain]]\nname = "scheduler"\npaths = ["vllm/sched2/**"]\n')  # fmt: skip
    names = [d.name for d in load_rules(extra)]
    assert names[:2] == ["mine", "scheduler"] and names[-1] == "other"
    assert sorted(names) == sorted(set(defaults) | {"mine"})
    assert next(d for d in load_rules(extra) if d.name == "scheduler").rules[0].paths == ["vllm/sched2/**"]
    extra.write_text('replace = true\n[[domain]]\nname = "mine"\npaths = ["vllm/mine/**"]\n')
    assert [d.name for d in load_rules(extra)] == ["mine"]
    extra.write_text('[[domain]]\nname = "rest"\nfallback = true\n')
    assert [d.name for d in load_rules(extra) if d.fallback] == ["rest"]
    extra.write_text('replace = "yes"\n[[domain]]\nname = "rest"\nfallback = true\n')
    with pytest.raises(UserError, match="'replace' must be true or false"):
        load_rules(extra)


def test_unclaimed_changes_are_all_listed_with_the_fallback_snippet(tmp_path: Path) -> None:
    from patchkit.base.tree import BaseTree
    from patchkit.diff.filediff import parse_diff
    from patchkit.diff.model import Patch, Replay
    from patchkit.split.replay import split_replay

    base = tmp_path / "base"
    (base / "pkg").mkdir(parents=True)
    diff = []
    for i in range(12):
        (base / "pkg" / f"m{i}.py").write_text("a = 1\n")
        diff += [f"--- a/pkg/m{i}.py", f"+++ b/pkg/m{i}.py", "@@ -1 +1 @@", "-a = 1", "+a = 2"]
    files = parse_diff(diff, "d.diff")
    rules = parse_rules('[[domain]]\nname = "x"\npaths = ["vllm/x/**"]\n', "r.toml")
    with pytest.raises(UserError) as info:
        split_replay(Replay([Patch(commit=None, files=files)], ["d.diff"]), BaseTree(base), rules, "")
    text = str(info.value)
    assert "12 file(s): pkg/m0.py, pkg/m1.py, pkg/m10.py" in text and "pkg/m7.py and 2 more;" in text
    assert '[[domain]] name = "other" fallback = true' in text and "\n" not in text
