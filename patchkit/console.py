"""The rich console every rendered table goes through (imported lazily: rich costs start-up)."""

from __future__ import annotations

import sys


def rich_console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160  # pipes and CI logs: do not squeeze tables to 80
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)
