"""The rich console every rendered table goes through (imported lazily: rich costs start-up)."""

from __future__ import annotations

import sys


def rich_console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160  # pipes and CI logs: do not squeeze tables to 80
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


# -q / -v of the command line: below 0 only errors and results, above 0 the detail lines too
_verbosity = 0


def verbosity() -> int:
    return _verbosity


def set_verbosity(level: int) -> None:
    global _verbosity
    _verbosity = level
