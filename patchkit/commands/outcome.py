"""How a command ends, without click: its exit code, the one line of a user error, the record of a
failure in ``--json F``, Ctrl-C as exit 130. ``cli.py`` (through typer) and ``quick.py`` (the
start-up path of ``apply``) both end a command here, so the two cannot end one differently."""

from __future__ import annotations

import sys
from pathlib import Path

STDOUT = "-"
SCRATCH_PREFIX = "patchkit-json-"  # the scratch dir of ``--json -`` (cli/conventions.py)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
INTERRUPTED = "patchkit: interrupted (Ctrl-C); a command that writes leaves its target as before"

REAL_STDOUT: list = []  # the stdout a --json - callback moved the human lines away from


def json_stdout():
    """Where ``--json -`` writes: the real stdout, also when the parser stopped before the command
    ran (click then never closes the context that moved stdout to stderr)."""
    return REAL_STDOUT[-1] if REAL_STDOUT else sys.stdout


def json_target(path: Path | None) -> Path | None:
    """``--json`` as written on a command line the parser refused: None for stdout."""
    return None if path is None or str(path) == STDOUT else path


def interrupted() -> int:
    print(INTERRUPTED, file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def write_error(json_out: Path, exc) -> None:
    """A failed command's record in ``--json F`` (or on stdout for ``--json -``)."""
    import json

    record = {"ok": False, "error": exc.line(), "exit_code": exc.exit_code}
    if json_target(json_out) is None:  # --json - that the parser refused: stdout
        print(json.dumps(record, indent=1), file=json_stdout())
        return
    try:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    except OSError as err:
        print(f"patchkit: error: cannot write {json_out}: {err.strerror}", file=sys.stderr)


def call(fn, *args, json_out: Path | None = None) -> int:
    """Run a command's function: its exit code; a user error is one line on stderr and its exit code
    (2, or 1 for a failed check), written to ``--json F`` too, so scripts always find a record;
    Ctrl-C is exit 130. Bugs still raise."""
    from patchkit.errors import UserError

    try:
        return fn(*args)
    except KeyboardInterrupt:
        return interrupted()
    except UserError as exc:
        print(f"patchkit: error: {exc.line()}", file=sys.stderr)
        # an error about the JSON file itself (e.g. a full disk) keeps its previous version
        if json_out is not None and not any(str(p) in exc.line() for p in (json_out, json_out.resolve())):
            write_error(json_out, exc)
        return exc.exit_code


def shown(path: Path) -> str:
    """How a command names an output file it wrote: ``-`` (stdout) for the scratch file of ``--json -``."""
    import tempfile

    stdout = path.name == "out.json" and path.parent.name.startswith(SCRATCH_PREFIX)
    return f"{STDOUT} (stdout)" if stdout and path.parent.parent == Path(tempfile.gettempdir()) else str(path)
