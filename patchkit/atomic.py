"""Every file patchkit hands the user (series, reports, JSON) is written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

from patchkit.errors import UserError


def write_atomic(path: Path, data: bytes | str, mode: int = 0o644, durable: bool = True) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync, rename into place: a failure (full
    disk, a directory in the way) leaves the previous version intact and is one UserError line.
    ``durable=False`` skips the fsync: for scratch files that a later transaction writes durably
    (a split's staging dir), never for a file the user keeps."""
    payload = data.encode("utf-8", errors="surrogateescape") if isinstance(data, str) else data
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a directory; cannot write the output there")
    tmp = None
    try:
        import tempfile  # not at import: a command that writes nothing (apply --check) never loads it

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}; the previous version is kept") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
