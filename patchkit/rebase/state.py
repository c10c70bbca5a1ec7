"""Where a rebase keeps its state (``OUT/.rebase/``) and how it appears and goes away, each step
safe against kill -9.

- ``begin``: ``.rebase/`` appears with its ``state.json`` already in it (built as ``.rebase.new``
  and renamed; an --out that did not exist appears the same way, built beside it), so a
  ``.rebase/`` never lacks its state. Nothing else of ``--out`` is touched before the publish.
- ``save``: the state replaced whole, fsynced, before the step it describes.
- ``clear``: everything but ``state.json`` removed first, ``state.json`` last, then the directory:
  a second command after a killed one finds the state and finishes the removal.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from patchkit.errors import UserError
from patchkit.txn.journal import fsync_dir, step, write_json_durable

STATE_DIR = ".rebase"
STATE_FILE = "state.json"
STATE_VERSION = 2
MAX_STATE_BYTES = 256 * 1024 * 1024


def state_dir(out: Path) -> Path:
    return out / STATE_DIR


def _sibling(out: Path) -> Path:
    return out.parent / f".{out.name}.patchkit-rebase-new"


def leftovers(out: Path) -> list[Path]:
    """What a rebase killed before its state existed left behind (only names patchkit uses)."""
    found = [p for p in (out / (STATE_DIR + ".new"), _sibling(out)) if os.path.lexists(p)]
    return found


def remove_leftovers(out: Path) -> int:
    found = leftovers(out)
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    return len(found)


def begin(out: Path, state: dict) -> None:
    """Create ``OUT/.rebase/state.json`` in one step (and OUT with it when it did not exist)."""
    remove_leftovers(out)
    if not os.path.lexists(out):
        staging = _sibling(out)
        (staging / STATE_DIR).mkdir(parents=True)
        write_json_durable(staging / STATE_DIR / STATE_FILE, state)
        fsync_dir(staging)
        os.rename(staging, out)
        fsync_dir(out.parent)
        return
    staging = out / (STATE_DIR + ".new")
    staging.mkdir()
    write_json_durable(staging / STATE_FILE, state)
    os.rename(staging, state_dir(out))
    fsync_dir(out)


def save(out: Path, state: dict) -> None:
    write_json_durable(state_dir(out) / STATE_FILE, state)


def load(out: Path) -> dict | None:
    """The state, None when no rebase is in progress; an unreadable one is one UserError line."""
    path = state_dir(out) / STATE_FILE
    if not os.path.lexists(state_dir(out)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the rebase state: {exc.strerror}; run patchkit rebase --abort",
                        str(path)) from None  # fmt: skip
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_STATE_BYTES + 1)
    try:
        if len(data) > MAX_STATE_BYTES:
            raise ValueError("too large")
        state = json.loads(data)
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION or "phase" not in state:
            raise ValueError("not a patchkit rebase state of this version")
    except (ValueError, RecursionError) as exc:
        raise UserError(f"the rebase state is unreadable ({str(exc)[:80]}); "
                        "run patchkit rebase --abort to drop it", str(path)) from None  # fmt: skip
    return state


def clear(out: Path, out_created: bool) -> None:
    """Remove ``.rebase/`` and, when the rebase created OUT and nothing else is in it, OUT: first
    renamed to a leftover name in one step (the state is whole or gone), then deleted; a kill
    leaves only the leftover, which any next rebase command removes."""
    where = state_dir(out)
    if out_created and os.path.isdir(out) and os.listdir(out) == [STATE_DIR]:
        trash = _sibling(out)
        shutil.rmtree(trash, ignore_errors=True)
        os.rename(out, trash)
        fsync_dir(out.parent)
    elif os.path.lexists(where):
        trash = out / (STATE_DIR + ".new")
        shutil.rmtree(trash, ignore_errors=True)
        os.rename(where, trash)
        fsync_dir(out)
        step("clear:renamed")
    remove_leftovers(out)
