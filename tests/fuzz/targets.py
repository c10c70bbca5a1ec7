"""One function per user-facing parser: bytes in, parsed model out, or ``UserError``.

Each target goes through the same door a user's file does (a file on disk where the command reads
one), so the exception mapping under test is the command's own.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from patchkit import config
from patchkit.commands import report
from patchkit.diff.parse import parse_text
from patchkit.report.html import render_html
from patchkit.report.junit import render_junit
from patchkit.report.markdown import render_markdown
from patchkit.series import files as seriesio
from patchkit.split import rules as domains

_PATCH_A = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
_PATCH_B = "From: Dev <d@x>\nSubject: b\n\n" + _PATCH_A.replace("x.py", "y.py")


def _scratch() -> Path:
    """A per-process scratch directory (on tmpfs when there is one)."""
    global _SCRATCH
    if _SCRATCH is None or not _SCRATCH.is_dir():
        root = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH = Path(tempfile.mkdtemp(prefix="patchkit-fuzz-", dir=root))
        series = _SCRATCH / "series-dir"
        series.mkdir()
        (series / "0001-a.patch").write_text(_PATCH_A)
        (series / "0002-b.patch").write_text(_PATCH_B)
    return _SCRATCH


_SCRATCH: Path | None = None


def fuzz_mbox(data: bytes) -> object:
    return parse_text(data.decode("utf-8", errors="surrogateescape"), "fuzz.mbox")


def fuzz_domains(data: bytes) -> object:
    path = _scratch() / "domains.toml"
    path.write_bytes(data)
    rules = domains.load_rules(path)
    classifier = domains.Classifier(rules)
    classifier.path_domain("vllm/envs.py")
    return rules


def fuzz_config(data: bytes) -> object:
    path = _scratch() / "patchkit.toml"
    path.write_bytes(data)
    return config.load_config(path)


def fuzz_series(data: bytes) -> object:
    directory = _scratch() / "series-dir"
    (directory / seriesio.SERIES_FILE).write_bytes(data)
    return seriesio.load_entries(directory)


def fuzz_audit(data: bytes) -> object:
    path = _scratch() / "audit.json"
    path.write_bytes(data)
    return report.load(path)


def fuzz_audit_render(data: bytes) -> object:
    """A loaded record through every renderer: shape.problems refuses malformed free-form fields
    (guide, files, gate details) with their JSON path before a renderer reads them."""
    result = fuzz_audit(data)
    render_html(result, "en")
    render_markdown(result, "zh")
    render_junit(result, "en")
    return result


TARGETS: dict[str, Callable[[bytes], object]] = {
    "mbox": fuzz_mbox,
    "domains": fuzz_domains,
    "config": fuzz_config,
    "series": fuzz_series,
    "audit": fuzz_audit,
    "audit-render": fuzz_audit_render,
}
EXTRA_TARGETS: dict[str, Callable[[bytes], object]] = {}


def is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True
