"""The installed ``vllm`` distribution: locate it, keep its RECORD true, byte-compile changed modules."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import CheckFailed, UserError
from patchkit.proc import TimeoutExpired, run_process

DIST_NAME = "vllm"
QUERY_TIMEOUT = 60.0  # seconds for the target interpreter to list its distributions
COMPILE_TIMEOUT = 300.0  # seconds to byte-compile the changed modules

# What importlib.metadata knows about the distribution: run by the target interpreter (a child
# process), or here when the target is this interpreter (--site-packages without --python).
_DESCRIBE = r"""
import importlib.metadata as md, json, sys
def describe(name, paths):
    found = []
    for dist in md.distributions(**({"path": paths} if paths else {})):
        top = (dist.read_text("top_level.txt") or "").split()
        dname = dist.metadata["Name"] or ""
        if dname.lower().replace("_", "-") == name or name in top:
            found.append({"name": dname, "version": dist.version,
                          "location": str(dist.locate_file("")),
                          "dist_info": str(getattr(dist, "_path", "")), "top_level": top})
    return found
def info(name, paths):
    return {"dists": describe(name, paths), "cache_tag": sys.implementation.cache_tag,
            "version": list(sys.version_info[:2]), "executable": sys.executable}
"""
_LOCATE = _DESCRIBE + "print(json.dumps(info(sys.argv[1], sys.argv[2:])))\n"


@dataclass
class Distribution:
    name: str
    version: str
    location: Path  # the site-packages dir (contains ``vllm/``)
    dist_info: Path
    top_level: list[str] = field(default_factory=list)
    python: str | None = None  # interpreter that owns it (None: unknown)
    cache_tag: str | None = None  # e.g. cpython-311, for __pycache__ names

    @property
    def record(self) -> Path:
        return self.dist_info / "RECORD"


def _query(python: str, args: list[str]) -> dict:
    if python == sys.executable:  # this interpreter: the same code, without starting another one
        namespace: dict = {}
        exec(compile(_DESCRIBE, "<patchkit locate>", "exec"), namespace)  # noqa: S102 - our own code
        return json.loads(json.dumps(namespace["info"](DIST_NAME, args)))
    try:
        proc = run_process([python, "-c", _LOCATE, DIST_NAME, *args], timeout=QUERY_TIMEOUT)
    except OSError as exc:
        raise UserError(f"cannot run the interpreter {python}: {exc.strerror}") from None
    except TimeoutExpired:
        raise CheckFailed(f"{python} did not list its distributions within {QUERY_TIMEOUT:g} s") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise UserError(f"{python} could not list its distributions: {' '.join(tail)}")
    return json.loads(proc.stdout)


def locate(python: str | None = None, site_packages: Path | None = None) -> Distribution:
    """The ``vllm`` distribution of ``python`` (default: this interpreter) or found in ``site_packages``."""
    if site_packages is not None:
        if not site_packages.is_dir():
            raise UserError(f"{site_packages}: no such directory")
        info = _query(python or sys.executable, [str(site_packages.resolve())])
        where = str(site_packages)
    else:
        info = _query(python or sys.executable, [])
        where = f"the environment of {python or sys.executable}"
    dists = info["dists"]
    if not dists:
        raise UserError(f"no installed '{DIST_NAME}' distribution found in {where}")
    if len(dists) > 1:
        names = ", ".join(f"{d['name']} {d['version']} ({d['dist_info']})" for d in dists)
        raise UserError(f"several '{DIST_NAME}' distributions in {where}: {names}")
    found = dists[0]
    owner = python or (sys.executable if site_packages is None else _owner_guess(site_packages))
    same = owner == sys.executable or site_packages is None
    return Distribution(
        name=found["name"],
        version=found["version"],
        location=Path(found["location"]).resolve(),
        dist_info=Path(found["dist_info"]).resolve(),
        top_level=found["top_level"] or [DIST_NAME],
        python=owner,
        cache_tag=info["cache_tag"] if same or python else None,
    )


def _owner_guess(site_packages: Path) -> str | None:
    """This interpreter when the dir names its version (lib/pythonX.Y/...) or names none."""
    tag = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    names = [p for p in site_packages.resolve().parts if p.startswith("python3")]
    return sys.executable if not names or tag in names else None


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pyc_rel(rel: str, cache_tag: str) -> str:
    parent, _, name = rel.rpartition("/")
    stem = name[: -len(".py")]
    return f"{parent}/__pycache__/{stem}.{cache_tag}.pyc" if parent else f"__pycache__/{stem}.{cache_tag}.pyc"


def _is_pyc_of(row_path: str, rel: str) -> bool:
    parent, _, name = rel.rpartition("/")
    prefix = f"{parent}/__pycache__/{name[:-3]}." if parent else f"__pycache__/{name[:-3]}."
    return row_path.startswith(prefix) and row_path.endswith(".pyc")


def updated_record(record: bytes, record_prefix: str, changes: dict[str, bytes | None],
                   cache_tag: str | None) -> bytes:  # fmt: skip
    """RECORD with rows of changed files rehashed, new files added, removed files and stale
    ``__pycache__`` rows of changed modules dropped. ``record_prefix`` maps a target path to its
    RECORD path (RECORD paths are relative to site-packages, as target paths are)."""
    rows = list(csv.reader(io.StringIO(record.decode("utf-8"))))
    by_path = {f"{record_prefix}{p}": data for p, data in changes.items()}
    modules = [p for p in by_path if p.endswith(".py")]
    out, seen = [], set()
    for row in rows:
        if not row:
            continue
        path = row[0]
        if any(_is_pyc_of(path, m) for m in modules):
            continue
        if path in by_path:
            seen.add(path)
            data = by_path[path]
            if data is not None:
                out.append([path, record_hash(data), str(len(data))])
            continue
        out.append(row)
    for path, data in by_path.items():
        if path not in seen and data is not None:
            out.append([path, record_hash(data), str(len(data))])
    if cache_tag:
        out += [[pyc_rel(m, cache_tag), "", ""] for m in modules if by_path[m] is not None]
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(out)
    return buffer.getvalue().encode("utf-8")


def record_problems(dist_info: Path, root: Path, only: set[str] | None = None) -> list[str]:
    """RECORD rows whose hash or size does not match the file (rows without a hash are skipped);
    ``only``: just the rows of these paths (what a series touched — hashing all of vllm takes seconds)."""
    problems = []
    try:
        rows = list(csv.reader(io.StringIO((dist_info / "RECORD").read_text("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        return [f"{dist_info / 'RECORD'} cannot be read as a RECORD: {exc}"]
    for row in rows:
        if len(row) < 3 or not row[1] or (only is not None and row[0] not in only):
            continue
        path = root / row[0]
        if not path.is_file():
            problems.append(f"{row[0]}: listed in RECORD but missing")
            continue
        data = path.read_bytes()
        if record_hash(data) != row[1] or str(len(data)) != row[2]:
            problems.append(f"{row[0]}: RECORD says {row[1]}, file has {record_hash(data)}")
    return problems


def drop_stale_pyc(root: Path, rel: str) -> None:
    pycache = (root / rel).parent / "__pycache__"
    if pycache.is_dir():
        for stale in pycache.glob(f"{Path(rel).stem}.*.pyc"):
            stale.unlink(missing_ok=True)


def byte_compile(root: Path, modules: list[str], python: str | None) -> str | None:
    """Compile ``modules`` into ``__pycache__`` for the target interpreter; a note when it cannot."""
    files = [str(root / m) for m in modules if (root / m).is_file()]
    if not files:
        return None
    if python is None:
        return "byte-compile skipped: the target interpreter is unknown (pass --python)"
    if python == sys.executable:
        import py_compile

        failed = []
        for path in files:
            try:
                py_compile.compile(path, doraise=True)
            except py_compile.PyCompileError as exc:
                failed.append(f"{path}: {exc.msg.strip().splitlines()[-1]}")
        return f"byte-compile failed for {len(failed)} module(s): {failed[0]}" if failed else None
    try:
        proc = run_process([python, "-m", "py_compile", *files], timeout=COMPILE_TIMEOUT)
    except TimeoutExpired:
        return f"byte-compile with {python} timed out after {COMPILE_TIMEOUT:g} s (the modules are applied)"
    except OSError as exc:
        return f"byte-compile with {python} could not run: {exc.strerror}"
    if proc.returncode != 0:
        return f"byte-compile with {python} failed: {proc.stderr.decode(errors='replace').strip()[:200]}"
    return None
