"""The real witness: the targets imported in an interpreter where the pinned vLLM is installed
(``probe.py`` in a child process, with a timeout), and its answers compared with the static ones."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from patchkit.audit.model import RuntimeTarget
from patchkit.proc import TimeoutExpired, run_process
from patchkit.values import message

PROBE = Path(__file__).with_name("probe.py")
QUIET = {"VLLM_LOGGING_LEVEL": "ERROR", "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}


class WitnessError(Exception):
    """The interpreter could not answer at all (missing, timed out, crashed): one line."""


def run_probe(python: str, targets: list[str], timeout: float) -> dict[str, Any]:
    """{"vllm": version, "python": version, "results": [...]} from ``python`` for ``targets``."""
    with tempfile.TemporaryDirectory(prefix="patchkit-probe-") as scratch:
        out = Path(scratch) / "probe.json"
        try:
            proc = run_process(
                [python, str(PROBE), str(out)],
                input=json.dumps(targets),
                text=True,
                timeout=timeout,
                cwd=scratch,
                env={**os.environ, **QUIET},
            )
        except TimeoutExpired:
            raise WitnessError(f"{python}: importing the targets took longer than {timeout:.0f} s") from None
        except OSError as exc:
            raise WitnessError(f"{python}: {exc.strerror}") from None
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            raise WitnessError(f"{python} exited {proc.returncode}: {tail}")
        return json.loads(out.read_text("utf-8"))


def compare(record: RuntimeTarget, real: dict[str, Any]) -> dict[str, Any]:
    """What the real import saw beside the static answer, and where they differ (an empty list: agree).

    Compared: exists; kind; the signature's (name, kind, default?) rows; the source lines' sha256, file
    and first line. Only what both sides know is compared; ``compared`` lists it. A target reading
    could not settle is compared on nothing: the real answer settles it (``agrees`` is None)."""
    if not real.get("imported"):
        return {"ran": False, "error": real.get("error", "")}
    if record.status == "unknown":
        return {"ran": True, "exists": real.get("exists"), "kind": real.get("kind"), "file": real.get("file"),
                "line": real.get("line"), "compared": [], "differences": [], "agrees": None}  # fmt: skip
    static_exists = record.status not in ("missing", "added")
    differences: list[dict[str, Any]] = []
    compared = ["exists"]
    exists = real.get("exists")
    if exists and not static_exists and _outside_vllm(real.get("file")):
        exists = False  # the name is a base's from outside vLLM (torch's, say): vLLM's own is not there
    if exists != static_exists:
        differences.append(message("runtime.diff.exists", static=str(static_exists), real=str(exists)))
    if exists and static_exists:
        static_kind = record.original_kind
        if static_kind in ("module", "class", "function"):
            compared.append("kind")
            if real.get("kind") != static_kind:
                differences.append(
                    message("runtime.diff.kind", static=static_kind, real=str(real.get("kind")))
                )
        if record.parameters is not None and real.get("signature") is not None:
            compared.append("signature")
            made = record.signature.split(" ", 1)[0][1:] if record.signature.startswith("@") else ""
            if real["signature"] != record.parameters or real.get("descriptor", made) != made:
                differences.append(message("runtime.diff.signature"))
        if record.source_sha256 and real.get("source_sha256"):
            compared.append("source")
            if real["source_sha256"] != record.source_sha256:
                differences.append(message("runtime.diff.source"))
            where = f"{real.get('file')}:{real.get('line')}"
            compared.append("place")
            if where != record.defined_in:
                differences.append(message("runtime.diff.place", static=record.defined_in, real=where))
    return {
        "ran": True,
        "exists": real.get("exists"),
        "kind": real.get("kind"),
        "file": real.get("file"),
        "line": real.get("line"),
        "compared": compared,
        "differences": differences,
        "agrees": not differences,
    }


def _outside_vllm(file: object) -> bool:
    """The probe's file is relative to vLLM's parent directory when it is vLLM's, else absolute."""
    return isinstance(file, str) and bool(file) and not file.startswith("vllm/")
