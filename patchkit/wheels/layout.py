"""What a wheel holds: its ``.dist-info`` (name, version, RECORD), its ``.data`` directory, the
top-level names it installs, and each file member — with the source RECORD as the check of every
member's bytes."""

from __future__ import annotations

import configparser
import hashlib
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

from patchkit import versions
from patchkit.errors import CheckFailed, UserError
from patchkit.wheels import naming, zipio

SIGNATURES = ("RECORD.jws", "RECORD.p7s")  # signatures of the source's RECORD: void once it changes


@dataclass
class Layout:
    filename: str
    name: str  # METADATA Name
    version: str  # METADATA Version
    dist_info: str  # e.g. vllm-0.33.0.dist-info
    data_dir: str | None  # e.g. vllm-0.33.0.data, when the wheel has one
    files: dict[str, zipfile.ZipInfo]  # every file member but RECORD
    top_level: list[str]
    newest: tuple[int, ...]  # the latest member timestamp: the default for every member
    record: dict[str, tuple[str, str]] = field(default_factory=dict)  # the source RECORD

    @property
    def dropped(self) -> set[str]:
        return {f"{self.dist_info}/{name}" for name in SIGNATURES}

    def renamer(self, dist_info: str, data_dir: str) -> Callable[[str], str]:
        """Maps a member name to its name in a wheel whose directories are ``dist_info``/``data_dir``."""

        def rename(rel: str) -> str:
            head, sep, rest = rel.partition("/")
            if head == self.dist_info:
                return f"{dist_info}{sep}{rest}"
            if head == self.data_dir:
                return f"{data_dir}{sep}{rest}"
            return rel

        return rename

    def name_problem(self) -> tuple[str, str, str] | None:
        """(what, says, METADATA says) for the first of the wheel's file name and ``.dist-info``
        directory that does not spell METADATA's name and version; None when both do."""
        expected = f"{naming.file_name_part(self.name)}-{self.version}"
        dist_info = self.dist_info[: -len(".dist-info")]
        name, _, version = dist_info.rpartition("-")
        if canonicalize_name(name) != canonicalize_name(self.name) or not versions.same(
            version, self.version
        ):
            return self.dist_info, dist_info, expected
        parts = self.filename[: -len(".whl")].split("-")
        if (
            len(parts) < 5
            or canonicalize_name(parts[0]) != canonicalize_name(self.name)
            or (not versions.same(parts[1].replace("_", "-"), self.version))
        ):
            return self.filename, "-".join(parts[:2]), expected
        return None

    def check_source_row(self, rel: str, data: bytes) -> None:
        self.check_source_digest(rel, hashlib.sha256(data).digest())

    def check_source_digest(self, rel: str, digest: bytes) -> None:
        """CheckFailed unless the source RECORD lists ``rel`` with this sha256."""
        row = self.record.get(rel)
        if row is None:
            raise CheckFailed(f"the source wheel's RECORD does not list {rel}", self.filename)
        if row[0] != naming.record_hash(digest):
            raise CheckFailed(
                f"the source wheel's RECORD says {row[0]} for {rel}, its bytes hash to "
                f"{naming.record_hash(digest)}",
                self.filename,
            )


def read_layout(archive: zipfile.ZipFile, filename: str) -> Layout:
    """The wheel's layout; UserError when it is not a wheel (no single ``.dist-info`` with METADATA,
    WHEEL and RECORD) or its METADATA and ``.dist-info`` name disagree."""
    members = {info.filename: info for info in zipio.files_of(archive)}
    dirs = sorted({n.split("/")[0] for n in members if "/" in n and n.split("/")[0].endswith(".dist-info")})
    if len(dirs) != 1:
        raise UserError(f"expected one .dist-info directory, found {len(dirs)}: {', '.join(dirs)}", filename)
    dist_info = dirs[0]
    for need in ("METADATA", "WHEEL", "RECORD"):
        if f"{dist_info}/{need}" not in members:
            raise UserError(f"no {dist_info}/{need}", filename)
    metadata = zipio.read_small(archive, members[f"{dist_info}/METADATA"], filename)
    metadata = metadata.decode("utf-8", errors="replace")
    names, found = naming.metadata_field(metadata, "Name"), naming.metadata_field(metadata, "Version")
    if len(names) != 1 or len(found) != 1:
        raise UserError(f"{dist_info}/METADATA needs one Name: and one Version: line", filename)
    stem = dist_info[: -len(".dist-info")]
    data_dir = f"{stem}.data" if any(n.startswith(f"{stem}.data/") for n in members) else None
    record_rel = f"{dist_info}/RECORD"
    record = naming.parse_record(
        zipio.read_small(archive, members.pop(record_rel), filename), f"{filename}:{record_rel}"
    )
    listed = ""
    if f"{dist_info}/top_level.txt" in members:
        try:
            listed = zipio.read_small(archive, members[f"{dist_info}/top_level.txt"], filename).decode()
        except UnicodeDecodeError as exc:
            raise UserError(f"{dist_info}/top_level.txt is not UTF-8: {exc.reason}", filename) from None
    top_level = listed.split() or sorted(
        {n.split("/")[0] for n in members if n.split("/")[0] not in (dist_info, data_dir)}
    )
    newest = max((info.date_time for info in members.values()), default=(1980, 1, 1, 0, 0, 0))
    return Layout(
        filename,
        names[0],
        found[0],
        dist_info,
        data_dir,
        members,
        top_level,
        max(tuple(newest), (1980, 1, 1, 0, 0, 0)),
        record,
    )


def entry_points(data: bytes) -> list[tuple[str, str, str]]:
    """(name, value, module) of every entry point in an ``entry_points.txt``; ValueError naming why
    when it cannot be read as one (not UTF-8, not INI)."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(data.decode("utf-8"))
    except (UnicodeDecodeError, configparser.Error) as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    return [
        (name, value, value.split(":")[0].strip())
        for section in parser.sections()
        for name, value in parser.items(section)
    ]


def has_module(files: Iterable[str], module: str) -> bool:
    """Whether the members ``files`` hold ``module`` (a ``.py``, a package, or an extension)."""
    stem = module.replace(".", "/")
    names = set(files)
    if f"{stem}.py" in names or f"{stem}/__init__.py" in names:
        return True
    return any(rel.startswith(f"{stem}.") and rel.endswith((".so", ".pyd")) for rel in names)
