"""``patchkit wheel --verify``: a wheel checked against its RECORD, its names, its provenance, the
series the provenance names and the source wheel it names; the first mismatch is the answer.

Checks, in order (each stops at its first mismatch):
1. RECORD against the members: every member listed once with its sha256 and size (hashed through
   ``zipfile``, which also checks each member's CRC), every row a member.
2. Names: METADATA's Name and Version spelled the same by the file name, the ``.dist-info``
   directory and the provenance; every entry point's module is in the wheel.
3. The provenance's files: each has the sha256 it records (or is absent when it records none).
4. The series: its patches' names and sha256, in order, and the hash, are the provenance's.
5. The source wheel (the sha256 the provenance names, from the cache or the index): the series
   planned on it again gives exactly the files the provenance lists, and every other member is
   the source's member (its hash in this RECORD equals the source RECORD's, which the build
   checked against the source's bytes).
"""

from __future__ import annotations

import hashlib
import json
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from patchkit import versions
from patchkit.apply.plan import series_identity
from patchkit.values import Message, Pin
from patchkit.wheels import naming, provenance, zipio
from patchkit.wheels.build import Request, expected_changes, metadata, provenance_record
from patchkit.wheels.layout import Layout, entry_points, has_module, read_layout
from patchkit.wheels.source import SourceWheel

SeriesLoader = Callable[[str], tuple[str, list, list]]  # provenance's dir -> (shown as, entries, overlays)
AuditCheck = Callable[[list, Pin], dict]  # (entries, pin) -> the audit block a build with --audit writes
_ABSENT = object()


@dataclass
class Verified:
    record: dict | None
    members: int
    mismatch: Message | None  # the first; None when every check passed
    series: str = ""
    audit_checked: bool = False  # the provenance's audit block compared with the --audit JSON


def verify(
    path: Path,
    load_series: SeriesLoader,
    fetch: Callable[[Pin, str], SourceWheel],
    audit: AuditCheck | None = None,
) -> Verified:
    """``audit``: the audit JSON's summary for the series and pin (``--audit``); without it, the
    provenance's audit block is the one thing taken on the builder's word."""
    with zipio.open_wheel(str(path)) as archive:
        try:
            layout = read_layout(archive, path.name)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # METADATA or RECORD unreadable
            return Verified(
                None, 0, Message("wheel.mismatch.member-corrupt", {"member": ".dist-info", "error": str(exc)})
            )
        found = _Checks(archive, layout, path, load_series, fetch)
        found.audit = audit
        for mismatch in found.run():
            return Verified(found.record, len(layout.files) + 1, mismatch, found.series)
        return Verified(found.record, len(layout.files) + 1, None, found.series, audit is not None)


class _Checks:
    def __init__(
        self,
        archive: zipfile.ZipFile,
        layout: Layout,
        path: Path,
        load_series: SeriesLoader,
        fetch: Callable[[Pin, str], SourceWheel],
    ) -> None:
        self.archive, self.layout, self.path = archive, layout, path
        self.load_series, self.fetch = load_series, fetch
        self.record: dict | None = None
        self.series = ""
        self.hashes: dict[str, str] = {}
        self.audit: AuditCheck | None = None

    def run(self) -> Iterator[Message]:
        yield from self._record()
        yield from self._names()
        prov_rel = f"{self.layout.dist_info}/{provenance.FILENAME}"
        if prov_rel not in self.layout.files:
            yield Message("wheel.mismatch.no-provenance", {"path": prov_rel})
            return
        data = zipio.read_small(self.archive, self.layout.files[prov_rel], str(self.path))
        self.record = provenance.parse(data, f"{self.path}:{prov_rel}")
        yield from self._provenance_files()
        yield from self._series()
        yield from self._source()
        yield from self._made()
        yield from self._form()

    def _record(self) -> Iterator[Message]:
        rows = self.layout.record
        for rel, info in self.layout.files.items():
            digest, size = hashlib.sha256(), 0
            try:
                with self.archive.open(info) as member:
                    while chunk := member.read(zipio.CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                yield Message("wheel.mismatch.member-corrupt", {"member": rel, "error": str(exc)})
                continue
            self.hashes[rel] = actual = naming.record_hash(digest.digest())
            if rel not in rows:
                yield Message("wheel.mismatch.record-missing", {"member": rel})
            elif rows[rel] != (actual, str(size)):
                yield Message(
                    "wheel.mismatch.record-hash",
                    {
                        "member": rel,
                        "recorded": f"{rows[rel][0]} {rows[rel][1]}",
                        "actual": f"{actual} {size}",
                    },
                )
        record_rel = f"{self.layout.dist_info}/RECORD"
        for rel in rows:
            if rel not in self.layout.files and rel != record_rel:
                yield Message("wheel.mismatch.record-extra", {"member": rel})
        if record_rel not in rows:
            yield Message("wheel.mismatch.record-self-missing", {"member": record_rel})
        elif rows[record_rel] != ("", ""):
            yield Message(
                "wheel.mismatch.record-self", {"member": record_rel, "found": ",".join(rows[record_rel])}
            )

    def _names(self) -> Iterator[Message]:
        if problem := self.layout.name_problem():
            yield Message(
                "wheel.mismatch.name", {"what": problem[0], "found": problem[1], "expected": problem[2]}
            )
        points = f"{self.layout.dist_info}/entry_points.txt"
        if points in self.layout.files:
            try:
                found = entry_points(
                    zipio.read_small(self.archive, self.layout.files[points], str(self.path))
                )
            except ValueError as exc:
                yield Message("wheel.mismatch.entry-points", {"member": points, "error": str(exc)})
                return
            for name, value, module in found:
                if not has_module(self.layout.files, module):
                    yield Message(
                        "wheel.mismatch.entry-point", {"name": name, "value": value, "module": module}
                    )

    def _provenance_files(self) -> Iterator[Message]:
        assert self.record is not None
        dist = self.record["distribution"]
        for what, found in (("name", dist["name"]), ("version", dist["version"])):
            expected = self.layout.name if what == "name" else self.layout.version
            if found != expected:
                yield Message(
                    "wheel.mismatch.name",
                    {"what": f"provenance distribution.{what}", "found": found, "expected": expected},
                )
        for rel, entry in self.record["files"].items():
            actual = _hex(self.hashes.get(rel))
            if actual != entry["sha256"]:
                yield Message(
                    "wheel.mismatch.provenance-file",
                    {"path": rel, "recorded": entry["sha256"] or "absent", "actual": actual or "absent"},
                )

    def _series(self) -> Iterator[Message]:
        assert self.record is not None
        self.series, self.entries, self.overlays = self.load_series(self.record["series"]["dir"])
        identity = series_identity(self.entries, self.overlays)
        recorded = provenance.identity_of(self.record)
        for index in range(max(len(identity), len(recorded))):
            have = identity[index] if index < len(identity) else None
            want = recorded[index] if index < len(recorded) else None
            if have != want:
                yield Message(
                    "wheel.mismatch.series-patch",
                    {
                        "index": index + 1,
                        "series": self.series,
                        "recorded": _patch(want),
                        "found": _patch(have),
                    },
                )
                return
        if provenance.series_hash(recorded) != self.record["series"]["hash"]:
            yield Message(
                "wheel.mismatch.series-hash",
                {"recorded": self.record["series"]["hash"], "actual": provenance.series_hash(recorded)},
            )

    def _source(self) -> Iterator[Message]:
        assert self.record is not None
        pin = provenance.pin_of(self.record)
        source = self.fetch(pin, self.record["source_wheel"]["sha256"])
        dist, epoch = self.record["distribution"], self.record.get("source_date_epoch")
        audit = self.audit(self.entries, pin) if self.audit else self.record.get("audit")
        request = Request(
            pin, self.record["series"]["dir"], self.entries, self.overlays, audit=audit, epoch=epoch
        )
        with zipio.open_wheel(str(source.path)) as archive:
            base = read_layout(archive, source.filename)
            changes = expected_changes(archive, base, request, dist["version"])
            self.made = (
                metadata(archive, base, dist["name"], dist["version"]),
                provenance_record(request, source, base, dist["name"], dist["version"], changes),
                base,
            )
        for rel in sorted(set(changes.rows) | set(self.record["files"])):
            want = changes.rows.get(rel, {}).get("sha256")
            have = self.record["files"].get(rel, {}).get("sha256")
            if rel not in changes.rows or want != have:
                yield Message(
                    "wheel.mismatch.source-file",
                    {"path": rel, "expected": want or "absent", "actual": have or "absent"},
                )
        rename = base.renamer(self.layout.dist_info, f"{self.layout.dist_info[: -len('.dist-info')]}.data")
        made = {f"{self.layout.dist_info}/METADATA", f"{self.layout.dist_info}/{provenance.FILENAME}"}
        seen = set()
        for rel in base.files:
            if rel in changes.files or rel in base.dropped or rename(rel) in made:
                continue
            seen.add(rename(rel))
            if rename(rel) not in self.hashes:
                yield Message("wheel.mismatch.member-missing", {"member": rename(rel)})
                continue
            mode, want = zipio.member_mode(self.layout.files[rename(rel)]), zipio.member_mode(base.files[rel])
            if mode != want:
                yield Message(
                    "wheel.mismatch.member-mode",
                    {"member": rename(rel), "expected": f"{want:o}", "actual": f"{mode:o}"},
                )
            elif base.record.get(rel, ("",))[0] != self.hashes[rename(rel)]:
                yield Message(
                    "wheel.mismatch.source-member",
                    {
                        "member": rename(rel),
                        "expected": base.record[rel][0],
                        "actual": self.hashes[rename(rel)],
                    },
                )
        for rel in self.hashes:
            if rel not in seen and rel not in made and rel not in changes.files:
                yield Message("wheel.mismatch.member-extra", {"member": rel})
        for rel, (data, mode) in changes.files.items():
            info = self.layout.files.get(rel)
            if data is not None and info is not None and zipio.member_mode(info) != (mode or 0o644):
                yield Message(
                    "wheel.mismatch.member-mode",
                    {
                        "member": rel,
                        "expected": f"{mode or 0o644:o}",
                        "actual": f"{zipio.member_mode(info):o}",
                    },
                )

    def _made(self) -> Iterator[Message]:
        """METADATA and the provenance are what a build from the source and the series writes. The
        builder's word: patchkit's version, the pin's sdist sha256 (a build does not see the sdist
        either), and the audit block without --audit."""
        assert self.record is not None
        expected_metadata, expected, base = self.made
        rel = f"{self.layout.dist_info}/METADATA"
        if self.hashes.get(rel) != naming.record_hash(hashlib.sha256(expected_metadata).digest()):
            have = zipio.read_small(self.archive, self.layout.files[rel], str(self.path)).splitlines()
            want = expected_metadata.splitlines()
            line = next(
                (i for i, (a, b) in enumerate(zip(have, want), 1) if a != b), min(len(have), len(want)) + 1
            )
            yield Message("wheel.mismatch.metadata", {"member": rel, "line": line})
            return
        expected["patchkit"] = self.record["patchkit"]
        if not versions.same(self.record["pin"].get("version"), base.version):
            expected["pin"] = {**expected["pin"], "version": base.version}
        if canonicalize_name(str(self.record["pin"].get("name"))) != canonicalize_name(base.name):
            expected["pin"] = {**expected["pin"], "name": base.name}
        if found := _difference(self.record, expected, ""):
            field, recorded, want = found
            yield Message(
                "wheel.mismatch.provenance-field",
                {"field": field, "recorded": _shown(recorded), "expected": _shown(want)},
            )

    def _form(self) -> Iterator[Message]:
        """Every member a regular file (0644 or 0755) with the one timestamp the build gives, and no
        byte of the file outside a member."""
        assert self.record is not None
        with open(self.path, "rb") as raw:
            if stray := zipio.stray_bytes(raw, self.archive):
                yield Message("wheel.mismatch.stray-bytes", {"offset": stray[0], "count": stray[1]})
        epoch = self.record.get("source_date_epoch")
        when = zipio.epoch_date_time(min(epoch, zipio.DOS_LAST)) if epoch is not None else self.made[2].newest
        for info in self.archive.infolist():
            mode = info.external_attr >> 16
            if mode not in (stat.S_IFREG | 0o644, stat.S_IFREG | 0o755):
                yield Message("wheel.mismatch.member-type", {"member": info.filename, "actual": f"{mode:o}"})
            elif zipio.dos_date_time(info.date_time) != zipio.dos_date_time(when):
                yield Message(
                    "wheel.mismatch.member-time",
                    {"member": info.filename, "actual": _stamp(info.date_time), "expected": _stamp(when)},
                )


def _difference(recorded: object, expected: object, at: str) -> tuple[str, object, object] | None:
    """The first field (``series.patches[0].status``) where two JSON values differ; None when equal."""
    if isinstance(recorded, dict) and isinstance(expected, dict):
        for key in sorted(set(recorded) | set(expected)):
            found = _difference(
                recorded.get(key, _ABSENT), expected.get(key, _ABSENT), f"{at}.{key}" if at else key
            )
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(expected, list) and len(recorded) == len(expected):
        for index, (have, want) in enumerate(zip(recorded, expected)):
            if found := _difference(have, want, f"{at}[{index}]"):
                return found
        return None
    return None if type(recorded) is type(expected) and recorded == expected else (at, recorded, expected)


def _shown(value: object) -> str:
    text = "absent" if value is _ABSENT else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else f"{text[:117]}..."


def _stamp(date_time: tuple[int, ...]) -> str:
    return "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}".format(*date_time[:6])


def _hex(record_hash: str | None) -> str | None:
    """``sha256=<urlsafe b64>`` as hex (the provenance's form)."""
    if record_hash is None:
        return None
    import base64

    encoded = record_hash.split("=", 1)[1]
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).hex()


def _patch(row: dict | None) -> str:
    return "none" if row is None else f"{row['name']} {row['sha256'][:12]}"
