"""Safe extraction of sdist/git archives and the content hash of a source tree.

``extract_archive`` checks every member before anything is written; ``tree_hash`` is the hash
recorded for (and compared against) every prepared base. Re-exported by ``patchkit.base.pin``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from patchkit.errors import CheckFailed

SKIP_DIRS = {".git", "__pycache__"}
CHUNK = 1 << 20


# --------------------------------------------------------------------------- safe extraction


def _unsafe_reason(name: str, kind: str, linkname: str = "") -> str | None:
    """Why an archive member may not be extracted, or None when it is safe.

    ``kind`` is file | dir | symlink | hardlink | other; hard-link targets are archive paths.
    """
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "absolute path"
    if ".." in parts:
        return "path with '..'"
    if kind == "other":
        return "device, fifo or other special file"
    if kind in ("symlink", "hardlink"):
        if linkname.startswith(("/", "\\")):
            return f"link to absolute path {linkname!r}"
        base = parts[:-1] if kind == "symlink" else []
        depth = 0
        for part in [*base, *linkname.replace("\\", "/").split("/")]:
            depth += -1 if part == ".." else 0 if part in ("", ".") else 1
            if depth < 0:
                return f"link outside the archive to {linkname!r}"
    return None


def _top_dir(names: list[str], archive: Path) -> str:
    tops = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts}
    if len(tops) != 1:
        raise CheckFailed(f"{archive.name}: expected one top-level directory, found {len(tops)}")
    return tops.pop()


def _strip(name: str, top: str) -> str:
    return "/".join(PurePosixPath(name).parts[1:]) if PurePosixPath(name).parts[0] == top else ""


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    return "file" if member.isfile() else "other"


def extract_archive(archive: Path, dest: Path) -> None:
    """Extract a tar(.gz) or zip into ``dest`` without its single top-level directory.

    Every member is checked before anything is written (CheckFailed naming the member); tar
    extraction also goes through tarfile's ``data`` filter.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, dest)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            _check_member(archive, member.name, _tar_kind(member), member.linkname)
        top = _top_dir([m.name for m in members], archive)
        kept = []
        for member in members:
            if stripped := _strip(member.name, top):
                link = _strip(member.linkname, top) if member.islnk() else member.linkname
                # links are checked again as they will be after the top directory is stripped
                if reason := _unsafe_reason(stripped, _tar_kind(member), link or ".."):
                    raise CheckFailed(f"{archive.name}: refusing member {member.name!r}: {reason}")
                kept.append(member.replace(name=stripped, linkname=link, deep=False))
        try:
            # the data filter exists from Python 3.11.4; our own checks above stand without it
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(dest, members=kept, **safe)
        except tarfile.FilterError as exc:
            raise CheckFailed(f"{archive.name}: refusing member: {exc}") from None


def _check_member(archive: Path, name: str, kind: str, linkname: str = "") -> None:
    if reason := _unsafe_reason(name, kind, linkname):
        raise CheckFailed(f"{archive.name}: refusing member {name!r}: {reason}")


def _extract_zip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            mode = info.external_attr >> 16
            kind = "symlink" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
            if kind == "symlink":
                raise CheckFailed(f"{archive.name}: refusing member {info.filename!r}: symlink")
            _check_member(archive, info.filename, kind)
        top = _top_dir([i.filename for i in infos], archive)
        for info in infos:
            stripped = _strip(info.filename, top)
            if not stripped or info.is_dir():
                continue
            target = dest / stripped
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            if (info.external_attr >> 16) & 0o111:
                target.chmod(0o755)


# --------------------------------------------------------------------------- tree hash


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_hash(root: Path) -> str:
    """sha256 over sorted (relative path, git-style mode, content sha256) of the files under
    ``root``, skipping ``.git`` and ``__pycache__`` directories. Symlinks hash their target text.
    """
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in [
            *filenames,
            *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d))),
        ]:
            path = Path(dirpath, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                mode, digest = "120000", hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
            elif stat.S_ISREG(info.st_mode):
                mode = "100755" if info.st_mode & 0o111 else "100644"
                digest = sha256_file(path)
            else:
                continue
            entries.append((path.relative_to(root).as_posix(), mode, digest))
    outer = hashlib.sha256()
    for rel, mode, digest in sorted(entries):
        outer.update(f"{mode} {digest} {rel}\0".encode())
    return outer.hexdigest()
