"""A Buildkite pipeline for the same audit as ``ci/github-actions.yml``: one step per test shard
(``--shard I/N``, test-level), a GPU step per patch for its accelerator-only tests (the focused
upstream tests an accelerator-less runner records as "expected could-not-run"), and a step that
merges the shards with ``patchkit report``. Checked in the suite against the pipeline schema that
Buildkite's SDK ships (``buildkite_sdk/schema.json``)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.audit.engine import focus_patches, load_patches
from patchkit.audit.gates.apply import series_states
from patchkit.base.tree import BaseTree
from patchkit.split.model import Domain


@dataclass
class GpuTests:
    patch: str
    index: int  # 0-based place in the series: the GPU step applies the series up to this patch
    paths: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)


def accelerator_tests(series_dir: Path, base: BaseTree, domains: list[Domain]) -> list[GpuTests]:
    """Per patch, the focused upstream test files that need an accelerator (``FocusedTest.accelerator``)."""
    patches = load_patches(series_dir, domains)
    series_states(base, patches)  # the series must be readable as the audit reads it
    focus_patches(patches, base)
    out = []
    for patch in patches:
        gpu = [t for t in patch.focused if t.accelerator]
        if gpu:
            paths = list(dict.fromkeys(t.path for t in gpu))
            out.append(GpuTests(patch.name, patch.index, paths, sorted({t.accelerator for t in gpu})))
    return out


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:90] or "step"


# patchkit at the revision under audit, never a bare name from the index (PyPI's `patchkit` is another
# project): the pipeline's environment names where (PATCHKIT_GIT) and which full commit (PATCHKIT_REV);
# `$$` defers the variables to the step's run time.
INSTALL = (
    '[[ "$$PATCHKIT_REV" =~ ^[0-9a-f]{40}$$ ]] || { echo "set PATCHKIT_REV to a full commit id"; exit 2; }; '
    'pip install "vllm-patchkit @ git+$${PATCHKIT_GIT}@$${PATCHKIT_REV}"'
)


def pipeline(series: str, shards: int, gpu: list[GpuTests], install: str = INSTALL,
             queue: str | None = None, gpu_queue: str = "gpu") -> dict:  # fmt: skip
    """The pipeline as a dict (written as JSON, which Buildkite reads as YAML)."""
    s = shlex.quote(series)
    steps: list[dict] = []
    for i in range(1, shards + 1):
        step = {
            "label": f":pytest: patchkit audit shard {i}/{shards}",
            "key": f"audit-shard-{i}",
            "command": [
                install,
                "mkdir -p reports",
                # exit 1 (a gate failed) or 3 (incomplete) is the merged report's to say
                f"patchkit audit {s} --prepare-env --shard {i}/{shards} --json reports/audit-{i}.json "
                f"--junit reports/audit-{i}.xml || echo $? > reports/exit-{i}",
            ],
            "artifact_paths": ["reports/*"],
        }
        if queue:
            step["agents"] = {"queue": queue}
        steps.append(step)
    for tests in gpu:
        key = f"gpu-{_key(tests.patch)}"
        paths = " ".join(shlex.quote(p) for p in tests.paths)
        steps.append({
            "label": f":gpu: {tests.patch}: {len(tests.paths)} test file(s) ({', '.join(tests.devices)})",
            "key": key,
            "agents": {"queue": gpu_queue},
            "env": {"PATCHKIT_PATCH": tests.patch},
            "command": [
                install,
                "mkdir -p reports series-upto",
                f"cp {s}/* series-upto/ && head -n {tests.index + 1} {s}/series > series-upto/series",
                'patchkit checkout --dest base-tree && patchkit apply series-upto --path base-tree',
                f"cd base-tree && python -m pytest -q {paths} --junitxml=../reports/{key}.xml",
            ],
            "artifact_paths": [f"reports/{key}.xml"],
        })  # fmt: skip
    keys = [step["key"] for step in steps]
    steps.append({
        "label": ":memo: patchkit report (merge the shards)",
        "key": "report",
        "depends_on": [{"step": k, "allow_failure": True} for k in keys],
        "allow_dependency_failure": True,
        "command": [
            install,
            "mkdir -p shards reports",
            "buildkite-agent artifact download 'reports/audit-*.json' shards/",
            "patchkit report shards/reports/audit-*.json --html reports/audit.html --md reports/audit.md",
        ],
        "artifact_paths": ["reports/audit.html", "reports/audit.md"],
        **({"agents": {"queue": queue}} if queue else {}),
    })  # fmt: skip
    return {"env": {"PATCHKIT_SHARDS": str(shards)}, "steps": steps}
