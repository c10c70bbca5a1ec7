"""Build a patched wheel: the series applied to the source wheel's members with the one apply
(``apply.plan.plan_series``: the shared engine, preimages checked, the site-packages rules — a
file outside the installed package is skipped and named), then a new wheel with a new version,
RECORD computed from every member's bytes and the provenance, written whole or not at all.

The members the series names are unpacked into a scratch directory laid out as site-packages
(the wheel's top-level names as the installed ones), so the plan sees exactly what ``apply
--target site-packages`` would see in an environment where this wheel is installed.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from patchkit import DISTRIBUTION, __version__, tmpdir
from patchkit.apply.plan import plan_series, series_identity
from patchkit.apply.sitepackages import Distribution
from patchkit.apply.target import Target
from patchkit.errors import CheckFailed, UserError
from patchkit.series.files import SeriesEntry
from patchkit.series.overlays import Overlay
from patchkit.values import Message, Pin
from patchkit.wheels import naming, provenance, zipio
from patchkit.wheels.layout import Layout, entry_points, has_module, read_layout
from patchkit.wheels.publish import publish
from patchkit.wheels.source import SourceWheel


class ApplyFailed(CheckFailed):
    """The series does not apply to the wheel; ``messages`` are the apply gate's, one a problem."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__(f"{len(messages)} patch(es) do not apply to the wheel; nothing was written")
        self.messages = messages


@dataclass
class Request:
    pin: Pin
    series_dir: str  # as the provenance names it (relative to the project root when inside it)
    entries: list[SeriesEntry]
    overlays: list[Overlay]
    name: str | None = None  # --name: a renamed distribution
    version: str | None = None  # --version; default: the source version + pk.<series hash>
    audit: dict | None = None  # provenance.audit_summary of --audit
    epoch: int | None = None  # SOURCE_DATE_EPOCH
    strict_index: bool = False


@dataclass
class Changes:
    """What the series (and the version module) make of the source wheel's package files."""

    files: dict[str, tuple[bytes | None, int | None]]  # rel -> (new bytes or None: removed, mode)
    rows: dict[str, dict]  # the provenance's ``files``: rel -> base / sha256 / cause
    skipped: dict[str, list[str]]
    partly: list[str]
    notes: list[Message] = field(default_factory=list)


@dataclass
class Built:
    path: Path
    name: str
    version: str
    record: dict  # the provenance
    notes: list[Message] = field(default_factory=list)


@dataclass
class _Output:
    """One member of the new wheel: bytes to write, or a source member copied as stored."""

    name: str
    mode: int
    data: bytes | None = None
    source: zipfile.ZipInfo | None = None


def build(request: Request, source: SourceWheel, out_dir: Path) -> Built:
    identity = series_identity(request.entries, request.overlays)
    digest = provenance.series_hash(identity)
    with zipio.open_wheel(str(source.path)) as archive:
        layout = read_layout(archive, source.filename)
        if problem := layout.name_problem():
            raise CheckFailed(f"{problem[0]}: says {problem[1]}, METADATA says {problem[2]}", source.filename)
        name = naming.checked_name(request.name) if request.name is not None else layout.name
        version = (
            naming.checked_version(request.version)
            if request.version is not None
            else naming.local_version(layout.version, digest)
        )
        changes = expected_changes(archive, layout, request, version)
        _check_entry_points(archive, layout, changes.files)
        record = provenance_record(request, source, layout, name, version, changes)
        dist_info = naming.dist_info_dir(name, version)
        members = _members(archive, layout, changes.files, dist_info, name, version, record)
        date_time = zipio.epoch_date_time(request.epoch) if request.epoch is not None else layout.newest
        filename = naming.wheel_filename(name, version, naming.filename_tags(source.filename))
        with open(source.path, "rb") as raw:
            path = publish(out_dir, filename, _writer(members, raw, date_time, layout, dist_info))
    return Built(path, name, version, record, changes.notes)


def provenance_record(
    request: Request, source: SourceWheel, layout: Layout, name: str, version: str, changes: Changes
) -> dict:
    """The provenance a build writes (``--verify`` makes it again from the source and the series)."""
    identity = series_identity(request.entries, request.overlays)
    record = {
        "schema": provenance.SCHEMA,
        "patchkit": {"version": __version__, "distribution": DISTRIBUTION},
        "pin": provenance.pin_record(request.pin),
        "source_wheel": {"filename": source.filename, "sha256": source.sha256},
        "distribution": {
            "name": name,
            "version": version,
            "source": {"name": layout.name, "version": layout.version},
        },
        "series": {
            "dir": request.series_dir,
            "hash": provenance.series_hash(identity),
            "patches": provenance.patch_rows(identity, changes.skipped, changes.partly),
        },
        "files": dict(sorted(changes.rows.items())),
        "source_date_epoch": request.epoch,
    }
    if request.audit is not None:
        record["audit"] = request.audit
    return record


def metadata(archive: zipfile.ZipFile, layout: Layout, name: str, version: str) -> bytes:
    """The new wheel's METADATA: the source's, its ``Name:`` and ``Version:`` lines replaced."""
    rel = f"{layout.dist_info}/METADATA"
    source_metadata = zipio.read_small(archive, layout.files[rel], layout.filename)
    layout.check_source_row(rel, source_metadata)
    text = naming.rewrite_metadata(source_metadata.decode("utf-8"), name, version, f"{layout.filename}:{rel}")
    return text.encode("utf-8")


def _check_entry_points(archive: zipfile.ZipFile, layout: Layout, changes: dict) -> None:
    """CheckFailed when the series removes a module an entry point names (``--verify`` would refuse
    the wheel, and the console script would fail)."""
    rel = f"{layout.dist_info}/entry_points.txt"
    if rel not in layout.files:
        return
    try:
        points = entry_points(zipio.read_small(archive, layout.files[rel], layout.filename))
    except ValueError as exc:
        raise UserError(f"{rel} cannot be read as entry points: {exc}", layout.filename) from None
    files = {r for r in layout.files if changes.get(r, (b"", None))[0] is not None}
    files |= {r for r, (data, _) in changes.items() if data is not None}
    for name, value, module in points:
        if not has_module(files, module):
            raise CheckFailed(
                f"entry point {name} = {value}: the series removes module {module}; nothing was written",
                layout.filename,
            )


def expected_changes(archive: zipfile.ZipFile, layout: Layout, request: Request, version: str) -> Changes:
    """The series planned on the source wheel's members (ApplyFailed when it does not apply), and
    the version module made to say ``version``."""
    plan, originals = _plan(archive, layout, request)
    if plan.problems:
        raise ApplyFailed([Message("gate.apply.series-failed", {"error": p}) for p in plan.problems])
    files = {rel: (new, mode) for rel, (_, new, _, mode) in plan.changes.items()}
    rows = {rel: _file_row(originals.get(rel), new, "series") for rel, (new, _) in files.items()}
    notes = [
        Message("wheel.skipped", {"patch": p, "paths": rels}) for p, rels in plan.skipped_by_patch.items()
    ]
    notes += [Message("wheel.warning", {"note": w}) for w in dict.fromkeys(plan.warnings)]
    notes.append(_version_module(archive, layout, files, rows, originals, version))
    return Changes(files, rows, plan.skipped_by_patch, plan.partly_applied, notes)


def _plan(archive: zipfile.ZipFile, layout: Layout, request: Request):  # noqa: ANN202
    """The series planned on the members it names, unpacked as site-packages; and their bytes."""
    wanted = {
        p
        for e in request.entries
        for patch in e.patches
        for fp in patch.files
        for p in (fp.old_path, fp.new_path)
        if p
    }
    wanted |= {o.target for o in [*request.overlays, *(e.overlay for e in request.entries if e.overlay)]}
    originals: dict[str, bytes] = {}
    with tmpdir.scratch_dir("patchkit-wheel-") as scratch:
        root = Path(scratch).resolve()
        for rel in sorted(wanted & layout.files.keys()):
            info = layout.files[rel]
            data = originals[rel] = archive.read(info)
            layout.check_source_row(rel, data)
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            (root / rel).chmod(zipio.member_mode(info))
        dist = Distribution(layout.name, layout.version, root, root / layout.dist_info, layout.top_level)
        target = Target("site-packages", root, root / ".patchkit", dist)
        return plan_series(target, request.entries, request.overlays, request.strict_index), originals


def _file_row(base: bytes | None, new: bytes | None, cause: str) -> dict:
    sha = lambda data: hashlib.sha256(data).hexdigest() if data is not None else None  # noqa: E731
    return {"base": sha(base), "sha256": sha(new), "cause": cause}


def _version_module(
    archive: zipfile.ZipFile,
    layout: Layout,
    files: dict,
    rows: dict,
    originals: dict[str, bytes],
    version: str,
) -> Message:
    """Make ``<package>/_version.py`` (what ``vllm.__version__`` reads) say the new version."""
    candidates = [f"{top}/_version.py" for top in layout.top_level]
    rel = next((c for c in candidates if c in layout.files or c in files), candidates[0])
    if rel not in layout.files and rel not in files:
        return Message("wheel.version-module-none", {"path": rel, "version": layout.version})
    if rel not in originals and rel in layout.files:
        originals[rel] = archive.read(layout.files[rel])
        layout.check_source_row(rel, originals[rel])
    base = originals.get(rel)
    current, mode = files.get(
        rel, (base, zipio.member_mode(layout.files[rel]) if rel in layout.files else None)
    )
    text = None if current is None else current.decode("utf-8", errors="surrogateescape")
    new = None if text is None else naming.rewrite_version_module(text, layout.version, version)
    if new is None:
        return Message("wheel.version-module-kept", {"path": rel, "version": layout.version})
    files[rel] = (new.encode("utf-8", errors="surrogateescape"), mode)
    rows[rel] = _file_row(base, files[rel][0], "series" if rel in rows else "version")
    return Message("wheel.version-module", {"path": rel, "version": version})


def _members(
    archive: zipfile.ZipFile,
    layout: Layout,
    changes: dict,
    dist_info: str,
    name: str,
    version: str,
    record: dict,
) -> list[_Output]:
    """Every member of the new wheel, in the order written: the package, then the ``.dist-info``
    (RECORD last); renamed ``.dist-info`` / ``.data`` directories; the source's signatures dropped."""
    rename = layout.renamer(dist_info, f"{dist_info[: -len('.dist-info')]}.data")
    out: dict[str, _Output] = {}
    for rel, info in layout.files.items():
        if rel not in changes and rel not in layout.dropped:
            out[rename(rel)] = _Output(rename(rel), zipio.member_mode(info), source=info)
    for rel, (data, mode) in changes.items():
        if data is not None:
            out[rename(rel)] = _Output(rename(rel), mode or 0o644, data=data)
    for rel, data in (
        (f"{dist_info}/METADATA", metadata(archive, layout, name, version)),
        (f"{dist_info}/{provenance.FILENAME}", provenance.render(record)),
    ):
        out[rel] = _Output(rel, 0o644, data=data)
    return sorted(out.values(), key=lambda m: (m.name.startswith(f"{dist_info}/"), m.name))


def _writer(
    members: list[_Output], raw: BinaryIO, date_time: tuple[int, ...], layout: Layout, dist_info: str
) -> Callable[[BinaryIO], None]:
    def write(out: BinaryIO) -> None:
        writer = zipio.ZipWriter(out, date_time)
        rows = []
        for member in members:
            if member.source is not None:
                hashed = writer.add_raw(member.name, member.mode, raw, member.source)
                layout.check_source_digest(member.source.filename, hashed.digest)
            else:
                assert member.data is not None
                hashed = writer.add_bytes(member.name, member.data, member.mode)
            rows.append((member.name, naming.record_hash(hashed.digest), str(hashed.size)))
        rows.append((f"{dist_info}/RECORD", "", ""))
        writer.add_bytes(f"{dist_info}/RECORD", naming.render_record(rows), 0o644)
        writer.close()

    return write


def source_date_epoch(environ: dict[str, str] | None = None) -> int | None:
    """SOURCE_DATE_EPOCH as an integer, None when unset; UserError when it is not an integer."""
    text = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    if text is None or not text.strip():
        return None
    try:
        epoch = int(text.strip())
    except ValueError:
        raise UserError(f"SOURCE_DATE_EPOCH={text!r} is not an integer number of seconds") from None
    if epoch > zipio.DOS_LAST:
        raise UserError(f"SOURCE_DATE_EPOCH={text!r} is after 2107-12-31, the latest time a zip can hold")
    return epoch
