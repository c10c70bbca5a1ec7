"""Run by the target interpreter (``python probe.py OUT.json < targets.json``), never imported by patchkit:
import each dotted target for real and say what it is — kind, ``inspect.signature`` as
(name, kind, has a default) rows, the source lines' sha256, file and first line.

Standard library only: the interpreter is the user's environment with vLLM installed, not ours.
"""

import hashlib
import importlib
import inspect
import json
import os
import sys


def _import_prefix(parts):
    """The longest importable module prefix of ``parts`` and its length, walking down packages (a
    module that is no package has no submodules to try). An ImportError of anything but the
    submodule tried — a dependency — is raised: the target could not be witnessed."""
    value = importlib.import_module(parts[0])
    end = 1
    while end < len(parts) and "__path__" in vars(value):
        name = ".".join(parts[: end + 1])
        if parts[end] in vars(value) and not inspect.ismodule(vars(value)[parts[end]]):
            break  # the package binds that name to something else: an attribute, not a submodule
        try:
            value = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                break
            raise
        end += 1
    return value, end


def _shape(function):
    try:
        sig = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    return [[p.name, p.kind.name, p.default is not p.empty] for p in sig.parameters.values()]


def _unwrap(value):
    """The function a descriptor holds: what the source's ``def`` made."""
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property) and value.fget is not None:
        return value.fget
    return getattr(value, "func", value) if type(value).__name__ == "cached_property" else value


def _made(raw):
    """The descriptor a class attribute is, as its class holds it ('' for a plain function)."""
    for kind in (staticmethod, classmethod, property):
        if isinstance(raw, kind):
            return kind.__name__
    return "cached_property" if type(raw).__name__ == "cached_property" else ""


def _kind(value):
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "class"
    if inspect.isfunction(value) or inspect.isroutine(value):
        return "function"
    return "value"


def _root_of(value):
    top = sys.modules.get("vllm")
    base = os.path.dirname(os.path.dirname(os.path.abspath(top.__file__))) if top else ""
    try:
        path = inspect.getsourcefile(inspect.unwrap(value)) or ""  # a decorator's wrapper lives elsewhere
    except TypeError:
        return ""
    return os.path.relpath(path, base) if base and path.startswith(base) else path


def probe(target):
    parts = target.split(".")
    try:
        value, end = _import_prefix(parts)
    except BaseException as exc:  # noqa: BLE001 - any import failure is what we report
        return {"target": target, "imported": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    made = ""
    for name in parts[end:]:
        try:
            raw = inspect.getattr_static(value, name)
            made = _made(raw) if inspect.isclass(value) else ""
            value = _unwrap(raw)
        except AttributeError:
            try:
                value = getattr(value, name)  # a module __getattr__ (lazy names)
            except Exception:  # noqa: BLE001
                return {"target": target, "imported": True, "exists": False}
    out = {"target": target, "imported": True, "exists": True, "kind": _kind(value), "descriptor": made}
    if out["kind"] == "class":
        init = None
        for klass in inspect.getmro(value):
            if "__init__" in vars(klass):
                init = vars(klass)["__init__"]
                break
        out["signature"] = _shape(init) if inspect.isfunction(init) else None
    elif out["kind"] == "function":
        out["signature"] = _shape(value)
    if out["kind"] in ("class", "function"):
        try:
            lines, first = inspect.getsourcelines(value)
            out["source_sha256"] = hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()
            out["file"], out["line"] = _root_of(value), first
        except (OSError, TypeError):
            out["source_sha256"] = None
    return out


def main():
    targets = json.load(sys.stdin)
    results = [probe(t) for t in targets]
    top = sys.modules.get("vllm")
    version = getattr(top, "__version__", None) if top else None
    record = {"vllm": version, "python": sys.version.split()[0], "results": results}
    with open(sys.argv[1], "w", encoding="utf-8") as out:  # not stdout: vLLM logs there
        json.dump(record, out)


if __name__ == "__main__":
    main()
