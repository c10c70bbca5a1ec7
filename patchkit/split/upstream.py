"""Domains for what the rules leave unclaimed, from the base's own metadata and layout.

Order (each step only sees what the earlier ones left): the rules (project, then the shipped
defaults), then an out-of-tree vendor package (below), then the base's mergify labels (most
specific pattern first), then the vLLM directory
a file sits in (``vllm/v1/attention/x.py``, ``tests/v1/attention/test_x.py`` and
``csrc/attention/x.cu`` all mirror ``attention``), then the fallback. Two kinds of label pattern
are too broad to make a domain and come after the directory: one that names only a grouping
directory (``^vllm/v1/``, ``^vllm/model_executor/``) and one not anchored at the root (``cuda``
anywhere in the path); they still label the patch in the report.

An out-of-tree vendor package — a new top-level package beside ``vllm/`` (``vllm_kunlun/``), a
platform package ``vllm/platforms/<vendor>/`` or a ``vllm/<vendor>_*`` module of a known vendor — is
a platform domain named after it (``vllm-kunlun``), sub-split along its own subpackages mapped to
vLLM's areas by the same labels and layout as ``vllm/`` itself (``vllm_kunlun/v1/attention/x.py``
is read as ``vllm/v1/attention/x.py``: ``vllm-kunlun.attention``); what maps to no area stays in the
platform domain, not the fallback.

A test file no rule names joins the domain of the code it tests: the changed source file its
path mirrors (same vLLM directory, ``test_<stem>.py`` ↔ ``<stem>.py``), else the changed
first-party modules it imports (most of them; a tie goes to the test's own directory), else the
directory it mirrors.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import PurePosixPath

from patchkit.split.model import Domain, DomainRule
from patchkit.split.rules import Classifier
from patchkit.upstream.mergify import LabelRule, labels_of

_TITLES = {"mergify": ("vLLM label: ", "vLLM 标签："), "layout": ("vLLM directory: ", "vLLM 目录："),
           "vendor": ("vendor package: ", "厂商包：")}  # fmt: skip
# vLLM's own top-level directories: anything else that holds Python code is somebody's package
UPSTREAM_TOPS = {
    "vllm",
    "tests",
    "csrc",
    "docs",
    "examples",
    "benchmarks",
    "tools",
    "requirements",
    "cmake",
    "docker",
    "scripts",
    "recipes",
    "rust",
    "build",
    "dist",
    ".github",
    ".buildkite",
}
# out-of-tree platforms that ship as vllm/<vendor>_* beside vLLM's own modules (vLLM's in-tree
# platforms -- cuda, rocm, cpu, tpu, xpu -- are not among them)
VENDORS = (
    "ascend",
    "npu",
    "hpu",
    "gaudi",
    "habana",
    "mlu",
    "cambricon",
    "musa",
    "mthreads",
    "kunlun",
    "metax",
    "maca",
    "gcu",
    "enflame",
    "dcu",
    "hygon",
    "iluvatar",
    "corex",
    "biren",
    "sophgo",
    "spyre",
    "rbln",
)
_VENDOR_MODULE = re.compile(rf"vllm/((?:{'|'.join(VENDORS)})_\w+?)(?:\.py)?(?:/|$)")
_TOPS = ("vllm", "tests", "csrc")
_CONTAINERS = {"v1", "model_executor", "layers", "kernels"}  # directories that only group others
_GROUPING = {f"{top}/{c}" for top in _TOPS for c in ("", "v1/", "model_executor/", "model_executor/layers/")}
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(vllm(?:\.\w+)*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#]*))"
    r"|import[ \t]+(vllm(?:\.\w+)*))",
    re.M,
)


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", label.lower()).strip("-.") or "label"


def is_test_path(path: str) -> bool:
    name = PurePosixPath(path).name
    return path.startswith("tests/") and name.endswith(".py") and name.startswith("test_")


def layout_dir(path: str) -> str | None:
    """The vLLM directory ``path`` belongs to, shared by code, its tests and its kernels."""
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or parts[0] not in _TOPS:
        return None
    below = list(parts[1:-1])
    while below and below[0] in _CONTAINERS and len(below) > 1:
        below.pop(0)
    if not below or below[0] in _CONTAINERS:
        return "kernels" if parts[0] == "csrc" or below[:1] == ["kernels"] else None
    return below[0]


def mirrored_source(test: str) -> str | None:
    """tests/v1/core/test_block_pool.py → vllm/v1/core/block_pool.py."""
    p = PurePosixPath(test)
    if not is_test_path(test):
        return None
    return str(PurePosixPath("vllm", *p.parts[1:-1], p.name[len("test_") :]))


def imported_modules(text: str) -> list[str]:
    """Candidate repo paths of the first-party modules a file imports (module and module/name)."""
    found: list[str] = []
    for match in _IMPORT.finditer(text):
        module = match.group(1) or match.group(4)
        base = module.replace(".", "/")
        found += [f"{base}.py", f"{base}/__init__.py"]
        names = (match.group(2) or match.group(3) or "").split(",")
        for name in (n.split()[0] for n in names if n.split()):
            found.append(f"{base}/{name}.py")
    return found


def vendor_root(path: str, python_tops: set[str] = frozenset()) -> str | None:
    """The vendor package ``path`` lies in (``vllm_kunlun``, ``vllm/platforms/ascend``,
    ``vllm/mlu_ops``), or None. ``python_tops``: the top-level directories the replay has Python in."""
    parts = PurePosixPath(path).parts
    if (
        len(parts) >= 2
        and parts[0] in python_tops
        and parts[0] not in UPSTREAM_TOPS
        and parts[0].isidentifier()
    ):
        return parts[0]
    if len(parts) >= 4 and parts[:2] == ("vllm", "platforms") and parts[2].isidentifier():
        return "/".join(parts[:3])
    if match := _VENDOR_MODULE.match(path):
        return f"vllm/{match.group(1)}"
    return None


def vendor_area(path: str, root: str, labels: list[LabelRule]) -> tuple[str | None, str]:
    """The vLLM area a file of a vendor package maps to (its path below the package read as one
    below ``vllm/``): the most specific label, else the vLLM directory; None when it maps to none."""
    rest = path[len(root) :].lstrip("/")
    if not rest or "/" not in rest:
        return None, ""  # the package's own top-level modules: the platform itself
    mapped = f"vllm/{rest}"
    earned = labels_of(mapped, labels)
    specific = [(label, p) for label, p in earned if p.literal and p.literal not in _GROUPING]
    if specific:
        label, pattern = specific[0]
        return slug(label), f"vLLM label {label} ({pattern.text}) of {mapped}"
    if directory := layout_dir(mapped):
        return slug(directory), f"vLLM directory {directory}/ of {mapped}"
    return None, ""


def vendor_imports(text: str, roots: set[str]) -> list[tuple[str, bool]]:
    """Candidate paths of the modules of the vendor packages ``roots`` that ``text`` imports, each
    with whether the import is at module level (it runs when the module is imported)."""
    dotted = [r.replace("/", ".") for r in roots if r]
    if not dotted:
        return []
    pattern = "|".join(re.escape(r) for r in dotted)
    found: list[tuple[str, bool]] = []
    imports = re.compile(rf"^([ \t]*)(?:from[ \t]+((?:{pattern})(?:\.\w+)*)[ \t]+import[ \t]+\(?([\w, \t]*)"
                         rf"|import[ \t]+((?:{pattern})(?:\.\w+)*))", re.M)  # fmt: skip
    for match in imports.finditer(text):
        at_top = not match.group(1)
        module = (match.group(2) or match.group(4)).replace(".", "/")
        names = [name.strip() for name in (match.group(3) or "").split(",") if name.strip()]
        paths = [f"{module}.py", f"{module}/__init__.py"]
        paths += [f"{module}/{name}{tail}" for name in names for tail in (".py", "/__init__.py")]
        found += [(path, at_top) for path in paths]
    return found


def python_tops(files: dict[str, bytes | None]) -> set[str]:
    return {PurePosixPath(p).parts[0] for p in files if p.endswith((".py", ".pyi")) and "/" in p}


class _Builder:
    def __init__(self, domains: list[Domain], labels: list[LabelRule],
                 files: dict[str, bytes | None] | None = None) -> None:  # fmt: skip
        self.files = files or {}
        self.tops = python_tops(self.files)
        self.vendor_files: dict[str, list[str]] = {}  # vendor domain -> its files
        self.domains = [replace(d, rules=list(d.rules)) for d in domains]
        self.by_name = {d.name: d for d in self.domains}
        self.explicit = Classifier([d for d in domains if not d.fallback])
        self.labels = labels
        self.added: list[Domain] = []

    def rule_domain(self, path: str) -> str | None:
        verdict = self.explicit.path_domain(path)
        return verdict.domain if verdict else None

    def upstream_domain(self, path: str) -> tuple[str, str, str] | None:
        """(domain, origin, why): a vendor package's, else from a specific label, else the layout,
        else a broad label."""
        if (root := vendor_root(path, self.tops)) is not None:
            platform = slug(PurePosixPath(root).name.replace("_", "-"))
            area, why = vendor_area(path, root, self.labels)
            if area is None:
                return platform, "vendor", f"vendor package {root}/"
            return f"{platform}.{area}", "vendor", f"vendor package {root}/ -> {why}"
        earned = labels_of(path, self.labels)
        specific = [(label, p) for label, p in earned if p.literal and p.literal not in _GROUPING]
        if specific:
            label, pattern = specific[0]
            return slug(label), "mergify", f"vLLM label {label} ({pattern.text})"
        if directory := layout_dir(path):
            return slug(directory), "layout", f"vLLM directory {directory}/"
        if earned:
            label, pattern = earned[0]
            return slug(label), "mergify", f"vLLM label {label} ({pattern.text})"
        return None

    def domain_of_source(self, path: str) -> str | None:
        found = self.rule_domain(path) or self.upstream_domain(path)
        return found if isinstance(found, str) or found is None else found[0]

    def claim(self, path: str, name: str, origin: str, why: str) -> None:
        domain = self.by_name.get(name)
        if domain is None:
            en, zh = _TITLES.get(origin, ("", ""))
            label = why.split(" (", 1)[0].split(" ", 2)[-1]
            if origin == "vendor":
                root = why.split(" ", 3)[2].rstrip("/")
                label = root + (f" · {name.split('.', 1)[1]}" if "." in name else "")
            domain = Domain(name, {"en": en + label, "zh": zh + label}, [], origin=origin)
            self.by_name[name] = domain
            self.added.append(domain)
        domain.rules.append(DomainRule(paths=[_escape(path)], why=why))
        if origin == "vendor":
            self.vendor_files.setdefault(name, []).append(path)

    def result(self) -> list[Domain]:
        ordered = [d for d in self.domains if not d.fallback]
        ordered += sorted(self.added, key=lambda d: {"mergify": 0, "layout": 1}.get(d.origin, 2))
        ordered = [d for d in ordered if d.origin != "vendor"] + self._vendor_order()
        return ordered + [d for d in self.domains if d.fallback]

    def _vendor_order(self) -> list[Domain]:
        """A vendor package's domains, each after the ones whose modules it imports: the series'
        prefixes import what they need. A cycle is cut at the domain with the fewest unmet needs
        (imports at module level first: those run on import), then in first-seen order."""
        vendor = [d for d in self.added if d.origin == "vendor"]
        owner = {path: name for name, paths in self.vendor_files.items() for path in paths}
        roots = {vendor_root(p, self.tops) or "" for paths in self.vendor_files.values() for p in paths}
        needs: dict[str, set[str]] = {d.name: set() for d in vendor}
        top_needs: dict[str, set[str]] = {d.name: set() for d in vendor}
        for name, paths in self.vendor_files.items():
            for path in paths:
                text = (self.files.get(path) or b"").decode("utf-8", errors="replace")
                for module, at_top in vendor_imports(text, roots):
                    if (other := owner.get(module)) is not None and other != name:
                        needs[name].add(other)
                        if at_top:
                            top_needs[name].add(other)
        done: list[Domain] = []
        waiting = list(vendor)
        while waiting:
            placed = {d.name for d in done}
            ready = min(waiting, key=lambda d: (len(top_needs[d.name] - placed), len(needs[d.name] - placed),
                                                waiting.index(d)))  # fmt: skip
            done.append(ready)
            waiting.remove(ready)
        return done


def _escape(path: str) -> str:
    return re.sub(r"([*?])", r"[\1]", path) if re.search(r"[*?]", path) else path


def extend_domains(domains: list[Domain], labels: list[LabelRule],
                   files: dict[str, bytes | None]) -> list[Domain]:  # fmt: skip
    """``domains`` plus a rule for every changed file the rules leave unclaimed (see the module
    docstring); ``files`` maps each changed path to its content after the replay (None: deleted)."""
    builder = _Builder(domains, labels, files)
    tests = [p for p in files if is_test_path(p) and builder.rule_domain(p) is None]
    sources = [p for p in files if p not in tests]
    for path in sources:
        if builder.rule_domain(path) is None and (found := builder.upstream_domain(path)):
            builder.claim(path, *found)
    for path in tests:
        home = _test_home(path, files, builder)
        if home is None:
            if found := builder.upstream_domain(path):
                builder.claim(path, *found)
            continue
        name, why = home
        origin = builder.by_name[name].origin if name in builder.by_name else "layout"
        builder.claim(path, name, origin, why)
    return builder.result()


def _test_home(test: str, files: dict[str, bytes | None], builder: _Builder) -> tuple[str, str] | None:
    mirrored = mirrored_source(test)
    stem = PurePosixPath(test).name[len("test_") :]
    twins = [p for p in files if PurePosixPath(p).name == stem and p.startswith(("vllm/", "csrc/"))]
    twins = sorted(twins, key=lambda p: (p != mirrored, layout_dir(p) != layout_dir(test), p))
    if twins and (layout_dir(twins[0]) == layout_dir(test) or twins[0] == mirrored):
        if name := builder.domain_of_source(twins[0]):
            return name, f"tests {twins[0]} (mirrored path)"
    text = (files.get(test) or b"").decode("utf-8", errors="replace")
    changed = [m for m in dict.fromkeys(imported_modules(text)) if m in files and not is_test_path(m)]
    votes = Counter(n for m in changed if (n := builder.domain_of_source(m)))
    if votes:
        own = builder.domain_of_source(mirrored) if mirrored else None
        best = max(votes.values())
        tied = [n for n, count in votes.items() if count == best]
        name = own if own in tied else tied[0]
        module = next(m for m in changed if builder.domain_of_source(m) == name)
        return name, f"tests {module} (imports it)"
    directory = str(PurePosixPath(mirrored).parent) + "/" if mirrored else None
    if directory and (name := builder.domain_of_source(directory + "__init__.py")):
        return name, f"tests {directory} (mirrored directory)"
    return None
