"""The one crash handler: an exception patchkit did not expect is one line on stderr, its traceback
in a file that line names, and exit 4 — never exit 1, which says a gate failed.

    patchkit bug: KeyError: 'x' — traceback in ~/.cache/patchkit/crash/20261206T051203-4242.txt

The file goes to the cache's ``crash/`` (``patchkit cache`` lists it, ``--prune --older-than``
removes it), else to the system's temporary directory. ``PATCHKIT_DEBUG=1`` lets the exception
through with its traceback on stderr, for developers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from patchkit.errors import EXIT_BUG

DEBUG_ENV = "PATCHKIT_DEBUG"
CRASH_DIR = "crash"


def guarded(run: Callable[[], int]) -> int:
    """``run()``'s exit code; an unexpected exception becomes one line, a traceback file and
    ``EXIT_BUG``. Exits (``SystemExit``) and Ctrl-C (130) pass as they are."""
    try:
        return run()
    except KeyboardInterrupt:
        from patchkit.commands.outcome import interrupted

        return interrupted()
    except Exception as exc:  # noqa: BLE001 - this is the place every unexpected one ends
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        return crashed(exc)


def crashed(exc: BaseException) -> int:
    import traceback  # only on a crash: its imports cost every start a little

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    where = _write(f"patchkit {_version()}\nargv: {sys.argv!r}\n\n{text}")
    first = (str(exc).strip().splitlines() or [""])[0]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    tail = (
        f"traceback in {where}"
        if where
        else "the traceback could not be written: rerun with PATCHKIT_DEBUG=1"
    )
    print(f"patchkit bug: {what} — {tail}", file=sys.stderr, flush=True)
    return EXIT_BUG


def crash_dirs() -> list[Path]:
    """Where a traceback file goes, first choice first."""
    import tempfile

    fallback = Path(tempfile.gettempdir()) / "patchkit-crash"
    try:
        from patchkit.cache import cache_root

        return [cache_root() / CRASH_DIR, fallback]
    except Exception:  # noqa: BLE001 - a crash report must not crash
        return [fallback]


def _write(text: str) -> Path | None:
    import time

    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.txt"
    for directory in crash_dirs():
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / name
            path.write_text(text, encoding="utf-8", errors="backslashreplace")
            return path
        except OSError:
            continue
    return None


def _version() -> str:
    from patchkit import __version__

    return __version__
