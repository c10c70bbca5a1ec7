"""Progress of a long audit on stderr: a line per finished gate with N/M and the elapsed time, and
while pytest runs the live count of tests done / selected (from pytest's own "[ 12/296]") and the
side (base / patched).

On a terminal: rich live bars for the gates running now, above the finished lines. Elsewhere (CI
logs, pipes): plain lines, pytest counts at most every ``PLAIN_EVERY`` seconds per run. ``-q``: no
bars and no lines. Colour follows ``ui.console`` (``--color``, NO_COLOR); words follow ``--lang``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from patchkit.audit.model import ProgressEvent
from patchkit.report.i18n import t
from patchkit.ui.console import progress_enabled, rich_console, verbosity

PLAIN_EVERY = 20.0  # seconds between two plain pytest count lines of one run


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


class AuditProgress:
    """``with AuditProgress() as tell: run_audit(..., progress=tell)``."""

    def __init__(self, stream=None, lang: str = "en") -> None:
        self.stream = stream or sys.stderr
        self.lang = lang
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.live = None
        self.tasks: dict[tuple[str, str], int] = {}  # (patch, gate) -> rich task id
        self.last_plain: dict[tuple[str, str], float] = {}

    def __enter__(self) -> Callable[[ProgressEvent], None]:
        if progress_enabled(self.stream):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = rich_console(file=self.stream)
            self.live = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)  # fmt: skip
            self.live.start()
        return self.event

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def line(self, text: str) -> None:
        if verbosity() < 0:  # -q
            return
        stamp = f"[{_clock(time.monotonic() - self.started)}]"
        if self.live is not None:
            self.live.console.print(f"{stamp} {text}", markup=False, highlight=False)
        else:
            print(f"patchkit: {stamp} {text}", file=self.stream, flush=True)

    def event(self, e: ProgressEvent) -> None:
        with self.lock:
            where = f"[{e.number}/{e.total}] {e.patch}"
            key = (e.patch, e.gate)
            if e.kind == "gate-start":
                if self.live is not None:
                    self.tasks[key] = self.live.add_task(f"{where} {e.gate}", total=None)
            elif e.kind == "tests":
                self._tests(e, where, key)
            elif e.kind == "gate-done":
                if self.live is not None and key in self.tasks:
                    self.live.remove_task(self.tasks.pop(key))
                status = t(f"ui.status.{e.status}", self.lang) if e.status else ""
                self.line(f"{where} {e.gate}{t('punct.colon', self.lang)}{status} ({e.seconds:.1f} s)")
            elif e.kind == "patch-done":
                verdict = t(f"ui.verdict.{e.status}", self.lang) if e.status else ""
                self.line(f"{where}{t('punct.colon', self.lang)}{verdict}")

    def _tests(self, e: ProgressEvent, where: str, key: tuple[str, str]) -> None:
        side = t(f"ui.progress.side.{e.side}", self.lang)
        text = t("ui.progress.tests", self.lang, where=where, side=side, done=e.done, selected=e.selected)
        if self.live is not None:
            if key not in self.tasks:
                self.tasks[key] = self.live.add_task(text, total=e.selected)
            self.live.update(self.tasks[key], description=f"{where} tests ({side})", completed=e.done,
                             total=e.selected)  # fmt: skip
            return
        now = time.monotonic()
        run = (e.patch, e.side)
        if e.done == e.selected or now - self.last_plain.get(run, 0.0) >= PLAIN_EVERY:
            self.last_plain[run] = now
            self.line(text)
