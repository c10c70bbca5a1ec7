"""``patchkit runtime``'s engine: every monkeypatching module of a plugin, one audit row each."""

from __future__ import annotations

import ast
import os
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchkit.analysis.bindings import guard_texts
from patchkit.audit.model import AuditResult, PatchAudit, RuntimeTarget
from patchkit.audit.verdict import verdict_reasons, worst
from patchkit.errors import UserError
from patchkit.runtime import gates as checks
from patchkit.runtime import witness
from patchkit.runtime.guide import guide
from patchkit.runtime.registry import read_registry
from patchkit.runtime.resolve import SourceIndex
from patchkit.runtime.sites import ModuleScan, scan_module
from patchkit.runtime.targets import Trees, adds_when_absent, module_targets, use_status
from patchkit.values import Pin

STATIC_TOOL = "patchkit.runtime (ast reading of the pinned tree)"


@dataclass
class RuntimeOptions:
    pin: Pin
    tree: Path
    old_pin: Pin | None = None
    old_tree: Path | None = None
    python: str | None = None
    timeout: float = 600.0


def run_runtime(plugin_dir: Path, options: RuntimeOptions) -> AuditResult:
    if not plugin_dir.is_dir():
        raise UserError("not a directory", str(plugin_dir))
    plugin_root, package = plugin_root_of(plugin_dir)
    trees = Trees(
        SourceIndex(options.tree),
        SourceIndex(plugin_root),
        SourceIndex(options.old_tree) if options.old_tree else None,
    )
    registry = read_registry(plugin_dir)
    scans, quiet = scan_plugin(plugin_dir, plugin_root)
    rows = [
        (scan, module_targets(scan, trees, registry.get(scan.rel)), _module_uses(scan, trees.base))
        for scan in scans
    ]
    ctx = checks.Context(
        pin=_label(options.pin),
        old=_label(options.old_pin) if options.old_pin else None,
        static={
            "witness": "static",
            "tool": STATIC_TOOL,
            "pin": options.pin.to_dict(),
            "since": options.old_pin.to_dict() if options.old_pin else None,
        },
    )
    static_counts = counts([t for _, ts, _ in rows for t in ts])
    error = _witness(rows, options, ctx) if options.python else None
    guards = imported_when(plugin_dir, {scan.module: scan.rel for scan in scans})
    audits = [
        _row(scan, targets, uses, registry.get(scan.rel, {}), guards.get(scan.rel, []), ctx, options, error)
        for scan, targets, uses in rows
    ]
    environment = {
        "kind": "runtime",
        "plugin": str(plugin_dir.resolve()),
        "package": package,
        "since": options.old_pin.to_dict() if options.old_pin else None,
        "interpreter": ctx.real,
        "modules_without_sites": quiet,
        "outside_vllm": {s.rel: [site.target for site in s.outside] for s in scans if s.outside},
        "registry_files": sorted({e.get("registry", "") for e in registry.values()}),
        "registry_without_module": sorted(k for k in registry if not (plugin_dir / k).is_file()),
        "counts": counts([t for _, ts, _ in rows for t in ts]),
        "static_counts": static_counts,
        "hostname": platform.node(),
    }
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return AuditResult(
        str(plugin_dir), options.pin, audits, worst([a.verdict for a in audits]), environment, created=created
    )


def _row(
    scan: ModuleScan,
    targets: list[RuntimeTarget],
    uses: list[dict[str, Any]],
    entry: dict[str, Any],
    guards: list[str],
    ctx: checks.Context,
    options: RuntimeOptions,
    error: str | None,
) -> PatchAudit:
    """One patch module as one audit row: its checks, verdict, guide, targets and registry note."""
    results = [checks.targets_gate(targets, ctx, guards)]
    if checks.comparable(targets):  # no def beside a def: nothing to compare, no claim made
        results.append(checks.signature_gate(targets, ctx))
    if ctx.old:
        results.append(checks.upstream_gate(targets, ctx))
    results.append(checks.uses_gate(uses, ctx))
    if options.python:
        results.append(checks.witness_gate(targets, ctx, error))
    verdict, reasons = verdict_reasons(results)
    return PatchAudit(
        patch=scan.rel,
        domain=scan.rel.split("/")[0] if "/" in scan.rel else "runtime",
        title={"en": scan.module, "zh": scan.module},
        gates=results,
        verdict=verdict,
        reasons=[],
        files=[{"path": scan.rel, "added": 0, "removed": 0}],
        diff="".join(t.upstream_diff for t in targets),  # the HTML shows each original's upstream diff
        guide=guide(scan.rel, targets, uses, entry, ctx),
        reason_messages=reasons,
        targets=targets,
        registry=entry,
    )


def imported_when(plugin_dir: Path, modules: dict[str, str]) -> dict[str, list[str]]:
    """{module path: the ``if`` tests under which the plugin's own code imports it} — a patch the
    plugin imports only for some vLLM versions says so beside its findings."""
    found: dict[str, list[str]] = {}
    for path in sorted(plugin_dir.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node, tests in _guarded_imports(tree.body, []):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
            )
            for name in names:
                for dotted in (name, name.rpartition(".")[0]):
                    if dotted in modules and tests:
                        found.setdefault(modules[dotted], []).extend(
                            t for t in tests if t not in found.get(modules[dotted], [])
                        )
    return found


def _guarded_imports(body: list[ast.stmt], tests: list[str]):
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            yield node, tests
        elif isinstance(node, ast.If):
            then, otherwise = guard_texts(node.test)
            yield from _guarded_imports(node.body, [*tests, then])
            yield from _guarded_imports(node.orelse, [*tests, otherwise])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _guarded_imports(node.body, [*tests, f"in {node.name}()"])
        elif isinstance(node, (ast.Try, ast.With)):
            yield from _guarded_imports(node.body, tests)


def plugin_root_of(plugin_dir: Path) -> tuple[Path, str]:
    """The directory that holds the plugin's top package, and the plugin dir's dotted name."""
    here = plugin_dir.resolve()
    parts: list[str] = []
    while (here / "__init__.py").is_file():
        parts.insert(0, here.name)
        here = here.parent
    return here, ".".join(parts)


def scan_plugin(plugin_dir: Path, plugin_root: Path) -> tuple[list[ModuleScan], list[str]]:
    """A scan of every module under ``plugin_dir`` with a site; the paths of those without one."""
    scans, quiet = [], []
    for path in sorted(plugin_dir.rglob("*.py")):
        if "__pycache__" in path.parts or any(p.startswith(".") for p in path.relative_to(plugin_dir).parts):
            continue
        rel = path.relative_to(plugin_dir).as_posix()
        dotted = _dotted(path, plugin_root)
        try:
            scan = scan_module(rel, dotted, path.read_text("utf-8"), path.name == "__init__.py")
        except SyntaxError as exc:
            raise UserError(f"does not parse: {exc.msg}", f"{path}:{exc.lineno}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read: {exc}", str(path)) from None
        if scan.sites or scan.outside or scan.unnamed:
            scans.append(scan)
        else:
            quiet.append(rel)
    return scans, quiet


def _dotted(path: Path, root: Path) -> str:
    rel = path.resolve().relative_to(root).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_uses(scan: ModuleScan, base: SourceIndex) -> list[dict[str, Any]]:
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for use in scan.uses:
        seen.setdefault(
            (use.name, use.line),
            {"name": use.name, "line": use.line, "status": use_status(base.resolve(use.name, scan.imports))},
        )
    return sorted(seen.values(), key=lambda u: (u["line"], u["name"]))


def _witness(rows: list, options: RuntimeOptions, ctx: checks.Context) -> str | None:
    """Run the probe once over every target; fill ``real`` on each; an error string when it cannot."""
    python = options.python or ""
    names = sorted({t.target for _, targets, _ in rows for t in targets})
    try:
        answer = witness.run_probe(python, names, options.timeout)
    except witness.WitnessError as exc:
        ctx.real = {"witness": "interpreter", "python": python, "error": str(exc)}
        return str(exc)
    ctx.real = {
        "witness": "interpreter",
        "python": os.path.abspath(python) if "/" in python else python,
        "vllm": answer.get("vllm"),
        "python_version": answer.get("python"),
        "tool": "inspect",
    }
    by_target = {r["target"]: r for r in answer.get("results", [])}
    for _, targets, _ in rows:
        for t in targets:
            t.real = witness.compare(t, by_target.get(t.target, {"imported": False, "error": "no answer"}))
            if t.real.get("ran") and t.real.get("agrees") and t.status != "unknown":
                t.witness = "static+interpreter"
            elif t.real.get("ran") and t.status == "unknown":
                t.status, t.witness = _settled(t), "interpreter"
    return None


def _settled(target: RuntimeTarget) -> str:
    """What the real import makes of a target reading could not settle: present; missing when the
    older pin defined it (gone, never "added"); else, as for an absent one, missing when the plugin
    reads the original or its registry names it, added when it only sets it."""
    if target.real.get("exists"):
        return "present"
    if target.old_defined_in:
        return "missing"
    if adds_when_absent(target):
        return "added"
    return "missing" if target.captured or target.registry else "added"


def counts(targets: list[RuntimeTarget]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in targets:
        out[t.status] = out.get(t.status, 0) + 1
    return dict(sorted(out.items()))


def _label(pin: Pin) -> str:
    return pin.version or (pin.rev or "")[:12] or pin.path or "?"
