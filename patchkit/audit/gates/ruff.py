"""ruff gate: the ruff the base pins (see ``tools/ruff_binary``) with the base's own config on the
touched files, before and after, in a tree laid out like the real one; only what the patch adds
counts. Findings match by (file, code, message, source line) so shifted lines are not new.

patchkit's own whitespace check (trailing whitespace, blank line at EOF on added lines) is
reported beside ruff's findings (``details.whitespace``), never counted as them."""

from __future__ import annotations

import json
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path, PurePosixPath

from patchkit import __version__
from patchkit.audit.gates import Gate, GateContext, PatchUnderAudit, Trees, gate_result, not_applied, witness
from patchkit.audit.model import GateResult
from patchkit.proc import TimeoutExpired, run_process
from patchkit.testrun.overlaytree import Overlay
from patchkit.tools import ruff_binary
from patchkit.values import Message

CONFIG_NAMES = ("pyproject.toml", "ruff.toml", ".ruff.toml")
NO_WHITESPACE_CHECK = (".md", ".patch", ".diff")
RUFF_TIMEOUT = 300
RUFF_ARGS = ("ruff", "check", "--output-format", "json", "--no-cache", "--exit-zero", "--force-exclude")
WHITESPACE_CHECK = "patchkit whitespace check (added lines, blank line at EOF)"


def tool_for(trees: Trees) -> ruff_binary.RuffTool:
    """The ruff to run on this base: the one its .pre-commit-config.yaml pins, else a fallback."""
    config = trees.base.read(ruff_binary.PRE_COMMIT_CONFIG)
    return ruff_binary.choose(config.decode("utf-8", "replace") if config is not None else None)


def _has_ruff_table(data: bytes | None) -> bool:
    try:
        return "ruff" in tomllib.loads((data or b"").decode("utf-8", "replace")).get("tool", {})
    except tomllib.TOMLDecodeError:
        return False


def config_paths(trees: Trees, files: list[str]) -> list[str]:
    """The base's ruff configs that govern ``files``: at the root and in their parent directories
    (a pyproject.toml only when it has a ``[tool.ruff]`` table, as ruff itself decides)."""
    found = []
    dirs = {""} | {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    for directory in sorted(dirs):
        for name in CONFIG_NAMES:
            path = f"{directory}/{name}" if directory else name
            if trees.base.exists(path) and (
                name != "pyproject.toml" or _has_ruff_table(trees.base.read(path))
            ):
                found.append(path)
    return found


def shadow_tree(base_root: Path, overlay: Overlay, dest: Path) -> None:
    """The base as ruff sees it in the real tree, cheaply: every directory on the way to a file of
    ``overlay`` is real, everything else a symlink into the base; the overlay's files are written.
    So first-party packages, configs and ``__init__.py`` files are where they are in the full tree."""
    real = {""} | {str(p) for path in overlay for p in PurePosixPath(path).parents if str(p) != "."}
    for rel in sorted(real, key=lambda r: (r.count("/"), r)):
        here = dest / rel if rel else dest
        here.mkdir(parents=True, exist_ok=True)
        source = base_root / rel if rel else base_root
        if not source.is_dir() or source.is_symlink():
            continue
        for entry in source.iterdir():
            child = f"{rel}/{entry.name}" if rel else entry.name
            if entry.name != ".git" and child not in real and child not in overlay:
                (here / entry.name).symlink_to(entry)
    for path, data in overlay.items():
        if data is not None:
            (dest / path).write_bytes(data)


def run_ruff(cmd: tuple[str, ...], root: Path, files: list[str]) -> list[dict]:
    present = [f for f in files if (root / f).is_file()]
    if not present:
        return []
    # --force-exclude as pre-commit's ruff hook does: the base's excludes hold for named files too
    proc = run_process([*cmd, *RUFF_ARGS[1:], *present], cwd=root, text=True, timeout=RUFF_TIMEOUT)
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
    if trees.post is None:
        return not_applied("ruff", None)
    whitespace = whitespace_findings(patch, trees)
    py_files = [
        fp.new_path for fp in patch.changed_files if fp.new_path and fp.new_path.endswith((".py", ".pyi"))
    ]
    configs = config_paths(trees, [fp.path for fp in patch.changed_files])
    tool = tool_for(trees)
    details: dict = {"files": py_files, "configs": configs, "ruff": tool.to_dict()}

    def done(status: str, key: str, params: dict, evidence: list | None = None) -> GateResult:
        seconds = time.perf_counter() - started
        return gate_result("ruff", status, Message(key, params), details, seconds, evidence)

    if tool.command is None and py_files:
        return done("could-not-run", "gate.ruff.not-installed", {"why": tool.why.to_dict()})
    tool_text = Message("ruff.tool", {"version": tool.version, "why": tool.why.to_dict()}).to_dict()
    added: list[dict] = []
    evidence = []
    if py_files and tool.command is not None:
        pre_files = sorted({fp.old_path for fp in patch.changed_files if fp.old_path} | set(py_files))
        with tempfile.TemporaryDirectory(prefix="patchkit-ruff-") as tmp:
            pre_root, post_root = Path(tmp, "pre"), Path(tmp, "post")
            # the checked files are real files (a symlink would make ruff report the base's path)
            shadow_tree(trees.base.root, {**{p: trees.pre_read(p) for p in pre_files}, **trees.pre}, pre_root)
            shadow_tree(
                trees.base.root, {**{p: trees.post_read(p) for p in py_files}, **trees.post}, post_root
            )
            try:
                before = _keyed(run_ruff(tool.command, pre_root, pre_files), pre_root)
                after = _keyed(run_ruff(tool.command, post_root, py_files), post_root)
            except (RuntimeError, TimeoutExpired, json.JSONDecodeError) as exc:
                return done(
                    "could-not-run", "gate.ruff.failed-to-run", {"error": str(exc), "tool": tool_text}
                )
        added = added_findings(before, after)
        counts = {"files": len(py_files), "findings_before": len(before), "findings_after": len(after),
                  "findings_added": len(added)}  # fmt: skip
        command = [*RUFF_ARGS, "{touched .py files}"]
        said = "exit 0 on both sides"
        evidence.append(
            witness("ruff", said, version=tool.version, command=command, inputs=py_files, counts=counts)
        )
    seen = {(f["file"], f["line"]) for f in added if f["code"] in ("W291", "W293")}
    seen |= {(f["file"], "eof") for f in added if f["code"] == "W391"}
    own = [f for f in whitespace if _ws_key(f) not in seen]
    details.update(findings=added, whitespace=own)
    checked_files = [
        fp.path for fp in patch.changed_files if fp.new_path and not fp.path.endswith(NO_WHITESPACE_CHECK)
    ]
    counts = {"files": len(checked_files), "findings_added": len(own)}
    said = f"{len(own)} on added lines"
    evidence.append(witness(WHITESPACE_CHECK, said, version=__version__, inputs=checked_files, counts=counts))
    if added:
        ruff_part = Message(
            "gate.ruff.added", {"count": len(added), "codes": _codes(added), "tool": tool_text}
        )
    elif not py_files:
        ruff_part = Message("gate.ruff.no-python", {"configs": configs or ["-"]})
    elif configs:
        ruff_part = Message(
            "gate.ruff.clean", {"count": len(py_files), "configs": configs, "tool": tool_text}
        )
    else:
        ruff_part = Message("gate.ruff.clean-defaults", {"count": len(py_files), "tool": tool_text})
    if own:  # patchkit's own check, reported as its own, never as ruff's findings
        params = {"ruff": ruff_part.to_dict(), "count": len(own), "codes": _codes(own)}
        return done("failed", "gate.ruff.whitespace", params, evidence)
    return done("failed" if added else "passed", ruff_part.key, ruff_part.params, evidence)


def _codes(findings: list[dict]) -> list[str]:
    counts = Counter(f["code"] for f in findings)
    return [f"{c} x{n}" if n > 1 else c for c, n in counts.most_common()]


RUFF_GATE_FORMAT = 3  # bump when how the ruff gate stages or compares changes: cached results expire


def _cache_config(ctx: GateContext) -> object:
    tool = tool_for(ctx.trees)
    return [tool.command, tool.version, RUFF_GATE_FORMAT]


GATE = Gate("ruff", lambda ctx: ruff_gate(ctx.patch, ctx.trees), cache_config=_cache_config)
