"""All of a base's own metadata at once, read from its tree (absent files are recorded, not errors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from patchkit.upstream.buildkite import CiStep, parse_pipeline
from patchkit.upstream.codeowners import OwnerRule, parse_codeowners
from patchkit.upstream.mergify import LabelRule, parse_mergify

MERGIFY = ".github/mergify.yml"
CODEOWNERS = ".github/CODEOWNERS"
TEST_AREAS = ".buildkite/test_areas"
TEST_PIPELINE = ".buildkite/test-pipeline.yaml"


@dataclass
class UpstreamMeta:
    labels: list[LabelRule] = field(default_factory=list)
    owners: list[OwnerRule] = field(default_factory=list)
    steps: list[CiStep] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # which of the three files the base lacks


def read_upstream(root: Path) -> UpstreamMeta:
    meta = UpstreamMeta()
    mergify = root / MERGIFY
    if mergify.is_file():
        meta.labels = parse_mergify(mergify.read_text("utf-8", errors="replace"), str(mergify))
    else:
        meta.missing.append(MERGIFY)
    owners = root / CODEOWNERS
    if owners.is_file():
        meta.owners = parse_codeowners(owners.read_text("utf-8", errors="replace"))
    else:
        meta.missing.append(CODEOWNERS)
    files = sorted((root / TEST_AREAS).glob("*.yaml")) if (root / TEST_AREAS).is_dir() else []
    if (root / TEST_PIPELINE).is_file():
        files.append(root / TEST_PIPELINE)
    for path in files:
        rel = path.relative_to(root).as_posix()
        meta.steps += parse_pipeline(path.read_text("utf-8", errors="replace"), rel)
    if not files:
        meta.missing.append(f"{TEST_AREAS}/*.yaml")
    return meta
