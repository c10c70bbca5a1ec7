"""Labels, reviewers and focused tests from the base's own metadata, through the audit and report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.focus import focused_tests, patch_labels, patch_reviewers
from patchkit.audit.gates import tests as tests_gate_module
from patchkit.audit.gates.tests import TestSettings
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.report.html import render_html
from patchkit.report.i18n import message_text
from patchkit.report.markdown import render_markdown
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.upstream.buildkite import parse_pipeline
from patchkit.upstream.codeowners import parse_codeowners
from patchkit.upstream.mergify import parse_mergify
from patchkit.values import Pin

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
MERGIFY = """\
pull_request_rules:
- name: label-calc
  conditions: [files~=^vllm/calc]
  actions: {label: {add: [calculator]}}
- name: label-core
  conditions: [files~=^vllm/]
  actions: {label: {add: [core]}}
"""
OWNERS = "/vllm @core-team\n/vllm/calc.py @ada @bob\n"
STEPS = """\
steps:
- label: Calc (CPU)
  key: calc-cpu
  device: cpu-small
  source_file_dependencies: [vllm/calc.py, tests/test_calc.py]
  commands: [pytest -v -s test_calc.py]
- label: GPU kernels
  key: gpu
  device: h100
  source_file_dependencies: [vllm/]
  commands: [pytest -v -s gpu]
- label: Unrelated
  device: h100
  source_file_dependencies: [docs/]
  commands: [pytest -v -s test_hub.py]
"""
GPU_TEST = "from vllm.calc import add\n\n\ndef test_gpu_add():\n    assert add(1, 1) == 2\n"


def test_focused_tests_narrow_covering_steps_to_tests_that_exercise_the_change() -> None:
    steps = parse_pipeline(STEPS, ".buildkite/test_areas/x.yaml")
    files = {
        "tests/test_calc.py": b"import pytest\n",  # named after vllm/calc.py
        "tests/gpu/test_gpu_calc.py": GPU_TEST.encode(),  # imports it
        "tests/gpu/test_other.py": b"from vllm.other import x\n",  # neither
        "tests/test_hub.py": b"from vllm.calc import add\n",  # its step does not cover the change
    }

    def listing(target: str) -> list[str]:
        return sorted(p for p in files if p == target or p.startswith(target.rstrip("/") + "/"))

    found = focused_tests(["vllm/calc.py"], steps, listing, files.get)
    assert [(t.path, t.why, t.accelerator) for t in found] == [
        ("tests/test_calc.py", "mirrors vllm/calc.py", None),  # a CPU step runs it
        ("tests/gpu/test_gpu_calc.py", "imports vllm/calc.py", "h100"),
    ]
    assert [s.key for s in found[0].steps] == ["calc-cpu"] and found[1].steps[0].label == "GPU kernels"
    changed = focused_tests(["vllm/calc.py", "tests/gpu/test_other.py"], steps, listing, files.get)
    assert changed[0].path == "tests/gpu/test_other.py" and changed[0].why == "changed"
    assert focused_tests(["docs/x.md"], steps[:2], listing, files.get) == []
    named = parse_pipeline(
        "steps:\n- label: Named\n  device: cpu\n  source_file_dependencies: [vllm/other.py]\n"
        "  commands: [pytest gpu/test_other.py::test_x]\n",
        "p",
    )
    [hit] = focused_tests(["vllm/other.py"], named, listing, lambda path: b"")
    assert (hit.path, hit.why, hit.accelerator) == ("tests/gpu/test_other.py", "named vllm/other.py", None)


def test_a_shared_imports_memo_reads_each_test_file_once_across_patches() -> None:
    """The audit passes one memo for every patch on a base: a test file's imports are read once."""
    steps = parse_pipeline(STEPS, ".buildkite/test_areas/x.yaml")
    files = {"tests/gpu/test_gpu_calc.py": GPU_TEST.encode(), "tests/gpu/test_other.py": b"import os\n"}
    reads: list[str] = []

    def read(path: str) -> bytes | None:
        reads.append(path)
        return files.get(path)

    def listing(target: str) -> list[str]:
        return sorted(p for p in files if p.startswith(target.rstrip("/") + "/"))

    memo: dict[str, list[str]] = {}
    first = focused_tests(["vllm/calc.py"], steps, listing, read, imports=memo)
    second = focused_tests(["vllm/calc.py", "vllm/x.py"], steps, listing, read, imports=memo)
    assert [t.path for t in first] == [t.path for t in second] == ["tests/gpu/test_gpu_calc.py"]
    assert sorted(reads) == ["tests/gpu/test_gpu_calc.py", "tests/gpu/test_other.py"]  # once each
    alone = focused_tests(["vllm/calc.py"], steps, listing, read)  # no memo: reads again
    assert [t.path for t in alone] == ["tests/gpu/test_gpu_calc.py"] and len(reads) == 4


def test_labels_and_reviewers_of_a_patch() -> None:
    labels, owners = parse_mergify(MERGIFY, "m"), parse_codeowners(OWNERS)
    assert patch_labels(["vllm/calc.py", "vllm/hub.py"], labels) == ["core", "calculator"]
    assert patch_reviewers(["vllm/calc.py", "vllm/hub.py", "vllm/x.py"], owners) == [
        "@core-team",
        "@ada",
        "@bob",
    ]
    assert patch_reviewers(["docs/x.md"], owners) == []


@pytest.fixture
def upstream_base(tmp_path: Path, monkeypatch) -> tuple[BaseTree, Pin]:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tests_gate_module, "host_accelerator", lambda: False)
    root = fake_base(tmp_path / "base")
    (root / ".github").mkdir()
    (root / ".github" / "mergify.yml").write_text(MERGIFY)
    (root / ".github" / "CODEOWNERS").write_text(OWNERS)
    (root / ".buildkite" / "test_areas").mkdir(parents=True)
    (root / ".buildkite" / "test_areas" / "calc.yaml").write_text(STEPS)
    (root / "tests" / "gpu").mkdir()
    (root / "tests" / "gpu" / "test_gpu_calc.py").write_text(GPU_TEST)
    (root / "tests" / "gpu" / "test_fast.py").write_text("from vllm.fast import f\n")
    return BaseTree(root), Pin(source="path", path=str(root), tree_hash=tree_hash(root))


def _audit(base: BaseTree, pin: Pin, series: Path):
    settings = TestSettings(
        python=sys.executable, base_root=base.root, base_hash=pin.tree_hash, test_timeout=120
    )
    options = AuditOptions(gates=["apply", "tests"], jobs=1, settings={"tests": settings})
    return run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options)


def test_audit_records_labels_reviewers_and_test_provenance(upstream_base, tmp_path: Path) -> None:
    base, pin = upstream_base
    new = CALC.replace("import os", "import os  # env")
    fast = "def f():\n    return 1\n"
    series = write_series(tmp_path / "series", {
        "0001-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, new), trailers=SIGN),
        "0002-fast.patch": patch_text(file_diff("vllm/fast.py", None, fast), trailers=SIGN),
    })  # fmt: skip
    result = _audit(base, pin, series)
    calc, fast = result.patches
    assert calc.labels == ["calculator", "core"] and calc.reviewers == ["@ada", "@bob"]
    assert [(t.path, t.accelerator) for t in calc.focused_tests] == [
        ("tests/test_calc.py", None),
        ("tests/gpu/test_gpu_calc.py", "h100"),
    ]
    tests = next(g for g in calc.gates if g.gate == "tests")
    assert tests.status == "passed" and tests.details["selection"] == ["tests/test_calc.py"]
    assert tests.details["expected_could_not_run"] == [
        {"path": "tests/gpu/test_gpu_calc.py", "device": "h100"}
    ]
    # only an accelerator step runs its test: expected could-not-run here, and the reason says where it runs
    gate = next(g for g in fast.gates if g.gate == "tests")
    assert gate.status == "could-not-run" and "runs on h100 in upstream CI" in message_text(gate.message)
    assert gate.details["expected_could_not_run"] == [{"path": "tests/gpu/test_fast.py", "device": "h100"}]
    assert fast.labels == ["core"] and fast.reviewers == ["@core-team"]

    fill_words(result)
    html = render_html(result, "en")
    assert "By vLLM label" in html and '<span class="tag">calculator</span>' in html
    assert "<code>@ada</code>, <code>@bob</code>" in html
    assert (
        "GPU kernels" in html
        and "runs on h100 in upstream CI" in html
        and ".buildkite/test_areas/calc.yaml" in html
    )
    md = render_markdown(result, "en")
    assert "- `core`: `0001-calc.patch`, `0002-fast.patch`" in md
    assert "`tests/gpu/test_gpu_calc.py` ← GPU kernels (`.buildkite/test_areas/calc.yaml`, h100)" in md
    assert "runs on h100 in upstream CI" in render_html(type(result).from_dict(result.to_dict()), "en")


def test_a_base_without_metadata_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    root = fake_base(tmp_path / "base")
    base, pin = BaseTree(root), Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    series = write_series(
        tmp_path / "series", {"0001-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, CALC + "\n"))}
    )
    result = run_audit(series, base, pin, load_rules(), AuditOptions(gates=["apply"], jobs=1))
    assert result.environment["upstream_missing"] == [".github/mergify.yml", ".github/CODEOWNERS",
                                                      ".buildkite/test_areas/*.yaml"]  # fmt: skip
    pa = result.patches[0]
    assert pa.labels == [] and pa.reviewers == [] and pa.focused_tests == []
    assert "the base ships no .github/mergify.yml" in render_html(result, "en")
