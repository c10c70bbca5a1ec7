"""ruff gate: the target's own ruff config on the touched files, before and after; only what the
patch adds counts. Findings match by (file, code, message, source line) so shifted lines are not new."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path, PurePosixPath

from patchkit.audit.gates import (
    NOT_APPLIED,
    Gate,
    PatchUnderAudit,
    Trees,
    gate_result,
    write_overlay,
)
from patchkit.audit.model import GateResult
from patchkit.values import Message

CONFIG_NAMES = ("pyproject.toml", "ruff.toml", ".ruff.toml")
NO_WHITESPACE_CHECK = (".md", ".patch", ".diff")
RUFF_TIMEOUT = 300


def ruff_command() -> list[str] | None:
    exe = shutil.which("ruff")
    return [exe] if exe else None


def ruff_version() -> str:
    cmd = ruff_command()
    if cmd is None:
        return "absent"
    return subprocess.run([*cmd, "--version"], capture_output=True, text=True).stdout.strip()


def config_paths(trees: Trees, files: list[str]) -> list[str]:
    """The base's ruff configs that govern ``files``: at the root and in their parent directories."""
    found = []
    dirs = {""} | {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    for directory in sorted(dirs):
        for name in CONFIG_NAMES:
            path = f"{directory}/{name}" if directory else name
            if trees.base.exists(path):
                found.append(path)
    return found


def package_inits(trees: Trees, files: list[str]) -> list[str]:
    """The ``__init__.py`` of every package above ``files``: without them ruff sees namespace
    packages, and isort files ``vllm`` imports under the wrong section (a false I001)."""
    dirs = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    inits = [f"{d}/__init__.py" for d in sorted(dirs)]
    return [path for path in inits if path not in files and trees.base.exists(path)]


def run_ruff(cmd: list[str], root: Path, files: list[str]) -> list[dict]:
    present = [f for f in files if (root / f).is_file()]
    if not present:
        return []
    proc = subprocess.run(
        [*cmd, "check", "--output-format", "json", "--no-cache", "--exit-zero", *present],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=RUFF_TIMEOUT,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "ruff failed")
    return json.loads(proc.stdout or "[]")


def _keyed(findings: list[dict], root: Path) -> list[tuple[tuple, dict]]:
    out = []
    for item in findings:
        path = Path(item["filename"]).resolve().relative_to(root.resolve()).as_posix()
        row = item["location"]["row"]
        lines = (root / path).read_text("utf-8", errors="replace").splitlines()
        source = lines[row - 1].strip() if 0 < row <= len(lines) else ""
        code = item.get("code") or "syntax-error"
        finding = {"file": path, "line": row, "code": code, "message": item["message"]}
        out.append(((path, code, item["message"], source), finding))
    return out


def added_findings(before: list[tuple[tuple, dict]], after: list[tuple[tuple, dict]]) -> list[dict]:
    """Findings of ``after`` beyond those ``before`` already had (a multiset difference)."""
    budget = Counter(key for key, _ in before)
    added = []
    for key, finding in after:
        if budget[key]:
            budget[key] -= 1
        else:
            added.append(finding)
    return added


def whitespace_findings(patch: PatchUnderAudit, trees: Trees) -> list[dict]:
    """Trailing whitespace on added lines, and a blank line at EOF the patch adds."""
    found = []
    for fp in patch.changed_files:
        if fp.new_path is None or fp.path.endswith(NO_WHITESPACE_CHECK):
            continue
        for hunk in fp.hunks:
            line_no = hunk.new_start
            for line in hunk.lines:
                if line.startswith("+"):
                    if line[1:] != line[1:].rstrip(" \t"):
                        found.append(_ws(fp.path, line_no, "trailing-whitespace", "trailing whitespace"))
                    line_no += 1
                elif line.startswith(" "):
                    line_no += 1
        post, pre = trees.post_read(fp.path), trees.pre_read(fp.old_path) if fp.old_path else None
        if post is not None and _blank_at_eof(post) and not (pre is not None and _blank_at_eof(pre)):
            lines = post.count(b"\n")
            found.append(_ws(fp.path, lines, "blank-line-at-eof", "blank line at end of file"))
    return found


def _ws(path: str, line: int, code: str, message: str) -> dict:
    return {"file": path, "line": line, "code": code, "message": message}


def _ws_key(finding: dict) -> tuple[str, int | str]:
    eof = finding["code"] == "blank-line-at-eof"
    return finding["file"], "eof" if eof else finding["line"]


def _blank_at_eof(data: bytes) -> bool:
    """Whether the file's last line is empty or whitespace only."""
    if not data:
        return False
    body = data[:-1] if data.endswith(b"\n") else data
    return body.rsplit(b"\n", 1)[-1].strip() == b""


def ruff_gate(patch: PatchUnderAudit, trees: Trees) -> GateResult:
    started = time.perf_counter()
    whitespace = whitespace_findings(patch, trees) if trees.post is not None else []
    py_files = [
        fp.new_path for fp in patch.changed_files if fp.new_path and fp.new_path.endswith((".py", ".pyi"))
    ]
    cmd = ruff_command()
    if trees.post is None:
        return gate_result("ruff", "skipped", NOT_APPLIED)
    if cmd is None and py_files:
        return gate_result("ruff", "could-not-run", Message("gate.ruff.not-installed"),
                           {"whitespace": whitespace}, time.perf_counter() - started)  # fmt: skip
    added: list[dict] = []
    configs: list[str] = []
    if py_files and cmd is not None:
        configs = config_paths(trees, py_files)
        old_paths = [fp.old_path for fp in patch.changed_files if fp.old_path]
        with tempfile.TemporaryDirectory(prefix="patchkit-ruff-") as tmp:
            pre_root, post_root = Path(tmp, "pre"), Path(tmp, "post")
            inits = package_inits(trees, py_files)
            for root in (pre_root, post_root):
                root.mkdir()
                write_overlay(root, configs + inits, trees.base.read)
            write_overlay(pre_root, sorted(set(old_paths) | set(py_files)), trees.pre_read)
            write_overlay(post_root, py_files, trees.post_read)
            try:
                before = _keyed(run_ruff(cmd, pre_root, py_files), pre_root)
                after = _keyed(run_ruff(cmd, post_root, py_files), post_root)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
                message = Message("gate.ruff.failed-to-run", {"error": str(exc)})
                return gate_result("ruff", "could-not-run", message, {}, time.perf_counter() - started)
        added = added_findings(before, after)
    seen = {(f["file"], f["line"]) for f in added if f["code"] in ("W291", "W293")}
    seen |= {(f["file"], "eof") for f in added if f["code"] == "W391"}
    added += [f for f in whitespace if _ws_key(f) not in seen]
    details = {"findings": added, "files": py_files, "configs": configs, "ruff": ruff_version()}
    if added:
        counts = Counter(f["code"] for f in added)
        codes = [f"{c} x{n}" if n > 1 else c for c, n in counts.most_common()]
        message = Message("gate.ruff.added", {"count": len(added), "codes": codes})
        return gate_result("ruff", "failed", message, details, time.perf_counter() - started)
    if configs:
        message = Message("gate.ruff.clean", {"count": len(py_files), "configs": configs})
    else:
        message = Message("gate.ruff.clean-defaults", {"count": len(py_files)})
    return gate_result("ruff", "passed", message, details, time.perf_counter() - started)


RUFF_GATE_FORMAT = 2  # bump when how the ruff gate stages or compares changes: cached results expire

GATE = Gate(
    "ruff",
    lambda ctx: ruff_gate(ctx.patch, ctx.trees),
    cache_config=lambda ctx: [ruff_version(), RUFF_GATE_FORMAT],
    environment=lambda settings: {"ruff": ruff_version()},
)
