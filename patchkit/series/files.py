"""A series directory on disk: ``series`` (quilt style), ``NNNN-<domain>.patch``, ``split.json``.

Besides patch names the series file may list ``overlay overlays/<name>.toml``: a whole-file
replacement applied at that place in the series.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchkit import __version__
from patchkit.atomic import write_atomic
from patchkit.diff.hunks import diffstat
from patchkit.diff.model import Commit, Patch
from patchkit.diff.parse import parse_text
from patchkit.errors import UserError
from patchkit.series.model import Series, SplitPatch
from patchkit.series.overlays import OVERLAY_DIR, Overlay, load_overlay, write_overlay
from patchkit.series.reading import (
    MAX_PATCH_FILE,
    MAX_SERIES_FILE,
    MAX_SPLIT_JSON,
    load_json_capped,
    read_regular,
)

SERIES_FILE = "series"
SPLIT_JSON = "split.json"
MANIFEST = ".patchkit-split.json"  # what split wrote here, so it removes only its own files
OVERLAY_KEYWORD = "overlay"


@dataclass
class SeriesEntry:
    """One patch (or overlay) of a series as found on disk."""

    name: str
    path: Path
    text: str
    patches: list[Patch]  # parsed (a format-patch file holds one; a mbox may hold several)
    overlay: Overlay | None = None  # set for an ``overlay`` line (then ``patches`` is empty)

    @property
    def sha256(self) -> str:
        if self.overlay is not None:
            return self.overlay.sha256
        return hashlib.sha256(self.text.encode("utf-8", errors="surrogateescape")).hexdigest()


def format_patch(sp: SplitPatch, total: int, diff: str, commits: list[Commit | None],
                 supplied: tuple[str, str, str] | None = None) -> str:  # fmt: skip
    """``git format-patch`` form: first source commit's authorship, every source listed, no new sign-off.

    A patch made only of loose diffs has no author; ``supplied`` (name, email, where from:
    ``--author`` or git config) fills it in, and a header line says so, so ``git am`` takes it."""
    sources = [commits[i] for i in sp.source_commits if commits[i] is not None]
    title = sp.title.get("en", sp.domain)
    lines_added = sum(fp.added for fp in sp.files)
    lines_removed = sum(fp.removed for fp in sp.files)
    body = [
        f"The {title} part of the replay, split out by patchkit: "
        f"{len(sp.files)} file(s), +{lines_added}/-{lines_removed}.",
        "",
    ]
    if sp.depends_on:
        body += [f"Needs first: {', '.join(sp.depends_on)}.", ""]
    if sp.overlays:
        body += [f"Whole files beside it, as overlays: {', '.join(sp.overlays)}.", ""]
    trailers = [f"Patchkit-Domain: {sp.domain}"]
    for commit in sources:
        sha = (commit.sha or "0" * 40)[:12]
        who = f"{commit.author} <{commit.email}>" if commit.author else "unknown author"
        trailers.append(f"Patchkit-Source: {sha} {commit.subject} ({who})")
    loose = len(sp.source_commits) - len(sources)
    if loose:
        trailers.append(f"Patchkit-Source: {loose} loose diff(s) without commit metadata")
    for commit in sources:
        for trailer in commit.trailers:
            line = f"{trailer.key}: {trailer.value}"
            if line not in trailers:
                trailers.append(line)
    message = "\n".join(body + trailers)
    stat = diffstat(sp.files)
    tail = f"-- \npatchkit {__version__}\n"
    if not sources and supplied is None:  # never invent an author: the description as a preamble
        return f"{sp.domain}: {title}\n\n{message}\n---\n{stat}\n{diff}{tail}"
    note = None
    if sources:
        first = sources[0]
    else:
        name, mail, how = supplied  # type: ignore[misc]
        first = Commit(None, name, mail, None, "")
        note = f"X-Patchkit-Author: supplied by {how}; the source diff names no author"
    header = [
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001",
        f"From: {_address(first.author or '', first.email or '')}",
        note,
        f"Date: {first.date}" if first.date else None,
        f"Subject: {_encode(f'[PATCH {sp.number}/{total}] {sp.domain}: {title}')}",
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=UTF-8",
        "Content-Transfer-Encoding: 8bit",
    ]
    head = "\n".join(h for h in header if h is not None)
    return f"{head}\n\n{message}\n---\n{stat}\n{diff}{tail}"


def _encode(value: str) -> str:
    if value.isascii():
        return value
    import email.header  # only writing needs it: kept out of apply's and status's start-up

    return email.header.Header(value, "utf-8").encode()


def _address(name: str, mail: str) -> str:
    import email.utils

    if name.isascii():
        return email.utils.formataddr((name, mail))
    return f"{_encode(name)} <{mail}>"


def write_series(out: Path, series: Series, texts: dict[str, str],
                 overlays: dict[str, Overlay] | None = None, record: bool = True,
                 supplied: tuple[str, str, str] | None = None,
                 durable: bool = True) -> list[Path]:  # fmt: skip
    """Write every patch and overlay, the ``series`` file and (``record``) ``split.json``, each
    whole or not at all (``durable=False``: not fsynced, for a staging dir a transaction
    publishes); then drop the files an earlier split wrote (listed in its manifest) that this one
    did not — never a file patchkit did not write.

    ``overlays`` maps each name in a patch's ``overlays`` (``overlays/<stem>.toml``) to its overlay;
    a patch left with no diff of its own is not written: its overlays stand in its place."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the series directory {out}: {exc.strerror}") from None
    overlays = overlays or {}
    keep = {sp.filename for sp in series.patches if sp.files or not sp.overlays}
    written = []
    lines = []
    for sp in series.patches:
        if sp.filename in keep:
            text = format_patch(sp, len(series.patches), texts[sp.filename], series.commits, supplied)
            data = text.encode("utf-8", errors="surrogateescape")
            write_atomic(out / sp.filename, data, durable=durable)
            sp.sha256 = hashlib.sha256(data).hexdigest()
            written.append(out / sp.filename)
            lines.append(f"{sp.filename}\n")
        for name in sp.overlays:
            written += write_overlay(out / OVERLAY_DIR, Path(name).stem, overlays[name], durable)
            lines.append(f"{OVERLAY_KEYWORD} {name}\n")
    write_atomic(out / SERIES_FILE, "".join(lines), durable=durable)
    if record:
        write_atomic(out / SPLIT_JSON, record_json(series_record(series)))
        drop_stale(out, written)
    return written


def drop_stale(out: Path, written: list[Path]) -> None:
    """Record what this split wrote (the manifest), then remove what the previous one wrote and
    this one did not. Called once ``series`` and ``split.json`` name only the new files."""
    before = _manifest(out)
    now = sorted({str(p.relative_to(out)) for p in written} | {SERIES_FILE, SPLIT_JSON})
    write_atomic(out / MANIFEST, json.dumps({"written_by": "patchkit split", "files": now}, indent=1) + "\n")
    for stale in sorted(before - set(now)):
        (out / stale).unlink(missing_ok=True)


STAGING = ".patchkit-split-new"  # the new series, written and proven here before it reaches --out
SPLIT_TXN = ".patchkit-split-txn"  # the journal of the one transaction that publishes it


def staging_dir(out: Path) -> Path:
    """An empty ``OUT/.patchkit-split-new/`` (a killed split's leftover removed; a publish it cut
    short rolled back first)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if (out / SPLIT_TXN).is_dir():
            from patchkit.txn.transaction import recover

            recover(out / SPLIT_TXN)
        shutil.rmtree(out / STAGING, ignore_errors=True)
        (out / STAGING).mkdir()
    except OSError as exc:
        raise UserError(f"cannot create the series directory {out}: {exc.strerror}") from None
    return out / STAGING


def publish_series(out: Path, staging: Path, written: list[Path], split_json: str) -> None:
    """The staged series into ``out`` in one transaction (``patchkit.txn``): every file written,
    ``split.json`` and the manifest, and the files the previous split wrote that this one did not
    removed — old series or new, never a mix; a kill is rolled back by the next split or reader."""
    from patchkit.txn.transaction import Transaction

    names = sorted({str(p.relative_to(staging)) for p in written} | {SERIES_FILE})
    now = sorted({*names, SPLIT_JSON})
    manifest = json.dumps({"written_by": "patchkit split", "files": now}, indent=1) + "\n"
    try:
        with Transaction(out / SPLIT_TXN, out) as txn:
            for name in names:
                txn.write(out / name, (staging / name).read_bytes())
            txn.write(out / SPLIT_JSON, split_json.encode("utf-8", errors="surrogateescape"))
            txn.write(out / MANIFEST, manifest.encode())
            for stale in sorted(_manifest(out) - set(now)):
                if os.path.lexists(out / stale) and (out / stale).is_file():
                    txn.remove(out / stale)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}; the previous version is kept") from None
    except UserError as exc:  # the journal rolled back (a full disk): the previous series stands whole
        raise UserError(str(exc).replace("nothing was changed", "the previous version is kept")) from None
    finally:
        if not os.path.lexists(out / SPLIT_TXN / "journal.json"):
            with contextlib.suppress(OSError):
                os.rmdir(out / SPLIT_TXN)


def _manifest(out: Path) -> set[str]:
    """What the previous split wrote into ``out`` (safe relative names only); empty when unknown."""
    try:
        names = json.loads((out / MANIFEST).read_text("utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    safe = set()
    for name in names if isinstance(names, list) else []:
        parts = Path(name).parts if isinstance(name, str) else ("..",)
        if parts and ".." not in parts and not Path(name).is_absolute() and len(parts) <= 2:
            safe.add(name)
    return safe


def record_json(record: object) -> str:
    """JSON laid out for reading: nested structure indented, each flat object (a hunk, an
    assignment, a trailer) on one line. Flat parts go through json's C encoder; with ``indent``
    everything would take the pure-Python path, seconds for a large replay."""
    return _layout(record, 0) + "\n"


def _scalar(value: object) -> bool:
    return not isinstance(value, (dict, list))


def _flat(value: object) -> bool:
    """A scalar, a list of scalars, or a dict whose values are those."""
    if isinstance(value, dict):
        return all(_scalar(v) or (isinstance(v, list) and all(map(_scalar, v))) for v in value.values())
    return _scalar(value) or all(map(_scalar, value))  # type: ignore[arg-type]


def _layout(value: object, depth: int) -> str:
    if _flat(value) or not value:
        return json.dumps(value, ensure_ascii=False)
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict):
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_layout(v, depth + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{_layout(v, depth + 1)}" for v in value]  # type: ignore[union-attr]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def series_record(series: Series) -> dict:
    """``split.json``'s content: the mapping and metadata of the series, not its diff text again."""
    record = series.to_dict()
    for patch in record["patches"]:
        if not patch.get("overlays"):
            patch.pop("overlays", None)
        for file in patch["files"]:
            for hunk in file["hunks"]:
                hunk.pop("lines")  # the patch files hold the text; the record keeps the ranges
    return record


def read_series_lines(series_dir: Path) -> list[tuple[str, str]]:
    """(kind, name) in order, kind "patch" or "overlay"; a name that leaves the series dir is refused."""
    path = series_dir / SERIES_FILE
    if os.path.lexists(series_dir / SPLIT_TXN / "journal.json"):
        raise UserError("a split into this directory was cut short while writing it: run the split "
                        "again (its journal rolls back first)", str(series_dir))  # fmt: skip
    if os.path.lexists(series_dir / ".rebase" / "publish" / "journal.json"):
        raise UserError("a rebase into this directory was cut short while writing it: run patchkit "
                        "rebase --continue or --abort with --out here first", str(series_dir))  # fmt: skip
    try:
        text = read_regular(path, MAX_SERIES_FILE, "series file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"cannot read the series file: {exc}", str(path)) from exc
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        kind = "patch"
        if words[0] == OVERLAY_KEYWORD and len(words) > 1 and not words[1].startswith("-"):
            kind, words = "overlay", words[1:]
        name = words[0]  # quilt allows options like -p1 after the name
        if name.startswith("/") or ".." in Path(name).parts or "\\" in name:
            raise UserError(f"{kind} name {name!r} leaves the series directory", f"{path}:{number}")
        try:
            listed = os.path.lexists(series_dir / name)
        except OSError as exc:  # e.g. a name longer than the file system allows
            raise UserError(f"{kind} {name[:80]!r}: {exc.strerror}", f"{path}:{number}") from None
        if not listed:
            raise UserError(f"{kind} {name!r} listed but missing", f"{path}:{number}")
        found.append((kind, name))
    if not found:
        raise UserError("the series file lists no patch", str(path))
    return found


def read_series_file(series_dir: Path) -> list[str]:
    """Patch and overlay names in order (see ``read_series_lines`` for their kind)."""
    return [name for _, name in read_series_lines(series_dir)]


def listed_overlays(series_dir: Path) -> set[Path]:
    """Resolved paths of the overlays the series file lists (none without a series file)."""
    if not (series_dir / SERIES_FILE).is_file():
        return set()
    return {(series_dir / n).resolve() for kind, n in read_series_lines(series_dir) if kind == "overlay"}


def load_overlays(*dirs: Path) -> list[Overlay]:
    """Unlisted overlays of every ``overlays/`` dir given (sorted by name): those its ``series`` file
    does not list (listed ones apply at their place in the series); one target owned twice is an error."""
    overlays: list[Overlay] = []
    seen: dict[str, str] = {}
    for directory in dict.fromkeys(d.resolve() for d in dirs if (d / OVERLAY_DIR).is_dir()):
        listed = listed_overlays(directory)
        for path in sorted((directory / OVERLAY_DIR).glob("*.toml")):
            if path.resolve() in listed:
                continue
            overlay = load_overlay(path)
            if overlay.target in seen:
                raise UserError(f"{overlay.target} is also replaced by {seen[overlay.target]}", str(path))
            seen[overlay.target] = str(path)
            overlays.append(overlay)
    return overlays


def load_entries(series_dir: Path) -> list[SeriesEntry]:
    entries = []
    for kind, name in read_series_lines(series_dir):
        path = series_dir / name
        if path.resolve().parent != series_dir.resolve() and not path.resolve().is_relative_to(
            series_dir.resolve()
        ):
            raise UserError(f"{kind} {name!r} resolves outside the series directory", str(path))
        text = read_regular(path, MAX_PATCH_FILE, kind).decode("utf-8", errors="surrogateescape")
        if kind == "overlay":
            overlay = load_overlay(path)
            overlay.name = name
            entries.append(SeriesEntry(name, path, text, [], overlay))
            continue
        entries.append(SeriesEntry(name, path, text, parse_text(text, str(path))))
    return entries


def load_split_json(series_dir: Path) -> Series | None:
    path = series_dir / SPLIT_JSON
    if not os.path.lexists(path):
        return None
    record = load_json_capped(path, MAX_SPLIT_JSON, "split.json")
    try:
        return Series.from_dict(record)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise UserError(f"split.json is not a patchkit series record: {exc}", str(path)) from exc
