"""Where a long command spends its time: named stages with their wall seconds, recorded as they end,
for the table at the end of a cold audit and for its JSON. Stages may overlap (gates run in threads);
each record keeps its start offset so the table can say so."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

_EPOCH = time.perf_counter()
_LOCK = threading.Lock()
_RECORDS: list[Stage] = []

# Stages that only run when something was not cached: a run that has any of them was (partly) cold.
COLD_STAGES = ("base.download", "base.unpack", "base.commit", "testenv.", "tests.pytest")


@dataclass(frozen=True)
class Stage:
    name: str  # dotted: "base.download", "testenv.install", "tests.pytest"
    seconds: float
    detail: str = ""  # what it worked on: a file name, a patch and a side
    start: float = 0.0  # seconds since the process started recording

    def to_dict(self) -> dict:
        return {**asdict(self), "seconds": round(self.seconds, 3), "start": round(self.start, 3)}


def record(name: str, seconds: float, detail: str = "", started: float | None = None) -> None:
    began = (started if started is not None else time.perf_counter() - seconds) - _EPOCH
    with _LOCK:
        _RECORDS.append(Stage(name, seconds, detail, max(0.0, began)))


@contextmanager
def stage(name: str, detail: str = "") -> Iterator[None]:
    """Time the block as ``name``; a block that raises is recorded too (its time was spent)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        record(name, time.perf_counter() - started, detail, started)


def stages() -> list[Stage]:
    with _LOCK:
        return sorted(_RECORDS, key=lambda s: s.start)


def reset() -> None:
    with _LOCK:
        _RECORDS.clear()


def was_cold(records: list[Stage]) -> bool:
    return any(s.name.startswith(COLD_STAGES) for s in records)


def totals(records: list[Stage]) -> list[tuple[str, int, float]]:
    """(stage name, how many times it ran, summed seconds) in order of first start."""
    seen: dict[str, list[float]] = {}
    for s in records:
        seen.setdefault(s.name, []).append(s.seconds)
    return [(name, len(secs), sum(secs)) for name, secs in seen.items()]
