"""Reviewer guide: the findings a careful vLLM maintainer would raise about one patch.

Deterministic and offline: Python ``ast`` over the pre- and post-image of each changed file, plus
path rules. ``Finding.line`` is a post-image line, except for ``PRE_IMAGE_KINDS`` (the thing is
gone) where it is the pre-image line; 0 means "the file as a whole".
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.model import Commit, FilePatch, Finding
from patchkit.report.i18n import LANGS, both

Source = Callable[[str], "bytes | None"]

PRE_IMAGE_KINDS = frozenset({"public-symbol-removed", "assert-weakened"})
HIGH_KINDS = (
    "near-whole-file-rewrite",
    "hot-path-touched",
    "field-constraint-changed",
    "public-symbol-removed",
)
HOT_PATHS = (
    "vllm/v1/core/sched/*",
    "*/block_pool.py",
    "*/kv_cache_*",
    "*/gpu_model_runner.py",
    "*/sample/*sampler*.py",
    "*/sampler.py",
)
CONTRACT_PATHS = ("vllm/config/*", "*/protocol.py", "vllm/envs.py", "*_args.py", "vllm/outputs.py")
CONSTRAINT_KWARGS = ("gt", "ge", "lt", "le", "min_length", "max_length")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "print"}
REWRITE_SHARE = 0.5
REWRITE_LINES = 200
MAGIC_MIN = 100
MAX_PER_KIND = 5  # per file; the rest are folded into the last finding's evidence
_HARD_PATH = re.compile(r"^/(tmp|var|home|root|opt|data|mnt|srv|usr/local)(/|$)")
_LOG_CALL = re.compile(r"\b(logger|logging|log)\.\w+\(|warnings\.warn\(|\bprint\(")
_FILE_MENTION = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|toml|yaml|yml|json|cu|cuh|cpp|h|sh))\b"
)


@dataclass
class _FileView:
    """One changed file: both images parsed (None when absent or not Python) and changed lines."""

    fp: FilePatch
    pre: ast.Module | None
    post: ast.Module | None
    pre_len: int
    post_len: int
    added: dict[int, str] = field(default_factory=dict)  # post line -> text
    removed: dict[int, str] = field(default_factory=dict)  # pre line -> text
    hunk_of_removed: dict[int, int] = field(default_factory=dict)
    hunk_added: list[list[str]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.fp.path


def review_guide(
    files: list[FilePatch],
    pre: Source,
    post: Source,
    commits: list[Commit | None],
    domain: str,
    source_files: list[set[str]] | None = None,
) -> dict:
    """The guide for one patch: findings, reading priority and order, follow-ups.

    ``source_files[i]`` is every file ``commits[i]`` touched across the whole series (a split
    patch holds only part of a commit); without it a commit's message is checked against this
    patch's files only.
    """
    views = [_view(fp, pre, post) for fp in files]
    findings: list[Finding] = []
    for view in views:
        findings += _cap(_file_findings(view))
    findings += _env_findings(views)
    findings += _test_findings(files)
    findings += _message_findings(files, commits, source_files)
    return {
        "domain": domain,
        "findings": [f.to_dict() for f in findings],
        "priority": _priority(findings),
        "order": _order(files),
        "follow_ups": _follow_ups(findings),
    }


# --------------------------------------------------------------------------- per file


def _view(fp: FilePatch, pre: Source, post: Source) -> _FileView:
    old = pre(fp.old_path) if fp.old_path else None
    new = post(fp.new_path) if fp.new_path else None
    is_py = fp.path.endswith((".py", ".pyi"))
    view = _FileView(
        fp,
        _parse(old) if is_py else None,
        _parse(new) if is_py else None,
        _count_lines(old),
        _count_lines(new),
    )
    for index, hunk in enumerate(fp.hunks):
        old_no, new_no, added = hunk.old_start, hunk.new_start, []
        for line in hunk.lines:
            op, text = line[:1], line[1:]
            if op == "-":
                view.removed[old_no] = text
                view.hunk_of_removed[old_no] = index
                old_no += 1
            elif op == "+":
                view.added[new_no] = text
                added.append(text)
                new_no += 1
            elif op == " ":
                old_no, new_no = old_no + 1, new_no + 1
        view.hunk_added.append(added)
    return view


def _parse(data: bytes | None) -> ast.Module | None:
    if data is None:
        return None
    try:
        return ast.parse(data.decode("utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None


def _count_lines(data: bytes | None) -> int:
    return 0 if data is None else data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _finding(kind: str, severity: str, where: str, line: int, evidence: list[str], **kw) -> Finding:
    finding = Finding(kind, severity, where, line, both(f"finding.{kind}", **kw), evidence)  # type: ignore[arg-type]
    finding.params = kw  # for the follow-up text; not serialised
    return finding


def _file_findings(view: _FileView) -> list[Finding]:
    out = _path_findings(view)
    if view.pre is not None or view.post is not None:
        out += _symbol_findings(view)
        out += _value_findings(view)
        out += _assert_findings(view)
    if view.post is not None:
        out += _except_findings(view)
        out += _literal_findings(view)
    return out


def _path_findings(view: _FileView) -> list[Finding]:
    out = []
    fp, path = view.fp, view.path
    changed = fp.added + fp.removed
    share = max(fp.added / max(view.post_len, 1), fp.removed / max(view.pre_len, 1))
    if not fp.is_new and not fp.is_deleted and changed >= REWRITE_LINES and share >= REWRITE_SHARE:
        out.append(
            _finding(
                "near-whole-file-rewrite",
                "high",
                path,
                1,
                [f"+{fp.added}/-{fp.removed} of {view.post_len} lines"],
                share=f"{share:.0%}",
                added=fp.added,
                removed=fp.removed,
            )
        )
    if any(fnmatch.fnmatch(path, pattern) for pattern in HOT_PATHS):
        first = min(view.added, default=0) or (fp.hunks[0].new_start if fp.hunks else 0)
        out.append(_finding("hot-path-touched", "high", path, first, [], path=path))
    return out


def _public_symbols(tree: ast.Module | None) -> dict[str, ast.AST]:
    """Top-level defs, classes and assignments without a leading underscore, plus their methods."""
    symbols: dict[str, ast.AST] = {}
    for node in tree.body if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            symbols[node.name] = node
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        if not item.name.startswith("_") or item.name == "__init__":
                            symbols[f"{node.name}.{item.name}"] = item
        for name in _assigned_names(node):
            symbols[name] = node
    return {k: v for k, v in symbols.items() if not k.startswith("_")}


def _assigned_names(node: ast.AST) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    if not isinstance(node, (ast.Assign, ast.AnnAssign)):
        return []
    names = []
    for target in targets:
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [e.id for e in elts if isinstance(e, ast.Name)]
    return names


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """Parameter names, kinds and defaults; annotations do not count."""
    args = copy.deepcopy(fn.args)
    for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    return ast.unparse(args)


def _symbol_findings(view: _FileView) -> list[Finding]:
    out = []
    before, after = _public_symbols(view.pre), _public_symbols(view.post)
    for name, node in before.items():
        if name not in after and ("." not in name or name.split(".")[0] in after):
            out.append(
                _finding(
                    "public-symbol-removed",
                    "high",
                    view.path,
                    node.lineno,
                    [ast.unparse(node).splitlines()[0][:160]],
                    name=name,
                )
            )
    for name, node in after.items():
        old = before.get(name)
        funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, funcs) and isinstance(old, funcs) and _signature(old) != _signature(node):
            out.append(
                _finding(
                    "signature-changed",
                    "medium",
                    view.path,
                    node.lineno,
                    [f"- ({_signature(old)})", f"+ ({_signature(node)})"],
                    name=name,
                )
            )
    return out


def _call_name(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _defaults(tree: ast.Module | None) -> tuple[dict, dict]:
    """Named defaults (module constants, class attributes, Field defaults) and Field constraints."""
    values: dict[str, tuple[str, int]] = {}
    constraints: dict[str, tuple[dict[str, str], int]] = {}
    for node in tree.body if tree else []:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for name in _assigned_names(node):
                if _is_literal(node.value):
                    values[name] = (ast.unparse(node.value), node.lineno)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)) if tree else []:
        for node in cls.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            for name in _assigned_names(node):
                key, value = f"{cls.name}.{name}", node.value
                if _call_name(value) in ("Field", "field"):
                    kwargs = {k.arg: ast.unparse(k.value) for k in value.keywords if k.arg}
                    limits = {k: v for k, v in kwargs.items() if k in CONSTRAINT_KWARGS}
                    constraints[key] = (limits, node.lineno)
                    default = kwargs.get("default") or (ast.unparse(value.args[0]) if value.args else None)
                    if default is not None:
                        values[key] = (default, node.lineno)
                elif _is_literal(value):
                    values[key] = (ast.unparse(value), node.lineno)
    return values, constraints


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _value_findings(view: _FileView) -> list[Finding]:
    out = []
    old_values, old_limits = _defaults(view.pre)
    new_values, new_limits = _defaults(view.post)
    for key, (limits, line) in new_limits.items():
        if key in old_limits and old_limits[key][0] != limits:
            was = ", ".join(f"{k}={v}" for k, v in sorted(old_limits[key][0].items())) or "-"
            now = ", ".join(f"{k}={v}" for k, v in sorted(limits.items())) or "-"
            out.append(
                _finding(
                    "field-constraint-changed",
                    "high",
                    view.path,
                    line,
                    [view.added.get(line, "").strip()],
                    name=key,
                    old=was,
                    new=now,
                )
            )
    for key, (value, line) in new_values.items():
        if key in old_values and old_values[key][0] != value:
            out.append(
                _finding(
                    "default-changed",
                    "medium",
                    view.path,
                    line,
                    [view.added.get(line, "").strip()],
                    name=key,
                    old=old_values[key][0],
                    new=value,
                )
            )
    return out


def _assert_findings(view: _FileView) -> list[Finding]:
    """An assert removed, or an assert / raise whose hunk now only logs."""
    kept = (
        {ast.unparse(n.test) for n in ast.walk(view.post) if isinstance(n, ast.Assert)}
        if view.post
        else set()
    )
    out = []
    for node in ast.walk(view.pre) if view.pre else []:
        if not isinstance(node, (ast.Assert, ast.Raise)) or node.lineno not in view.removed:
            continue
        logs = any(_LOG_CALL.search(t) for t in view.hunk_added[view.hunk_of_removed[node.lineno]])
        if isinstance(node, ast.Assert) and ast.unparse(node.test) not in kept:
            variant = "log" if logs else "gone"
        elif isinstance(node, ast.Raise) and logs:
            variant = "raise"
        else:
            continue
        out.append(
            _finding(
                "assert-weakened",
                "medium",
                view.path,
                node.lineno,
                [view.removed[node.lineno].strip()],
                how=both(f"assert.{variant}"),
                statement=view.removed[node.lineno].strip()[:80],
            )
        )
    return out


def _swallows(handler: ast.ExceptHandler) -> bool:
    kind = handler.type
    names = [kind] if not isinstance(kind, ast.Tuple) else kind.elts
    broad = kind is None or any(
        isinstance(n, ast.Name) and n.id in ("Exception", "BaseException") for n in names
    )
    quiet = all(
        isinstance(s, (ast.Pass, ast.Continue))
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        or (isinstance(s, ast.Expr) and _call_name(s.value) in LOG_METHODS)
        for s in handler.body
    )
    return broad and quiet


def _except_findings(view: _FileView) -> list[Finding]:
    return [
        _finding(
            "broad-except-swallows",
            "medium",
            view.path,
            node.lineno,
            [view.added[node.lineno].strip()],
            what=view.added[node.lineno].strip(),
        )
        for node in ast.walk(view.post)
        if isinstance(node, ast.ExceptHandler) and node.lineno in view.added and _swallows(node)
    ]


def _literal_findings(view: _FileView) -> list[Finding]:
    named = set()  # literals that are the value of a named constant, or an HTTP status code
    for node in ast.walk(view.post):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if any(n.isupper() for n in _assigned_names(node)):
                named |= {id(n) for n in ast.walk(node.value)}
        elif isinstance(node, ast.keyword) and node.arg in ("status_code", "status"):
            named.add(id(node.value))
    out, magic = [], []
    for node in ast.walk(view.post):
        if not isinstance(node, ast.Constant) or node.lineno not in view.added:
            continue
        value = node.value
        if isinstance(value, str) and _HARD_PATH.match(value):
            out.append(
                _finding(
                    "hard-coded-path",
                    "medium",
                    view.path,
                    node.lineno,
                    [view.added[node.lineno].strip()],
                    value=value,
                )
            )
        elif (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and abs(value) >= MAGIC_MIN
            and id(node) not in named
        ):
            magic.append(node)
    if magic:
        magic.sort(key=lambda n: n.lineno)
        lines = list(dict.fromkeys(n.lineno for n in magic))
        evidence = [f"L{line}: {view.added[line].strip()}" for line in lines[:8]]
        numbers = ", ".join(dict.fromkeys(repr(n.value) for n in magic))
        out.append(
            _finding(
                "magic-number",
                "low",
                view.path,
                magic[0].lineno,
                evidence,
                count=len(magic),
                numbers=numbers[:120],
            )
        )
    return out


def _cap(findings: list[Finding]) -> list[Finding]:
    kept: list[Finding] = []
    by_kind: dict[str, list[Finding]] = {}
    for f in findings:
        by_kind.setdefault(f.kind, []).append(f)
    for group in by_kind.values():
        kept += group[:MAX_PER_KIND]
        if len(group) > MAX_PER_KIND:
            rest = ", ".join(str(f.line) for f in group[MAX_PER_KIND:])
            kept[-1].evidence.append(f"… +{len(group) - MAX_PER_KIND} more at lines {rest}")
    return kept


# --------------------------------------------------------------------------- across files


def _env_defaults(tree: ast.Module | None) -> dict[str, tuple[str | None, int]]:
    """Environment variables a module reads (os.getenv, os.environ.get/[...], envs.py tables)."""
    found: dict[str, tuple[str | None, int]] = {}
    for node in ast.walk(tree) if tree else []:
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
        before, after = _env_defaults(view.pre), _env_defaults(view.post)
        for name, (default, line) in after.items():
            if name not in before:
                if name not in new or (new[name][0] is None and default is not None):
                    new[name] = (default, view.path, line)
            elif before[name][0] != default and default is not None and before[name][0] is not None:
                out.append(
                    _finding(
                        "default-changed",
                        "medium",
                        view.path,
                        line,
                        [view.added.get(line, "").strip()],
                        name=name,
                        old=before[name][0],
                        new=default,
                    )
                )
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


# --------------------------------------------------------------------------- summary


def _priority(findings: list[Finding]) -> dict:
    high = list(dict.fromkeys(f.kind for f in findings if f.severity == "high"))
    if not high:
        return {"level": "skim", "reason": both("priority.skim.reason", count=len(findings))}
    sep = both("list.sep")
    kinds = {lang: sep[lang].join(both(f"kind.{k}")[lang] for k in high) for lang in LANGS}
    return {"level": "close-read", "reason": both("priority.close-read.reason", kinds=kinds)}


def _role(path: str) -> str:
    if _is_test(path):
        return "test"
    return "contract" if any(fnmatch.fnmatch(path, p) for p in CONTRACT_PATHS) else "consumer"


def _order(files: list[FilePatch]) -> list[dict]:
    rank = {"contract": 0, "consumer": 1, "test": 2}
    roles = [(fp.path, _role(fp.path)) for fp in files]
    ordered = sorted(roles, key=lambda pr: rank[pr[1]])
    return [{"path": path, "role": role, "why": both(f"role.{role}.why")} for path, role in ordered]


def _follow_ups(findings: list[Finding]) -> list[dict]:
    """One follow-up per finding, deduplicated (several findings can ask for the same thing)."""
    seen: dict[str, dict] = {}
    for f in findings:
        params = {"file": f.file or "-", "line": f.line, **getattr(f, "params", {})}
        params.setdefault("name", f.file)
        item = both(f"follow.{f.kind}", **params)
        seen.setdefault(item["en"], item)
    return list(seen.values())
