"""Runs in flight: a thread about to compute a keyed result another thread is computing right now
waits for that one instead (the audit's gates run in threads, ``jobs`` at a time)."""

from __future__ import annotations

import threading

_RUNNING: dict[str, threading.Event] = {}  # base-side path key -> set when its run has ended
_RUNNING_LOCK = threading.Lock()


def claim(keys: list[str]) -> tuple[set[str], list[threading.Event]]:
    """The keys this caller runs itself, and the runs of the others to wait for."""
    with _RUNNING_LOCK:
        theirs = list({id(e): e for k in keys if (e := _RUNNING.get(k)) is not None}.values())
        ours = {k for k in keys if k not in _RUNNING}
        for key in ours:
            _RUNNING[key] = threading.Event()
    return ours, theirs


def release(keys: set[str]) -> None:
    with _RUNNING_LOCK:
        for key in keys:
            _RUNNING.pop(key).set()
