"""Timing in subprocesses: wall and CPU seconds and peak RSS per run, medians, ratios, growth."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Command = Sequence[str]
Prepare = Callable[[int], None]  # called with the run index, outside the timed region


class CommandFailed(Exception):
    """A measured command exited non-zero: the case reports it instead of a number."""


@dataclass
class Samples:
    """Every run of one command: the figure is the median, never a single run."""

    command: list[str]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    max_rss_kb: list[int] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def peak_rss_mb(self) -> float:
        return max(self.max_rss_kb) / 1024

    def to_dict(self) -> dict:
        return {
            "command": self.command,
            "samples_s": [round(s, 4) for s in self.wall],
            "median_s": round(self.median, 4),
            "cpu_samples_s": [round(s, 4) for s in self.cpu],
            "cpu_median_s": round(self.cpu_median, 4),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
        }


def run_once(
    command: Command, cwd: Path | None = None, env: dict | None = None, ok_codes: tuple[int, ...] = (0,)
) -> tuple[float, float, int]:
    """(wall s, user+sys CPU s, max RSS KiB) of one run, descendants included (wait4 rusage)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(command), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    stderr = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok_codes:
        tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or ["(no stderr)"]
        raise CommandFailed(f"exit {proc.returncode}: {' '.join(command)[:120]}: {tail[0][:200]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def measure_pair(
    candidate: Command,
    baseline: Command,
    runs: int,
    cwd: Path | None = None,
    prepare: Prepare | None = None,
    prepare_baseline: Prepare | None = None,
    env: dict | None = None,
    ok_codes: tuple[int, ...] = (0,),
) -> tuple[Samples, Samples]:
    """Interleave candidate and baseline runs so background load hits both alike.

    ``ok_codes`` are the candidate's accepted exit codes; the baseline must exit 0.
    """
    cand, base = Samples(list(candidate)), Samples(list(baseline))
    for i in range(runs):
        for samples, command, hook, codes in (
            (cand, candidate, prepare, ok_codes),
            (base, baseline, prepare_baseline, (0,)),
        ):
            if hook is not None:
                hook(i)
            wall, cpu, rss = run_once(command, cwd, env, codes)
            samples.wall.append(wall)
            samples.cpu.append(cpu)
            samples.max_rss_kb.append(rss)
    return cand, base


def growth_exponent(sizes: Sequence[float], times: Sequence[float]) -> float | None:
    """Least-squares slope of log(time) against log(size); None with fewer than two sizes."""
    if len(sizes) < 2:
        return None
    xs, ys = [math.log(s) for s in sizes], [math.log(max(t, 1e-9)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None
