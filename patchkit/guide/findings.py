"""Per-file findings: path rules and ``ast`` detectors over one file's pre- and post-image.

Every detector reads the trees and the shared ``NodeIndex`` walks of ``FileView``; none parses or
walks a whole tree itself.
"""

from __future__ import annotations

import ast
import fnmatch
import re

from patchkit.guide.literals import compact_change
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView, NodeIndex
from patchkit.values import message

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
CONSTRAINT_KWARGS = ("gt", "ge", "lt", "le", "min_length", "max_length")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "print"}
REWRITE_SHARE = 0.5
REWRITE_LINES = 200
MAGIC_MIN = 100
UNIT_FACTORS = frozenset({1000, 1e6, 1e9})  # s -> ms, bytes -> MB: conversions, not tuning knobs
MAX_PER_KIND = 5  # per file; the rest are folded into the last finding's evidence
_HARD_PATH = re.compile(r"^/(tmp|var|home|root|opt|data|mnt|srv|usr/local)(/|$)")
_LOG_CALL = re.compile(r"\b(logger|logging|log)\.\w+\(|warnings\.warn\(|\bprint\(")


def changed(kind: str, severity: str, view, line: int, name: str, old: object, new: object) -> Finding:
    """A '<name> changed from <old> to <new>' finding on an added line of ``view``."""
    evidence = [view.added.get(line, "").strip()]
    return make_finding(kind, severity, view.path, line, evidence, name=name, old=old, new=new)


def make_finding(kind: str, severity: str, where: str, line: int, evidence: list[str], **kw) -> Finding:
    finding = Finding(kind, severity, where, line, message(f"finding.{kind}", **kw), evidence)  # type: ignore[arg-type]
    finding.params = kw  # for the follow-up text; not serialised
    return finding


def file_findings(view: FileView) -> list[Finding]:
    out = _path_findings(view)
    if view.pre is not None or view.post is not None:
        out += _symbol_findings(view)
        out += _value_findings(view)
        out += _assert_findings(view)
    if view.post is not None:
        out += _except_findings(view)
        out += _literal_findings(view)
    return out


def _path_findings(view: FileView) -> list[Finding]:
    out = []
    fp, path = view.fp, view.path
    changed = fp.added + fp.removed
    share = max(fp.added / max(view.post_len, 1), fp.removed / max(view.pre_len, 1))
    if not fp.is_new and not fp.is_deleted and changed >= REWRITE_LINES and share >= REWRITE_SHARE:
        out.append(
            make_finding(
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
        out.append(make_finding("hot-path-touched", "high", path, first, [], path=path))
    return out


NOT_API = frozenset({"pytestmark", "pytest_plugins"})  # pytest reads these; nobody imports them


def _public_symbols(tree: ast.Module | None, test_file: bool = False) -> dict[str, ast.AST]:
    """Top-level defs, classes and assignments without a leading underscore, plus their methods.
    Module dunders and pytest markers are not API; nor are a test file's tests."""
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
    tests = ("test_", "Test") if test_file else ()
    return {
        k: v
        for k, v in symbols.items()
        if not k.startswith("_") and k not in NOT_API and not (tests and k.split(".")[0].startswith(tests))
    }


def _pass_through(fn: ast.AST) -> bool:
    """A method whose body only calls ``super().<same name>(...)``: removing it changes nothing."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], (ast.Expr, ast.Return)) or body[0].value is None:
        return False
    call = body[0].value
    call = call.value if isinstance(call, ast.Await) else call
    func = call.func if isinstance(call, ast.Call) else None
    return (
        isinstance(func, ast.Attribute)
        and func.attr == fn.name
        and isinstance(func.value, ast.Call)
        and call_name(func.value) == "super"
    )


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
    a = fn.args  # unparsed via annotation-free copies of the parameters; the shared tree is not touched
    args = ast.arguments(
        posonlyargs=[_bare(x) for x in a.posonlyargs],
        args=[_bare(x) for x in a.args],
        vararg=_bare(a.vararg),
        kwonlyargs=[_bare(x) for x in a.kwonlyargs],
        kw_defaults=a.kw_defaults,
        kwarg=_bare(a.kwarg),
        defaults=a.defaults,
    )
    return ast.unparse(args)


def _bare(arg: ast.arg | None) -> ast.arg | None:
    return None if arg is None else ast.arg(arg=arg.arg)


def _symbol_findings(view: FileView) -> list[Finding]:
    out = []
    test_file = view.path.rsplit("/", 1)[-1].startswith(("test_", "conftest")) or "/tests/" in f"/{view.path}"
    before, after = _public_symbols(view.pre, test_file), _public_symbols(view.post, test_file)
    for name, node in before.items():
        if name not in after and ("." not in name or name.split(".")[0] in after) and not _pass_through(node):
            out.append(
                make_finding(
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
        if not isinstance(node, funcs) or not isinstance(old, funcs):
            continue
        was, now = _signature(old), _signature(node)
        if was != now:
            how, severity = _signature_how(old, node)
            evidence = [f"- ({was})", f"+ ({now})"]
            out.append(
                make_finding(
                    "signature-changed", severity, view.path, node.lineno, evidence, name=name, how=how
                )
            )
    return out


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, bool]:
    """Parameter name -> has a default."""
    a = fn.args
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    out = {p.arg: i >= first_default for i, p in enumerate(positional)}
    out |= {p.arg: d is not None for p, d in zip(a.kwonlyargs, a.kw_defaults)}
    return out


def _signature_how(old, new) -> tuple[dict, str]:
    """Which way the change points: parameters gone or newly required break callers; optional ones
    added only let callers pass more."""
    was, now = _params(old), _params(new)
    gone = [p for p in was if p not in now and new.args.kwarg is None]
    required = [p for p, has_default in now.items() if not has_default and p not in was]
    if gone or required:
        return message("signature.callers", names=", ".join(gone + required)), "medium"
    added = [p for p in now if p not in was]
    if added:
        return message("signature.optional", names=", ".join(added)), "low"
    return message("signature.other"), "medium"


def call_name(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _defaults(tree: ast.Module | None, nodes: NodeIndex) -> tuple[dict, dict]:
    """Named defaults (module constants, class attributes, Field defaults) and Field constraints."""
    values: dict[str, tuple[str, int]] = {}
    constraints: dict[str, tuple[dict[str, str], int]] = {}
    for node in tree.body if tree else []:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for name in _assigned_names(node):
                if is_literal(node.value) and not (name.startswith("__") and name.endswith("__")):
                    values[name] = (ast.unparse(node.value), node.lineno)
    for cls in nodes.of(ast.ClassDef):
        for node in cls.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            for name in _assigned_names(node):
                key, value = f"{cls.name}.{name}", node.value
                if call_name(value) in ("Field", "field"):
                    kwargs = {k.arg: ast.unparse(k.value) for k in value.keywords if k.arg}
                    limits = {k: v for k, v in kwargs.items() if k in CONSTRAINT_KWARGS}
                    constraints[key] = (limits, node.lineno)
                    default = kwargs.get("default") or (ast.unparse(value.args[0]) if value.args else None)
                    if default is not None:
                        values[key] = (default, node.lineno)
                elif is_literal(value):
                    values[key] = (ast.unparse(value), node.lineno)
    return values, constraints


def is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _value_findings(view: FileView) -> list[Finding]:
    out = []
    old_values, old_limits = _defaults(view.pre, view.pre_nodes)
    new_values, new_limits = _defaults(view.post, view.post_nodes)
    for key, (limits, line) in new_limits.items():
        if key in old_limits and old_limits[key][0] != limits:
            was = ", ".join(f"{k}={v}" for k, v in sorted(old_limits[key][0].items())) or "-"
            now = ", ".join(f"{k}={v}" for k, v in sorted(limits.items())) or "-"
            out.append(changed("field-constraint-changed", "high", view, line, key, was, now))
    for key, (value, line) in new_values.items():
        if key in old_values and old_values[key][0] != value:
            was, now = compact_change(old_values[key][0], value)
            out.append(changed("default-changed", "medium", view, line, key, was, now))
    return out


def _assert_findings(view: FileView) -> list[Finding]:
    """An assert removed, or an assert / raise whose hunk now only logs."""
    kept = {ast.unparse(n.test) for n in view.post_nodes.of(ast.Assert)}
    out = []
    for node in view.pre_nodes.of(ast.Assert, ast.Raise):
        if node.lineno not in view.removed:
            continue
        logs = any(_LOG_CALL.search(t) for t in view.hunk_added[view.hunk_of_removed[node.lineno]])
        if isinstance(node, ast.Assert) and ast.unparse(node.test) not in kept:
            variant = "log" if logs else "gone"
        elif isinstance(node, ast.Raise) and logs:
            variant = "raise"
        else:
            continue
        out.append(
            make_finding(
                "assert-weakened",
                "medium",
                view.path,
                node.lineno,
                [view.removed[node.lineno].strip()],
                how=message(f"assert.{variant}"),
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
        or (isinstance(s, ast.Return) and (s.value is None or isinstance(s.value, ast.Constant)))
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        or (isinstance(s, ast.Expr) and call_name(s.value) in LOG_METHODS)
        for s in handler.body
    )
    return broad and quiet


def _except_findings(view: FileView) -> list[Finding]:
    return [
        make_finding(
            "broad-except-swallows",
            "medium",
            view.path,
            node.lineno,
            [view.added[node.lineno].strip()],
            what=view.added[node.lineno].strip(),
        )
        for node in view.post_nodes.of(ast.ExceptHandler)
        if node.lineno in view.added and _swallows(node)
    ]


def _literal_findings(view: FileView) -> list[Finding]:
    named = set()  # literals that are the value of a named constant, or an HTTP status code
    for node in view.post_nodes.of(ast.Assign, ast.AnnAssign, ast.keyword):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            if any(n.isupper() for n in _assigned_names(node)):
                named |= {id(n) for n in ast.walk(node.value)}
        elif isinstance(node, ast.keyword) and node.arg in ("status_code", "status"):
            named.add(id(node.value))
    out, magic = [], []
    for node in view.post_nodes.of(ast.Constant):
        if node.lineno not in view.added:
            continue
        value = node.value
        if isinstance(value, str) and _HARD_PATH.match(value):
            out.append(
                make_finding(
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
            and value not in UNIT_FACTORS
            and id(node) not in named
        ):
            magic.append(node)
    test_file = "/tests/" in f"/{view.path}" or view.path.rsplit("/", 1)[-1].startswith("test_")
    if magic and not test_file:  # a test's literals are its data, not tuning knobs
        magic.sort(key=lambda n: n.lineno)
        lines = list(dict.fromkeys(n.lineno for n in magic))
        evidence = [f"L{line}: {view.added[line].strip()}" for line in lines[:8]]
        numbers = ", ".join(dict.fromkeys(repr(n.value) for n in magic))
        out.append(
            make_finding(
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


def capped(findings: list[Finding]) -> list[Finding]:
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
