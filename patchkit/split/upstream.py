"""Domains for what the rules leave unclaimed, from the base's own metadata and layout.

Order (each step only sees what the earlier ones left): the rules (project, then the shipped
defaults), then the base's mergify labels (most specific pattern first), then the vLLM directory
a file sits in (``vllm/v1/attention/x.py``, ``tests/v1/attention/test_x.py`` and
``csrc/attention/x.cu`` all mirror ``attention``), then the fallback. Two kinds of label pattern
are too broad to make a domain and come after the directory: one that names only a grouping
directory (``^vllm/v1/``, ``^vllm/model_executor/``) and one not anchored at the root (``cuda``
anywhere in the path); they still label the patch in the report.

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

_TITLES = {"mergify": ("vLLM label: ", "vLLM 标签："), "layout": ("vLLM directory: ", "vLLM 目录：")}
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


class _Builder:
    def __init__(self, domains: list[Domain], labels: list[LabelRule]) -> None:
        self.domains = [replace(d, rules=list(d.rules)) for d in domains]
        self.by_name = {d.name: d for d in self.domains}
        self.explicit = Classifier([d for d in domains if not d.fallback])
        self.labels = labels
        self.added: list[Domain] = []

    def rule_domain(self, path: str) -> str | None:
        verdict = self.explicit.path_domain(path)
        return verdict.domain if verdict else None

    def upstream_domain(self, path: str) -> tuple[str, str, str] | None:
        """(domain, origin, why) from a specific label, else the layout, else a broad label."""
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
            domain = Domain(name, {"en": en + label, "zh": zh + label}, [], origin=origin)
            self.by_name[name] = domain
            self.added.append(domain)
        domain.rules.append(DomainRule(paths=[_escape(path)], why=why))

    def result(self) -> list[Domain]:
        ordered = [d for d in self.domains if not d.fallback]
        ordered += sorted(self.added, key=lambda d: d.origin != "mergify")
        return ordered + [d for d in self.domains if d.fallback]


def _escape(path: str) -> str:
    return re.sub(r"([*?])", r"[\1]", path) if re.search(r"[*?]", path) else path


def extend_domains(domains: list[Domain], labels: list[LabelRule],
                   files: dict[str, bytes | None]) -> list[Domain]:  # fmt: skip
    """``domains`` plus a rule for every changed file the rules leave unclaimed (see the module
    docstring); ``files`` maps each changed path to its content after the replay (None: deleted)."""
    builder = _Builder(domains, labels)
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
