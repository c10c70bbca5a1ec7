"""YAML of vLLM's metadata files, parsed by libyaml when PyYAML has it (the same values as
``yaml.safe_load``, several times faster: the buildkite files are ~40 documents and every audit
reads them), else by PyYAML's own Python parser."""

from __future__ import annotations

from typing import Any

import yaml

FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=FAST_LOADER or yaml.SafeLoader)  # noqa: S506 - both are safe loaders
