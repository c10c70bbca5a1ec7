"""Findings across the patch: environment variables, tests touched, files commit messages name."""

from __future__ import annotations

import ast
import re

from patchkit.guide.findings import _call_name, _finding, _is_literal, changed
from patchkit.guide.view import NodeIndex, _FileView
from patchkit.model import Commit, FilePatch, Finding
from patchkit.report.i18n import both

_FILE_MENTION = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|toml|yaml|yml|json|cu|cuh|cpp|h|sh))\b"
)


def _env_defaults(nodes: NodeIndex) -> dict[str, tuple[str | None, int]]:
    """Environment variables a module reads (os.getenv, os.environ.get/[...], envs.py tables)."""
    found: dict[str, tuple[str | None, int]] = {}
    for node in nodes.of(ast.Call, ast.Subscript, ast.AnnAssign):
        if isinstance(node, ast.Call) and node.args and _is_env_call(node):
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                default = _env_default(node.args[1]) if len(node.args) > 1 else None
                if name.value not in found or found[name.value][0] is None:
                    found[name.value] = (default, node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            base, key = node.value, node.slice
            if isinstance(base, ast.Attribute) and base.attr == "environ" and isinstance(key, ast.Constant):
                found.setdefault(str(key.value), (None, node.lineno))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id  # envs.py declares `VLLM_X: int = 1` under TYPE_CHECKING
            if name.startswith("VLLM_") and node.value is not None and _is_literal(node.value):
                if name not in found or found[name][0] is None:
                    found[name] = (ast.unparse(node.value), node.lineno)
    return found


def _is_env_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "get":
        return isinstance(func.value, ast.Attribute) and func.value.attr == "environ"
    return _call_name(node) in ("getenv", "env_with_choices", "env_list_with_choices")


def _env_default(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and _is_env_call(node) and len(node.args) > 1:
        return _env_default(node.args[1])  # a fallback variable: its default is the default
    return repr(node.value) if isinstance(node, ast.Constant) else ast.unparse(node)


def _env_findings(views: list[_FileView]) -> list[Finding]:
    new: dict[str, tuple[str | None, str, int]] = {}
    out = []
    for view in views:
        before, after = _env_defaults(view.pre_nodes), _env_defaults(view.post_nodes)
        for name, (default, line) in after.items():
            if name not in before:
                if name not in new or (new[name][0] is None and default is not None):
                    new[name] = (default, view.path, line)
            elif before[name][0] != default and default is not None and before[name][0] is not None:
                out.append(changed("default-changed", "medium", view, line, name, before[name][0], default))
    for name, (default, path, line) in new.items():
        shown = default if default is not None else both("env.no-default")
        out.append(_finding("new-env-var", "medium", path, line, [], name=name, default=shown))
    return out


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_")


def _test_findings(files: list[FilePatch]) -> list[Finding]:
    code = [fp.path for fp in files if fp.path.startswith("vllm/") and not _is_test(fp.path)]
    if not code or any(_is_test(fp.path) for fp in files):
        return []
    return [_finding("no-test-touched", "medium", code[0], 0, code[:8], count=len(code))]


def _message_findings(
    files: list[FilePatch], commits: list[Commit | None], source_files: list[set[str]] | None
) -> list[Finding]:
    """A file a commit message names that the commit (or, not knowing better, the patch) never touched."""
    out = []
    own = {fp.path for fp in files} | {fp.old_path for fp in files if fp.old_path}
    for index, commit in enumerate(commits):
        if commit is None:
            continue
        touched = source_files[index] if source_files is not None else own
        text = f"{commit.subject}\n{commit.body}"
        for mention in dict.fromkeys(_FILE_MENTION.findall(text)):
            if not any(p == mention or p.endswith(f"/{mention}") for p in touched):
                line = next(ln for ln in text.splitlines() if mention in ln)
                out.append(
                    _finding(
                        "message-names-untouched-file",
                        "low",
                        "",
                        0,
                        [line.strip()[:160]],
                        name=mention,
                        subject=commit.subject[:80],
                    )
                )
    return out
