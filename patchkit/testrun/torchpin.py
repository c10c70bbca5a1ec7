"""Which torch (and which test tools) the test environment of a pin gets: what the base's own files
name, never a constant.

torch: the first line naming ``torch`` whose marker holds on this machine, in vLLM's own files in
this order: ``requirements/cpu.txt`` (the CPU build: ``torch==2.6.0+cpu`` in 0.8.3,
``torch==2.14.0+cpu`` in 0.33.0), ``requirements/test/cpu.txt``, ``requirements/test.in``,
``requirements/test/cuda.in``, ``requirements/cuda.txt``, ``requirements/build.txt``, then
``pyproject.toml`` (``[project] dependencies``, ``[build-system] requires``). ``[audit] torch`` in
patchkit.toml overrides it, and the record says so. Before anything is installed, pip's find-links
and indexes (``patchkit.pipconf``, as the install will see them) are asked for a CPU build of that
release for this interpreter; without one the environment is not built, and the reason names the
file, the line, what the indexes offer and what to change — a CUDA torch (several GB with its
``nvidia-*`` dependencies) is never fetched for a CPU test run.

The test tools: pytest, tblib, pytest-timeout, pytest-xdist and coverage (the coverage map of
``--select affected``) at the versions the base's test lock file pins (``requirements/test/cpu.txt``,
``requirements/test.txt``), unpinned where it pins none (coverage: ``OWN_PINS``).
"""

from __future__ import annotations

import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from patchkit import pipconf

SOURCES = (
    "requirements/cpu.txt",
    "requirements/test/cpu.txt",
    "requirements/test.in",
    "requirements/test/cuda.in",
    "requirements/cuda.txt",
    "requirements/build.txt",
)
LOCKS = ("requirements/test/cpu.txt", "requirements/test.txt")
TEST_TOOLS = ("pytest", "tblib", "pytest-timeout", "pytest-xdist", "coverage")
# coverage records the base's coverage map (testrun/covermap); where the base's lock pins none, this one
OWN_PINS = {"coverage": "coverage==7.10.6"}


class TorchUnavailable(Exception):
    """The torch the pin names cannot be installed here (the message says why and what to do)."""


@dataclass(frozen=True)
class Named:
    requirement: str  # as the installer gets it: "torch==2.6.0+cpu"
    source: str  # "requirements/cpu.txt:5", "patchkit.toml [audit] torch"
    named: str  # what the base's file names (same as requirement unless overridden)

    def describe(self) -> str:
        if self.named != self.requirement:
            return f"{self.requirement} ({self.source}; the base names {self.named})"
        return f"{self.requirement} ({self.source})"


def _requirement(line: str) -> Requirement | None:
    text = line.split(" #", 1)[0].split(";#", 1)[0].strip()
    if not text or text.startswith(("#", "-")):
        return None
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _applies(req: Requirement) -> bool:
    try:
        return req.marker is None or req.marker.evaluate({"extra": ""})
    except UndefinedEnvironmentName:
        return False


def _lines(base_root: Path, rel: str) -> list[tuple[int, str]]:
    path = base_root / rel
    if not path.is_file():
        return []
    return list(enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1))


def named_torch(base_root: Path, override: str | None = None) -> Named | None:
    """The torch line the base names for this machine (or the project's override), None if none."""
    found = None
    for rel in SOURCES:
        for number, line in _lines(base_root, rel):
            req = _requirement(line)
            if req is not None and req.name.lower() == "torch" and _applies(req):
                found = Named(_plain(req), f"{rel}:{number}", _plain(req))
                break
        if found:
            break
    if found is None:
        found = _from_pyproject(base_root)
    if override:
        return Named(override, "patchkit.toml [audit] torch", found.named if found else "no torch")
    return found


def _plain(req: Requirement) -> str:
    return f"{req.name}{req.specifier}"


def _from_pyproject(base_root: Path) -> Named | None:
    path = base_root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text("utf-8")) if path.is_file() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    project, build = data.get("project", {}), data.get("build-system", {})
    places = (("[project] dependencies", project.get("dependencies", [])),
              ("[build-system] requires", build.get("requires", [])))  # fmt: skip
    for where, lines in places:
        for line in lines if isinstance(lines, list) else []:
            req = _requirement(str(line))
            if req is not None and req.name.lower() == "torch" and _applies(req) and req.specifier:
                return Named(_plain(req), f"pyproject.toml {where}", _plain(req))
    return None


def test_tools(base_root: Path) -> list[str]:
    """pytest & co. at the versions the base's test lock file pins."""
    pins: dict[str, str] = {}
    for rel in LOCKS:
        for _, line in _lines(base_root, rel):
            req = _requirement(line)
            if req is not None and req.name.lower() in TEST_TOOLS and req.name.lower() not in pins:
                pins[req.name.lower()] = _plain(req)
        if pins:
            break
    return [pins.get(tool, OWN_PINS.get(tool, tool)) for tool in TEST_TOOLS]


# --------------------------------------------------------------------------- what the indexes offer


def _is_cpu_build(filename: str, url: str, version: Version) -> bool:
    """A CPU build: a ``+cpu`` local version, or a local wheel whose METADATA needs no CUDA package."""
    if version.local and version.local.startswith("cpu"):
        return True
    if urlparse(url).scheme != "file":
        return False  # PyPI's Linux torch is the CUDA build; an index's CPU builds say +cpu
    try:
        with zipfile.ZipFile(url2pathname(urlparse(url).path)) as wheel:
            meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            text = wheel.read(meta).decode("utf-8", errors="replace")
    except (OSError, zipfile.BadZipFile, StopIteration):
        return False
    needs = [
        line.split(":", 1)[1].strip().lower()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    return not any(n.startswith(("nvidia-", "cuda-")) for n in needs)


def _constraints(values: dict[str, str]) -> SpecifierSet:
    spec = SpecifierSet()
    for path in pipconf.words(values, "constraint"):
        try:
            lines = Path(path).expanduser().read_text("utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            req = _requirement(line)
            if req is not None and req.name.lower() == "torch":
                spec &= req.specifier
    return spec


def choose(named: Named, offered: list[tuple[str, list[tuple[str, str, str | None]]]],
           values: dict[str, str], rank) -> tuple[str, str]:  # fmt: skip
    """(requirement for the installer, note) for ``named``; TorchUnavailable when no CPU build of
    the release it names is offered here. ``offered``: (where, files) as ``package_index.candidates``
    gives them; ``rank``: ``package_index.wheel_rank``."""
    want = Requirement(named.requirement)
    exact = [s.version for s in want.specifier if s.operator in ("==", "===")]
    cap = _constraints(values)
    builds: list[tuple[Version, bool, str]] = []
    for where, files in offered:
        for filename, url, _ in files:
            try:
                name, version, _, _ = parse_wheel_filename(filename)
            except InvalidWheelFilename:
                continue
            if name != "torch" or rank(filename) is None:
                continue
            builds.append((version, _is_cpu_build(filename, url, version), where))
    public = Version(exact[0]).public if exact else None

    def fits(version: Version) -> bool:
        if not cap.contains(version, prereleases=True):
            return False
        return str(version.public) == public if public else want.specifier.contains(version, prereleases=True)

    cpu = sorted((b for b in builds if b[1] and fits(b[0])), key=lambda b: b[0], reverse=True)
    if cpu:
        version, _, where = cpu[0]
        return f"torch=={version}", f"CPU build {version} from {where}"
    seen = sorted(
        {
            f"{v} ({'CPU' if c else 'not a CPU build'})"
            for v, c, _ in builds
            if public is None or v.public == public
        }
    )
    reason = f"{named.source} names {named.named}"
    if named.named != named.requirement:
        reason = f"{named.source} asks for {named.requirement} (the base names {named.named})"
    if public and cap and not cap.contains(Version(public), prereleases=True):
        reason += f"; pip's constraints allow only torch{cap}"
    offered_here = ", ".join(seen) or "none"
    raise TorchUnavailable(
        f"{reason}; no CPU build of it for this interpreter on pip's find-links or indexes "
        f"({', '.join(w for w, _ in offered) or 'none'}; builds of that release there: {offered_here}); "
        "a CUDA torch (several GB) is not fetched for CPU tests: add an index or find-links that has the "
        "CPU build (e.g. extra-index-url = https://download.pytorch.org/whl/cpu in pip.conf) or set "
        "[audit] torch in patchkit.toml"
    )
