"""An out-of-tree vendor package in a replay is a platform domain of its own, sub-split along its
subpackages mapped to vLLM's areas by the same labels and layout as vllm/ (not 99 % "other"), its
domains ordered so each comes after what it imports; the split table keeps its layout."""

from __future__ import annotations

import json

from fixtures.audit.builder import fake_base, file_diff, patch_text
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.output import source_ranges
from patchkit.split.rules import Classifier
from patchkit.split.upstream import extend_domains, vendor_root
from tests.test_upstream_domains import LABELS, RULES

runner = CliRunner()


def _uses(module: str, name: str, cls: str, attr: str) -> str:
    return f"from {module} import {name}\n\n\nclass {cls}:\n    {attr} = {name}\n"


ACME = {  # an invented vendor plugin, laid out as vendors lay theirs
    "acme_vllm/__init__.py": "def register():\n    return 'acme_vllm.platform.AcmePlatform'\n",
    "acme_vllm/platform.py": _uses("acme_vllm.worker.worker", "AcmeWorker", "AcmePlatform", "worker"),
    "acme_vllm/ops/rms_norm.py": "def rms_norm(x):\n    return x\n",
    "acme_vllm/attention/backends/acme_attn.py": _uses(
        "acme_vllm.ops.rms_norm", "rms_norm", "AcmeAttention", "norm"
    ),
    "acme_vllm/models/llama.py": _uses(
        "acme_vllm.attention.backends.acme_attn", "AcmeAttention", "Llama", "attn"
    ),
    "acme_vllm/worker/worker.py": _uses("acme_vllm.models.llama", "Llama", "AcmeWorker", "model"),
    "acme_vllm/model_executor/layers/quantization/acme_fp8.py": "SCHEME = 'fp8'\n",
}


def _domain(domains, path):
    return Classifier(domains).path_domain(path).domain


def test_a_new_top_level_package_is_a_platform_domain_split_by_vllms_areas():
    files = {p: t.encode() for p, t in ACME.items()}
    domains = extend_domains(RULES, LABELS, files)
    got = {p: _domain(domains, p) for p in files}
    assert got == {
        "acme_vllm/__init__.py": "acme-vllm",  # the package's own top level: the platform itself
        "acme_vllm/platform.py": "acme-vllm",
        "acme_vllm/ops/rms_norm.py": "acme-vllm.ops",
        "acme_vllm/attention/backends/acme_attn.py": "acme-vllm.attention",
        "acme_vllm/models/llama.py": "acme-vllm.models",
        "acme_vllm/worker/worker.py": "acme-vllm.worker",
        # read as vllm/model_executor/layers/quantization/: vLLM's own label, as for vllm/ itself
        "acme_vllm/model_executor/layers/quantization/acme_fp8.py": "acme-vllm.quantization",
    }
    titles = {d.name: d.title["en"] for d in domains}
    assert (
        titles["acme-vllm"] == "vendor package: acme_vllm"
        and titles["acme-vllm.ops"] == "vendor package: acme_vllm · ops"
    )
    # each after what it imports: ops -> attention -> models -> worker -> the platform
    order = [d.name for d in domains if d.name.startswith("acme-vllm")]
    assert order.index("acme-vllm.ops") < order.index("acme-vllm.attention") < order.index("acme-vllm.models")
    assert order.index("acme-vllm.models") < order.index("acme-vllm.worker") < order.index("acme-vllm")


def test_platform_packages_and_vendor_modules_inside_vllm():
    files = {p: b"x = 1\n" for p in (
        "vllm/platforms/acme/__init__.py", "vllm/platforms/acme/worker/acme_worker.py",
        "vllm/mlu_ops/attention/paged.py", "vllm/mlu_utils.py",
        "vllm/platforms/cuda.py", "vllm/_custom_ops.py",  # vLLM's own: no vendor
        "benchmarks/acme_bench.py",  # not a package beside vllm/: vLLM's own directory
    )}  # fmt: skip
    assert vendor_root("vllm/platforms/acme/worker/acme_worker.py") == "vllm/platforms/acme"
    assert vendor_root("vllm/platforms/cuda.py") is None and vendor_root("vllm/_custom_ops.py") is None
    domains = extend_domains(RULES, LABELS, files)
    got = {p: _domain(domains, p) for p in files}
    assert got["vllm/platforms/acme/__init__.py"] == "acme"
    assert got["vllm/platforms/acme/worker/acme_worker.py"] == "acme.worker"
    assert got["vllm/mlu_ops/attention/paged.py"] == "mlu-ops.attention"
    assert got["vllm/mlu_utils.py"] == "mlu-utils"
    assert got["vllm/platforms/cuda.py"] == "platforms" and got["vllm/_custom_ops.py"] == "other"
    assert got["benchmarks/acme_bench.py"] == "other"


def test_the_split_of_a_vendor_replay_leaves_nothing_to_the_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = fake_base(tmp_path / "base")
    # one commit per file, in an order the imports do not follow (as a vendor's history goes)
    signed = "Signed-off-by: Ada Dev <ada@example.org>"
    commits = [
        patch_text(file_diff(p, None, t), subject=f"add {p}", trailers=signed) for p, t in ACME.items()
    ]
    replay = tmp_path / "acme.mbox"
    replay.write_text("".join(commits))
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["split", str(replay), "--base", str(base), "--out", str(out), "--root", ".", "-v"]
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "split.json").read_text())
    added = {}
    for a in record["assignments"]:
        added[a["domain"]] = added.get(a["domain"], 0) + a["added"]
    assert "other" not in added and sum(added.values()) == sum(t.count("\n") for t in ACME.values())
    assert "prefixes: " in result.output and " 0 failure(s)" in result.output


def test_sources_are_ranges_and_a_long_cell_is_cut_with_a_count():
    assert source_ranges([1, 3, 4, 5, 9, 10]) == "1,3-5,9-10"
    cell = source_ranges(list(range(1, 151, 2)))  # 75 commits, no two adjacent
    assert len(cell) <= 40 and cell.endswith(",… (75 commits)") and cell.startswith("1,3,5,")
    assert source_ranges(list(range(1, 151))) == "1-150"
