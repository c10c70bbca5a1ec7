"""`patchkit ci buildkite` (issue 28): a Buildkite pipeline for the audit — a step per test shard, a
GPU step per patch for its accelerator-only tests (``agents: {queue: ...}``), the report merge —
validated against the pipeline schema Buildkite's own SDK ships (PyPI ``buildkite-sdk``, taken from
the registry at test time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.audit.gates import tests as tests_gate_module
from patchkit.base.tree import BaseTree
from patchkit.cli import app
from patchkit.pipelines.buildkite import GpuTests, accelerator_tests, pipeline
from patchkit.split.rules import load_rules

SDK = "buildkite-sdk==0.12.0"
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
STEPS = """\
steps:
- label: GPU kernels
  key: gpu
  device: h100
  source_file_dependencies: [vllm/]
  commands: [pytest -v -s gpu]
"""
GPU_TEST = "from vllm.calc import add\n\n\ndef test_gpu_add():\n    assert add(1, 1) == 2\n"
VALIDATE = """\
import json, sys
from importlib import resources
import jsonschema
schema = json.loads(resources.files("buildkite_sdk").joinpath("schema.json").read_text())
errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(json.load(open(sys.argv[1])))]
print(json.dumps(errors))
"""


@pytest.fixture(scope="module")
def sdk(tmp_path_factory) -> Path:
    """Buildkite's SDK (its schema.json and jsonschema) from PyPI, into a directory of this run."""
    target = tmp_path_factory.mktemp("buildkite-sdk")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), SDK],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, f"pip could not install {SDK} from the registry: {proc.stderr[-800:]}"
    return target


def schema_errors(sdk: Path, document: dict, tmp_path: Path) -> list[str]:
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(document))
    proc = subprocess.run([sys.executable, "-c", VALIDATE, str(path)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(sdk), "PATH": "/usr/bin:/bin"}, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-800:]
    return json.loads(proc.stdout)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tests_gate_module, "host_accelerator", lambda: False)
    root = fake_base(tmp_path / "base")
    (root / ".buildkite" / "test_areas").mkdir(parents=True)
    (root / ".buildkite" / "test_areas" / "gpu.yaml").write_text(STEPS)
    (root / "tests" / "gpu").mkdir()
    (root / "tests" / "gpu" / "test_gpu_calc.py").write_text(GPU_TEST)
    series = write_series(tmp_path / "series", {
        "0001-calc.patch": patch_text(file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a")),
                                      trailers=SIGN),
        "0002-hub.patch": patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n"), trailers=SIGN),
    })  # fmt: skip
    return root, series


def test_the_pipeline_has_a_step_per_shard_a_gpu_step_per_patch_and_the_merge(project):
    root, series = project
    gpu = accelerator_tests(series, BaseTree(root), load_rules(FAKE_TREE / "domains.toml"))
    assert [(g.patch, g.paths, g.devices) for g in gpu] == [
        ("0001-calc.patch", ["tests/gpu/test_gpu_calc.py"], ["h100"])
    ]
    doc = pipeline(str(series), 3, gpu, queue="cpu", gpu_queue="gpu-h100")
    keys = [s["key"] for s in doc["steps"]]
    assert keys == ["audit-shard-1", "audit-shard-2", "audit-shard-3", "gpu-0001-calc-patch", "report"]
    assert all(f"--shard {i}/3" in " ".join(doc["steps"][i - 1]["command"]) for i in (1, 2, 3))
    assert (
        doc["steps"][3]["agents"] == {"queue": "gpu-h100"}
        and "tests/gpu/test_gpu_calc.py" in doc["steps"][3]["command"][-1]
    )
    assert "head -n 1 " in " ".join(doc["steps"][3]["command"])  # the series up to the patch
    report = doc["steps"][-1]
    assert [d["step"] for d in report["depends_on"]] == keys[:-1] and report["allow_dependency_failure"]
    assert "patchkit report shards/reports/audit-*.json" in " ".join(report["command"])


def test_the_generated_pipeline_passes_buildkites_own_schema(project, sdk, tmp_path):
    root, series = project
    runner = CliRunner()
    out = tmp_path / "pipeline.json"
    result = runner.invoke(app, ["ci", "buildkite", str(series), "--base", str(root), "--shards", "4",
                                 "--queue", "cpu", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert len([s for s in doc["steps"] if s["key"].startswith("audit-shard-")]) == 4
    assert any(s["key"].startswith("gpu-") and s["agents"] == {"queue": "gpu"} for s in doc["steps"])
    assert schema_errors(sdk, doc, tmp_path) == []
    # the validator is a real check: what Buildkite refuses, it refuses
    assert schema_errors(sdk, {"steps": [{"command": 3, "agents": "gpu"}]}, tmp_path)
    assert schema_errors(sdk, {"steps": "nope"}, tmp_path)


def test_a_pipeline_without_gpu_tests_still_merges(sdk, tmp_path):
    doc = pipeline("patches", 2, [])
    assert [s["key"] for s in doc["steps"]] == ["audit-shard-1", "audit-shard-2", "report"]
    assert schema_errors(sdk, doc, tmp_path) == []
    doc = pipeline("my series", 1, [GpuTests("0001-a b.patch", 0, ["tests/x y/test_a.py"], ["a100"])])
    assert (
        "'my series'" in doc["steps"][0]["command"][-1]
        and "'tests/x y/test_a.py'" in doc["steps"][1]["command"][-1]
    )
    assert schema_errors(sdk, doc, tmp_path) == []


def test_the_pipeline_installs_the_revision_under_audit_never_a_bare_name(project):
    """PyPI's `patchkit` is another project: the default install step is vllm-patchkit at a pinned commit,
    checked by the CI templates' own bare-install checker (fails on the pipeline's first default,
    `pip install patchkit`)."""
    from test_distribution import bare_installs

    root, series = project
    gpu = accelerator_tests(series, BaseTree(root), load_rules(FAKE_TREE / "domains.toml"))
    doc = pipeline(str(series), 2, gpu)
    commands = [c for step in doc["steps"] for c in step["command"]]
    installs = [c for c in commands if "pip install" in c]
    assert len(installs) == len(doc["steps"])  # every step installs patchkit first
    for command in installs:
        runtime = command.replace("$$", "$")  # what the agent runs
        assert bare_installs(runtime) == [], runtime
        assert "=~ ^[0-9a-f]{40}$ ]]" in runtime and "git+${PATCHKIT_GIT}@${PATCHKIT_REV}" in runtime
    assert bare_installs("pip install patchkit") == ["'patchkit' in `pip install patchkit`"]
