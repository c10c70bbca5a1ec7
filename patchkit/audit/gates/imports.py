"""imports gate: after each patch, every module the series has touched so far still imports.

Two witnesses. The static check (``analysis.static``) over the touched Python files of base + the
series up to this patch: each compiles, each first-party import resolves (module, name, re-export;
a module with ``__getattr__`` or a star import is dynamic), no keyword argument a first-party
definition does not accept; undefined names join it through ``undefined_names`` (split/'s
analysis). Only problems the state before this patch did not have are the patch's. Then a real
``python -c "import m"`` of each touched module in a subprocess with a timeout, on the tree before
and after the patch (``--python``, or the tests gate's environment). A module that fails the same
way on the base (or, one the series adds, whose package does) is not blamed.

The gate passes only when the real import ran and at least one touched module imported: no
interpreter, a timeout, or every import failing on the base too is could-not-run with the reason
(``[audit] optional`` can accept it); a static problem or an import the patch broke fails it.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path

from patchkit import __version__
from patchkit.analysis import undefined
from patchkit.analysis.dependents import dependents
from patchkit.analysis.modfacts import module_name
from patchkit.analysis.static import first_party, tree_state
from patchkit.audit.gates import Gate, GateContext, gate_result, witness
from patchkit.audit.gates.tests import materialise
from patchkit.audit.model import Evidence, GateResult
from patchkit.proc import TimeoutExpired, run_process
from patchkit.values import Message

IMPORT_TIMEOUT = 120.0


def _touched(ctx: GateContext) -> list[str]:
    paths = set(ctx.patch.touched)
    for other in ctx.earlier:
        paths |= other.touched
    return sorted(p for p in paths if p.endswith(".py"))


def _real_imports(python: str, base_root: Path, overlay: dict, modules: list[str]) -> dict[str, dict]:
    """module → {"status": passed|failed|could-not-run, "error": ...} on base + overlay (errors with
    the scratch tree's path as ``<tree>``, so both sides' errors compare)."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="patchkit-imports-") as tmp:
        tree = Path(tmp) / "tree"
        materialise(base_root, overlay, tree)
        for module in modules:
            try:
                proc = run_process(
                    [python, "-c", f"import {module}"], cwd=tree, text=True, timeout=IMPORT_TIMEOUT
                )
            except TimeoutExpired:
                out[module] = {"status": "could-not-run", "error": f"timed out after {IMPORT_TIMEOUT:g} s"}
                continue
            except OSError as exc:
                out[module] = {"status": "could-not-run", "error": f"cannot run {python}: {exc}"}
                continue
            tail = (proc.stderr.strip().splitlines() or [""])[-1].replace(str(tree), "<tree>")
            out[module] = (
                {"status": "passed"} if proc.returncode == 0 else {"status": "failed", "error": tail}
            )
    return out


def _base_side(module: str, existed: set[str], on_base: dict[str, dict]) -> dict | None:
    """What the base said for ``module``, or for its nearest package there (a module the series
    adds): an import that fails the same way on the base is the environment's, not the patch's."""
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if name in existed and name in on_base:
            return on_base[name]
    return None


def _python_version(python: str) -> str:
    try:
        proc = run_process(
            [python, "-c", "import platform; print(platform.python_version())"],
            text=True,
            timeout=IMPORT_TIMEOUT,
        )
    except (OSError, TimeoutExpired):
        return ""
    return proc.stdout.strip()


def undefined_names(base, overlay: dict, paths: list[str]) -> list | None:
    """ruff F821/F822/F823 and F405 (``analysis.undefined``) on ``paths`` of base + overlay,
    as ``analysis.static`` problems of kind ``undefined``; None when no ruff can run here (the gate
    then records that its static half checked imports and keywords only)."""
    files = {p: overlay[p] if p in overlay else base.read(p) for p in paths if p.endswith(".py")}
    try:
        return undefined.check_one(files)
    except undefined.NoRuff:
        return None


def _run(ctx: GateContext) -> GateResult:
    started = time.perf_counter()
    base, post, pre = ctx.trees.base, ctx.state.post or {}, ctx.state.pre
    touched = _touched(ctx)

    def read_post(path: str) -> bytes | None:
        return post[path] if path in post else base.read(path)

    def read_pre(path: str) -> bytes | None:
        return pre[path] if path in pre else base.read(path)

    packages = first_party(touched, read_post)
    present = [p for p in touched if read_post(p) is not None]
    problems, static = _static_problems(ctx, touched, present, packages)
    users = static["dependents"]
    details: dict = {"modules": len(present), "problems": [q.to_dict() for q in problems], "static": static}
    counts = {"files": len(present), "dependents": len(users), "problems_added": len(problems)}
    said = f"{len(problems)} problem(s) added"
    evidence = [witness(STATIC, said, version=__version__, inputs=present + users, counts=counts)]
    modules = [module_name(p) for p in present if p.split("/")[0] in packages]
    # an untouched module the static check finds broken is imported for real too (the witness)
    modules += sorted({module_name(q.file) for q in problems if q.file in users} - set(modules))
    settings = ctx.settings.get("tests")
    reason = None
    if settings is None:
        reason = "no interpreter given (--python, or the tests gate's environment)"
    elif settings.env_error:
        reason = settings.env_error
    elif not modules:
        reason = "no first-party module among the touched files: nothing to import"
    real: dict[str, dict] = {}
    if reason is None:
        existed = {module_name(p) for p in touched if p.endswith(".py") and read_pre(p) is not None}
        existed |= {module_name(p) for p in _packages_of(touched, read_pre)}
        real = _compared_imports(settings, pre, post, modules, existed)
        details["real_import"] = {"python": settings.python, "modules": real}
        evidence.append(_python_witness(settings.python, modules, real))
    else:
        details["real_import"] = {"status": "could-not-run", "reason": reason}
    status, key, params = _decide(problems, real, reason, len(present))
    message = Message(key, params)
    return gate_result("imports", status, message, details, time.perf_counter() - started, evidence)


def _static_problems(ctx: GateContext, touched: list[str], present: list[str],
                     packages: set[str]) -> tuple[list, dict]:  # fmt: skip
    """The problems this patch adds to the touched files' static state and to the untouched files
    that use what the series takes away (``analysis.dependents``), and which checks ran."""
    base, post, pre = ctx.trees.base, ctx.state.post or {}, ctx.state.pre
    memo: dict = {}
    after, before = tree_state(base, post, packages, memo), tree_state(base, pre, packages, memo)
    users = dependents(base, [post], packages)
    old = {q.key for p in [*touched, *users] for q in before.check(p)}
    problems = [q for p in [*present, *users] for q in after.check(p) if q.key not in old]
    undefined_after = undefined_names(base, post, present)
    if undefined_after is not None:
        gone = {q.key for q in undefined_names(base, pre, touched) or []}
        problems += [q for q in undefined_after if q.key not in gone]
    return problems, {"imports": True, "keywords": True, "undefined_names": undefined_after is not None,
                      "dependents": users}  # fmt: skip


def _compared_imports(settings, pre: dict, post: dict, modules: list[str], existed: set[str]) -> dict:
    """Each module's real import with the patch; one that fails as it (or its package) does on
    the base is marked "fails on the base too"."""
    real = _real_imports(settings.python, settings.base_root, post, modules)
    on_base = _real_imports(settings.python, settings.base_root, pre, sorted(existed & _ancestry(modules)))
    for module, outcome in real.items():
        seen = _base_side(module, existed, on_base)
        if outcome["status"] == "failed" and seen and seen.get("error") == outcome["error"]:
            outcome["status"], outcome["base_error"] = "fails on the base too", seen.get("error")
    return real


def _python_witness(python: str, modules: list[str], real: dict[str, dict]) -> Evidence:
    told = Counter(o["status"] for o in real.values())
    counts = {"modules": len(real), "imported": told["passed"], "failed": told["failed"]}
    counts |= {"fails_on_base": told["fails on the base too"], "could_not_run": told["could-not-run"]}
    said = f"{told['passed']} of {len(real)} import(s) exit 0"
    command = [python, "-c", "import {module}"]
    return witness("python", said, version=_python_version(python), command=command, inputs=modules,
                   counts=counts)  # fmt: skip


def _decide(problems: list, real: dict[str, dict], reason: str | None, count: int) -> tuple[str, str, dict]:
    """(status, message key, params): failed on a static problem or an import the patch broke;
    passed only when the real import ran and a touched module imported; else could-not-run."""
    broke = [m for m, o in real.items() if o["status"] == "failed"]
    if problems:
        first = problems[0]
        params = {"count": len(problems), "where": f"{first.file}:{first.line}", "name": first.name,
                  "module": first.target or first.name}  # fmt: skip
        key = "gate.imports.static-failed-module" if first.kind == "module" else "gate.imports.static-failed"
        if broke:  # the real interpreter agrees: say so, with its error
            params["error"] = real[broke[0]]["error"]
            key += "-confirmed"
        return "failed", key, params
    if broke:
        return (
            "failed",
            "gate.imports.import-failed",
            {"modules": ", ".join(broke), "error": real[broke[0]]["error"]},
        )
    if reason is not None:  # the real import never ran: never "passed"
        return "could-not-run", "gate.imports.no-real-import", {"count": count, "reason": reason}
    cannot = [m for m, o in real.items() if o["status"] == "could-not-run"]
    if cannot:
        params = {"modules": ", ".join(cannot), "error": real[cannot[0]]["error"]}
        return "could-not-run", "gate.imports.import-could-not-run", params
    imported = [m for m, o in real.items() if o["status"] == "passed"]
    if not imported:  # every import fails on the base too: nothing witnessed that this patch imports
        first = next(iter(real.values()))
        error = first.get("base_error") or first.get("error", "")
        return "could-not-run", "gate.imports.fails-on-base", {"count": len(real), "error": error}
    return (
        "passed",
        "gate.imports.passed",
        {"count": count, "ok": len(imported), "base": len(real) - len(imported)},
    )


STATIC = (
    "patchkit static check (analysis/static.py: imports, keywords; analysis/undefined.py: ruff F821-3, F405)"
)


def _ancestry(modules: list[str]) -> set[str]:
    """Each module and every package above it."""
    return {".".join(m.split(".")[:cut]) for m in modules for cut in range(1, m.count(".") + 2)}


def _packages_of(paths: list[str], read) -> list[str]:
    """The ``__init__.py`` of every package above the touched files that exists in the state."""
    found = []
    for path in paths:
        parts = path.split("/")[:-1]
        for cut in range(1, len(parts) + 1):
            init = "/".join(parts[:cut]) + "/__init__.py"
            if init not in found and read(init) is not None:
                found.append(init)
    return found


def _cache_config(ctx: GateContext) -> object:
    settings = ctx.settings.get("tests")
    return None if settings is None else [settings.python, settings.env_error, IMPORT_TIMEOUT]


GATE = Gate("imports", _run, cache_config=_cache_config)
