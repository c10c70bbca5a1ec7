"""The one console: ``-q``/``-v`` (verbosity), ``--color auto|always|never`` with ``NO_COLOR`` and
``FORCE_COLOR`` (as git, ruff and rich read them), and the width a table may use.

- colour: ``--color always``/``never`` wins; with ``auto`` (the default) a non-empty ``NO_COLOR``
  turns it off, a non-empty ``FORCE_COLOR`` on, else colour only on a terminal (not ``TERM=dumb``).
- width: a terminal's own; anywhere else (a pipe, a CI log) no limit, so a table is never cut or
  folded at 80 columns — every name is written whole.
- progress bars: only on a terminal and never with ``-q``.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from patchkit.choices import COLOR_MODES

UNLIMITED = 10_000  # columns for a table written to a pipe or a log: nothing is cut

# -q / -v of the command line: below 0 only errors and results, above 0 the detail lines too
_verbosity = 0
_color = "auto"


def verbosity() -> int:
    return _verbosity


def set_verbosity(level: int) -> None:
    global _verbosity
    _verbosity = level


def color_mode() -> str:
    return _color


def set_color(mode: str) -> None:
    global _color
    if mode not in COLOR_MODES:
        raise ValueError(f"--color: {mode!r} is not one of {', '.join(COLOR_MODES)}")
    _color = mode


def is_terminal(stream: IO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or exotic stream
        return False


def color_enabled(stream: IO | None, environ=os.environ) -> bool:
    if _color != "auto":
        return _color == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return is_terminal(stream) and environ.get("TERM") != "dumb"


def progress_enabled(stream: IO | None) -> bool:
    """Live bars: on a terminal, and not with ``-q``."""
    return _verbosity >= 0 and is_terminal(stream)


def rich_console(stderr: bool = False, file: IO | None = None):
    """A rich console for ``file`` (default stdout, or stderr) with this run's colour and width."""
    from rich.console import Console

    stream = file or (sys.stderr if stderr else sys.stdout)
    color = color_enabled(stream)
    return Console(
        file=stream,
        highlight=False,
        soft_wrap=True,
        width=None if is_terminal(stream) else UNLIMITED,
        # colour codes into a pipe only when asked (--color always, FORCE_COLOR)
        force_terminal=True if color and not is_terminal(stream) else None,
        no_color=not color,
        color_system="auto" if color else None,
        emoji=False,
    )


def print_table(console, table) -> None:
    """A rich table on ``console``; into a pipe or a log without colour, each line without the
    padding rich puts after its last cell (a log line ends where its text ends)."""
    if console.is_terminal or console.color_system is not None:
        console.print(table, soft_wrap=False)  # a table fits the terminal's width
        return
    with console.capture() as captured:
        console.print(table)
    for line in captured.get().splitlines():
        console.out(line.rstrip(), highlight=False)
