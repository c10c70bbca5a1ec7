"""The package layout holds its rules: no import cycle (function-level imports included), lower layers
never import higher ones, no module imports another's ``_private`` name, no module past ~400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "patchkit"
MAX_LINES = 420

# Low to high; a module may import its own layer and lower ones. docs/architecture.md draws this.
LAYERS: list[tuple[str, ...]] = [
    ("patchkit", "patchkit.__main__"),  # patchkit/__init__.py: the version
    (
        "patchkit.errors",
        "patchkit.values",
        "patchkit.git",
        "patchkit.cache",
        "patchkit.console",
        "patchkit.ui.console",
        "patchkit.atomic",
        "patchkit.timing",
        "patchkit.tmpdir",
        "patchkit.globs",
        "patchkit.pipconf",
        "patchkit.versions",
        "patchkit.txn",
    ),
    ("patchkit.diff",),
    ("patchkit.base", "patchkit.upstream"),
    ("patchkit.series",),
    ("patchkit.split",),
    ("patchkit.apply",),
    ("patchkit.audit", "patchkit.runtime"),
    ("patchkit.report", "patchkit.pipelines"),
    ("patchkit.rebase", "patchkit.wheels", "patchkit.edit", "patchkit.interdiff"),
    ("patchkit.config", "patchkit.output", "patchkit.ui"),
    ("patchkit.commands", "patchkit.cli", "patchkit.entry"),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    best, level = -1, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, level = len(name), index
    if module == "patchkit.__main__":
        return len(LAYERS) - 1
    assert level >= 0, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return level


def imports_of(path: Path) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import anywhere in the file."""
    tree = ast.parse(path.read_text("utf-8"))
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (alias.name, [], node.lineno) for alias in node.names if alias.name.startswith("patchkit")
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.startswith("patchkit"):
                found.append((source, [alias.name for alias in node.names], node.lineno))
    return found


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(source: str, names: list[str]) -> list[str]:
    """The modules an import loads: ``from patchkit.apply import plan`` loads patchkit.apply.plan."""
    loaded = [source]
    loaded += [f"{source}.{n}" for n in names if f"{source}.{n}" in MODULES]
    return loaded


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for source, names, _ in imports_of(path):
            graph[module].update(m for m in resolve(source, names) if m in MODULES and m != module)
    return graph


def test_no_import_cycle() -> None:
    graph = edges()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            # a package's __init__ importing its own submodules is not a cycle between stages
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_lower_layers_never_import_higher_ones() -> None:
    wrong = []
    for module, path in MODULES.items():
        for source, names, line in imports_of(path):
            for target in resolve(source, names):
                if target in MODULES and layer_of(target) > layer_of(module):
                    wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} imports {target}")
    assert wrong == []


def test_no_private_name_imported_across_modules() -> None:
    wrong = []
    for module, path in MODULES.items():
        for source, names, line in imports_of(path):
            for name in names:
                if name.startswith("_") and not name.startswith("__") and source != module:
                    wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {source}.{name}")
    assert wrong == []


def test_no_module_is_too_long() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_checker_finds_a_cycle_and_a_private_import(tmp_path: Path) -> None:
    """The checks above could fail: fed a tiny package with both faults, they report them."""
    (tmp_path / "patchkit" / "diff").mkdir(parents=True)
    (tmp_path / "patchkit" / "__init__.py").write_text("")
    (tmp_path / "patchkit" / "diff" / "__init__.py").write_text("")
    a = tmp_path / "patchkit" / "diff" / "a.py"
    a.write_text("def f():\n    from patchkit.diff.b import _secret\n")
    (tmp_path / "patchkit" / "diff" / "b.py").write_text("from patchkit.diff import a\n_secret = 1\n")
    global PACKAGE, MODULES
    saved = PACKAGE, MODULES
    try:
        PACKAGE = tmp_path / "patchkit"
        MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
        with pytest.raises(pytest.fail.Exception, match="import cycle"):
            test_no_import_cycle()
        with pytest.raises(AssertionError, match="_secret"):
            test_no_private_name_imported_across_modules()
    finally:
        PACKAGE, MODULES = saved


def test_the_edit_loop_keeps_no_transaction_machinery_of_its_own() -> None:
    """One transaction mechanism (``patchkit.txn``): no module of ``patchkit/edit`` writes a journal
    or swaps a directory itself; every mention of a journal there is an import from patchkit.txn
    (the kill profile of the edit loop, tests/test_edit_kill.py, is the behaviour this keeps)."""
    edit = PACKAGE / "edit"
    assert not (edit / "txn.py").exists() and not (edit / "journal.py").exists()
    wrong = []
    for path in sorted(edit.rglob("*.py")):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            own = "journal" in code.lower() and not code.lstrip().startswith("from patchkit.txn")
            if own or "renameat2" in code or "exchange(" in code or "RENAME_EXCHANGE" in code:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert wrong == []
    uses = "".join(p.read_text("utf-8") for p in edit.rglob("*.py"))
    assert "from patchkit.txn import dirswap" in uses and "from patchkit.txn.lock import target_lock" in uses
