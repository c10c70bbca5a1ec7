"""The names Python's data model gives every module, class and function, asked of the running
interpreter (never a list typed by hand), and the decorators whose result is known by reading.

- a module: what the import system sets (``module_from_spec``), what ``exec`` adds
  (``__builtins__``) and what the module type provides; ``__path__`` only for a package;
- a class: what every ``class`` statement makes (``vars`` of an empty class) and the metaclass's
  data descriptors (``__name__``, ``__qualname__``, ``__mro__`` …), which no base can hide;
  ``OBJECT_ATTRIBUTES`` (``__init__``, ``__repr__`` …) a base may redefine, so they come last;
- a function: ``dir`` of a def (``__code__``, ``__defaults__``, ``__qualname__`` …); ``__wrapped__``
  only on what ``functools.wraps`` made.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect

from patchkit.analysis.modfacts import dotted_name


def _module_names(package: bool) -> frozenset[str]:
    where = "/nonexistent/m/__init__.py" if package else "/nonexistent/m.py"
    spec = importlib.util.spec_from_file_location(
        "m", where, submodule_search_locations=[] if package else None
    )
    assert spec is not None
    module = importlib.util.module_from_spec(spec)  # sets the import system's names; reads nothing
    namespace: dict[str, object] = {}
    exec("", namespace)  # noqa: S102 - what running a module body adds to its globals: __builtins__
    return frozenset({*vars(module), *namespace, *(n for n in dir(type(module)) if hasattr(module, n))})


class _Plain:
    pass


def _plain() -> None:
    pass


MODULE_ATTRIBUTES = _module_names(package=False)
PACKAGE_ATTRIBUTES = _module_names(package=True)
OBJECT_ATTRIBUTES = frozenset(n for n in {*dir(object), *dir(type)} if hasattr(_Plain, n))
CLASS_OWN_ATTRIBUTES = frozenset(
    {*vars(_Plain)} | {n for n, v in vars(type).items() if inspect.isdatadescriptor(v) and hasattr(_Plain, n)}
)
FUNCTION_ATTRIBUTES = frozenset(dir(_plain))
BINDERS = {"staticmethod", "classmethod"}  # read through the class, a def decorated so is a function


def function_attribute(node: ast.AST, name: str, wrapping: bool) -> bool | None:
    """Has the def ``node`` (as its class or module reads it) the attribute ``name``? True, False
    (``__wrapped__`` on a def nothing wrapped) or None (a decorator made something reading cannot
    see). ``wrapping``: its one decorator is a def whose result ``functools.wraps`` made."""
    decorators = [dotted_name(d) or "" for d in getattr(node, "decorator_list", [])]
    plain = all(d.rpartition(".")[2] in BINDERS for d in decorators)
    if plain or wrapping:
        if name in FUNCTION_ATTRIBUTES or (wrapping and name == "__wrapped__"):
            return True
        return False if name == "__wrapped__" and plain else None
    return None


def wraps_its_argument(node: ast.AST) -> bool:
    """A decorator def whose every ``return`` gives a def of its own decorated ``@functools.wraps(…)``."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    wrapped = {
        inner.name
        for inner in node.body
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(
            isinstance(d, ast.Call) and (dotted_name(d.func) or "").rpartition(".")[2] == "wraps"
            for d in inner.decorator_list
        )
    }
    returns = [n for n in node.body if isinstance(n, ast.Return)]
    return bool(returns) and all(isinstance(r.value, ast.Name) and r.value.id in wrapped for r in returns)
