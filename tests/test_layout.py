"""The package layout holds its rules: no import cycle (function-level imports included), lower layers
never import higher ones, no module imports another's ``_private`` name, no module past ~400 lines,
no package past ~3,000, and one module starts processes (``patchkit.proc``).

``python tests/test_layout.py`` prints the layout in figures: packages, modules and lines per
package, cycles, upward imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "patchkit"
MAX_LINES = 420
MAX_PACKAGE_LINES = 3000  # the sum of a package's modules, its subpackages included

# Low to high; a module may import its own layer and lower ones. docs/architecture.md draws this.
LAYERS: list[tuple[str, ...]] = [
    ("patchkit", "patchkit.__main__"),  # patchkit/__init__.py: the version
    (
        "patchkit.errors",
        "patchkit.values",
        "patchkit.proc",
        "patchkit.git",
        "patchkit.cache",
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
    ("patchkit.analysis",),
    ("patchkit.split",),
    ("patchkit.apply",),
    ("patchkit.testrun", "patchkit.tools", "patchkit.guide"),
    ("patchkit.audit", "patchkit.runtime"),
    ("patchkit.report", "patchkit.pipelines"),
    ("patchkit.rebase", "patchkit.wheels", "patchkit.edit", "patchkit.interdiff"),
    ("patchkit.config", "patchkit.output", "patchkit.project", "patchkit.ui"),
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


def cycles() -> list[list[str]]:
    """The import cycles a depth-first walk meets (each closing edge once); [] when there is none."""
    graph = edges()
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_import_cycle() -> None:
    if found := cycles():
        pytest.fail("import cycle: " + " -> ".join(found[0]))


def upward_imports() -> list[str]:
    wrong = []
    for module, path in MODULES.items():
        for source, names, line in imports_of(path):
            for target in resolve(source, names):
                if target in MODULES and layer_of(target) > layer_of(module):
                    wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} {module} imports {target}")
    return wrong


def test_lower_layers_never_import_higher_ones() -> None:
    assert upward_imports() == []


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


def packages() -> dict[str, tuple[int, int]]:
    """package -> (modules, lines): each folder of patchkit/ with its subfolders, and ``patchkit``
    itself for the modules at the top."""
    sizes: dict[str, tuple[int, int]] = {}
    for path in MODULES.values():
        parts = path.relative_to(PACKAGE).parts
        name = "patchkit" if len(parts) == 1 else f"patchkit.{parts[0]}"
        modules, lines = sizes.get(name, (0, 0))
        sizes[name] = (modules + 1, lines + len(path.read_text("utf-8").splitlines()))
    return sizes


def test_no_package_is_too_big() -> None:
    """A package past ~3,000 lines holds more than one job (audit/ was 8,235 lines before issue 43)."""
    big = {name: lines for name, (_, lines) in packages().items() if lines > MAX_PACKAGE_LINES}
    assert big == {}


# Starting a process is done in one place (its timeout, capture, process group and death signal);
# os.fork of patchkit itself is not a program run: the allowed module says why.
PROCESS_MODULES = ("subprocess", "pty", "multiprocessing", "concurrent.futures.process")
PROCESS_CALLS = ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawn", "exec")
PROCESS_ALLOWED = {
    "patchkit.proc": "the one runner",
    "patchkit.analysis.syntax": "os.fork: a copy of patchkit compiles intermediate states on the other core",
}


def process_starts(path: Path) -> list[str]:
    """Where a module imports a process module or calls ``os`` to start or replace a process."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
            names += (
                [f"{node.module}.{a.name}" for a in node.names] if node.module in ("os", "asyncio") else []
            )
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            names = [f"os.{node.attr}"]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("create_subprocess"):
            names = [node.attr]
        else:
            continue
        for name in names:
            process = name.split(".")[0] in PROCESS_MODULES or name in PROCESS_MODULES
            process |= name.startswith("os.") and name[3:].startswith(PROCESS_CALLS)
            process |= "create_subprocess" in name
            if process:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}")
    return found


def test_only_proc_starts_processes() -> None:
    """No module but ``patchkit.proc`` imports ``subprocess`` (or starts a process another way):
    every child gets the same timeout and capture, and git's its process group and death signal.
    A module run as a script in another interpreter (``runtime/probe.py``, in the user's) could not
    import patchkit; none of them starts a process, so the allow-list holds no such module."""
    wrong = [hit for module, path in sorted(MODULES.items()) if module not in PROCESS_ALLOWED
             for hit in process_starts(path)]  # fmt: skip
    assert wrong == []
    assert process_starts(PACKAGE / "proc.py"), "the check no longer sees proc's own subprocess"


def figures() -> str:
    """The layout in figures, as ``python tests/test_layout.py`` prints it."""
    sizes = packages()
    rows = [f"{name:<22} {modules:>4} {lines:>6}" for name, (modules, lines) in sorted(sizes.items())]
    return "\n".join([
        f"{'package':<22} {'mods':>4} {'lines':>6}",
        *rows,
        f"{len(sizes)} packages, {sum(m for m, _ in sizes.values())} modules, "
        f"{sum(n for _, n in sizes.values())} lines; largest {max(n for _, n in sizes.values())} "
        f"(bound {MAX_PACKAGE_LINES}); cycles {len(cycles())}; upward imports {len(upward_imports())}",
    ])  # fmt: skip


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


def test_checker_finds_a_process_start_and_a_big_package(tmp_path: Path) -> None:
    """The checks above could fail: a module that imports subprocess, one that calls os.system, and
    a package past the bound are each reported."""
    (tmp_path / "patchkit" / "diff").mkdir(parents=True)
    (tmp_path / "patchkit" / "__init__.py").write_text("")
    (tmp_path / "patchkit" / "diff" / "__init__.py").write_text("")
    (tmp_path / "patchkit" / "diff" / "a.py").write_text(
        "def f():\n    import subprocess\n" + "x = 1\n" * 3001
    )
    (tmp_path / "patchkit" / "diff" / "b.py").write_text("import os\n\nos.system('true')\n")
    (tmp_path / "patchkit" / "proc.py").write_text("import subprocess\n")
    global PACKAGE, MODULES
    saved = PACKAGE, MODULES
    try:
        PACKAGE = tmp_path / "patchkit"
        MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
        found = [hit for module, path in sorted(MODULES.items()) for hit in process_starts(path)]
        assert found == ["patchkit/diff/a.py:2 subprocess", "patchkit/diff/b.py:3 os.system",
                         "patchkit/proc.py:1 subprocess"]  # fmt: skip
        with pytest.raises(AssertionError, match="subprocess"):
            test_only_proc_starts_processes()
        with pytest.raises(AssertionError, match="patchkit.diff"):
            test_no_package_is_too_big()
    finally:
        PACKAGE, MODULES = saved


if __name__ == "__main__":
    print(figures())
