"""imports gate: after each patch, every module the series has touched so far still imports.

Two witnesses. The static check (``split.static``) over the touched Python files of base + the
series up to this patch: each compiles, each first-party import resolves (module, name, re-export;
a module with ``__getattr__`` or a star import is dynamic), no keyword argument a first-party
definition does not accept. Only problems the state before this patch did not have are the
patch's. Where a test environment exists (the tests gate's settings, ``--python``), a real
``python -c "import m"`` of each touched module in a subprocess with a timeout, on the tree before
and after the patch: a module that already fails before is not blamed; one whose import cannot
be tried says why (could-not-run), never passed.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from patchkit.audit.gates import Gate, GateContext, gate_result
from patchkit.audit.gates.tests import materialise
from patchkit.audit.model import GateResult
from patchkit.split.modfacts import module_name
from patchkit.split.static import first_party, tree_state
from patchkit.values import Message

IMPORT_TIMEOUT = 120.0


def _touched(ctx: GateContext) -> list[str]:
    paths = set(ctx.patch.touched)
    for other in ctx.earlier:
        paths |= other.touched
    return sorted(p for p in paths if p.endswith(".py"))


def _real_imports(python: str, base_root: Path, overlay: dict, modules: list[str]) -> dict[str, dict]:
    """module → {"status": passed|failed|could-not-run, "error": ...} on base + overlay."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="patchkit-imports-") as tmp:
        tree = Path(tmp) / "tree"
        materialise(base_root, overlay, tree)
        for module in modules:
            try:
                proc = subprocess.run([python, "-c", f"import {module}"], cwd=tree, capture_output=True,
                                      text=True, timeout=IMPORT_TIMEOUT)  # fmt: skip
            except subprocess.TimeoutExpired:
                out[module] = {"status": "could-not-run", "error": f"timed out after {IMPORT_TIMEOUT:g} s"}
                continue
            except OSError as exc:
                out[module] = {"status": "could-not-run", "error": f"cannot run {python}: {exc}"}
                continue
            tail = (proc.stderr.strip().splitlines() or [""])[-1]
            out[module] = (
                {"status": "passed"} if proc.returncode == 0 else {"status": "failed", "error": tail}
            )
    return out


def _run(ctx: GateContext) -> GateResult:
    started = time.perf_counter()
    base, post, pre = ctx.trees.base, ctx.state.post or {}, ctx.state.pre
    touched = _touched(ctx)

    def read_post(path: str) -> bytes | None:
        return post[path] if path in post else base.read(path)

    packages = first_party(touched, read_post)
    memo: dict = {}
    after, before = tree_state(base, post, packages, memo), tree_state(base, pre, packages, memo)
    present = [p for p in touched if read_post(p) is not None]
    old = {q.key for p in touched for q in before.check(p)}
    problems = [q for p in present for q in after.check(p) if q.key not in old]
    details: dict = {"modules": len(present), "problems": [q.to_dict() for q in problems]}
    modules = [module_name(p) for p in present if p.split("/")[0] in packages]
    settings = ctx.settings.get("tests")
    reason = None
    if settings is None:
        reason = "no test environment (the tests gate's settings)"
    elif settings.env_error:
        reason = settings.env_error
    real_failed: list[str] = []
    if reason is None and modules:
        patched = _real_imports(settings.python, settings.base_root, post, modules)
        existed = [module_name(p) for p in present if (pre[p] if p in pre else base.read(p)) is not None]
        on_base = _real_imports(
            settings.python, settings.base_root, pre, [m for m in modules if m in existed]
        )
        for module, outcome in patched.items():
            if outcome["status"] == "failed" and on_base.get(module, {}).get("status") == "failed":
                outcome["status"], outcome["base_error"] = (
                    "fails on the base too",
                    on_base[module].get("error"),
                )
        details["real_import"] = {"python": settings.python, "modules": patched}
        real_failed = [m for m, o in patched.items() if o["status"] == "failed"]
    else:
        details["real_import"] = {"status": "could-not-run", "reason": reason or "no module to import"}
    duration = time.perf_counter() - started
    if problems:
        first = problems[0]
        where = f"{first.file}:{first.line}"
        module = first.target or first.name
        params = {"count": len(problems), "where": where, "name": first.name, "module": module}
        key = "gate.imports.static-failed-module" if first.kind == "module" else "gate.imports.static-failed"
        if real_failed:  # the real interpreter agrees: say so, with its error
            params["error"] = details["real_import"]["modules"][real_failed[0]]["error"]
            key += "-confirmed"
        return gate_result("imports", "failed", Message(key, params), details, duration)
    if real_failed:
        error = details["real_import"]["modules"][real_failed[0]]["error"]
        params = {"modules": ", ".join(real_failed), "error": error}
        return gate_result(
            "imports", "failed", Message("gate.imports.import-failed", params), details, duration
        )
    if reason is not None:
        message = Message("gate.imports.static-only", {"count": len(present), "reason": reason or "-"})
    else:
        outcomes = [o["status"] for o in details["real_import"]["modules"].values()]
        counts = {"count": len(present), "ok": outcomes.count("passed"),
                  "base": outcomes.count("fails on the base too"),
                  "cannot": outcomes.count("could-not-run")}  # fmt: skip
        message = Message("gate.imports.passed", counts)
    return gate_result("imports", "passed", message, details, duration)


def _cache_config(ctx: GateContext) -> object:
    settings = ctx.settings.get("tests")
    return None if settings is None else [settings.python, settings.env_error, IMPORT_TIMEOUT]


GATE = Gate("imports", _run, cache_config=_cache_config)
