"""The fuzz loop: mutate seeds (and kept corpus cases), run a target, keep what is not a UserError."""

from __future__ import annotations

import hashlib
import random
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import UserError
from tests.fuzz.mutate import mutate
from tests.fuzz.targets import EXTRA_TARGETS, TARGETS

HERE = Path(__file__).parent
SEEDS = HERE / "seeds"
CORPUS = HERE / "corpus"


@dataclass
class Crash:
    target: str
    signature: str  # exception type + innermost patchkit frame
    detail: str
    data: bytes


@dataclass
class Stats:
    inputs: int = 0
    parsed: int = 0
    refused: int = 0  # UserError
    seconds: float = 0.0
    slowest: float = 0.0
    crashes: dict[str, Crash] = field(default_factory=dict)

    def add(self, other: Stats) -> None:
        self.inputs += other.inputs
        self.parsed += other.parsed
        self.refused += other.refused
        self.slowest = max(self.slowest, other.slowest)
        for key, crash in other.crashes.items():
            self.crashes.setdefault(key, crash)


def seeds(target: str) -> list[bytes]:
    """The hand-written seeds and every kept corpus case of ``target``."""
    seed_dir = SEEDS / target.split("-")[0]
    files = sorted(seed_dir.glob("*")) + sorted((CORPUS / target).glob("*"))
    return [p.read_bytes() for p in files if p.is_file()]


def check_one(target: str, data: bytes) -> Crash | None:
    """Run one input; a Crash when it raised anything but UserError."""
    try:
        {**TARGETS, **EXTRA_TARGETS}[target](data)
    except UserError:
        return None
    except Exception as exc:  # noqa: BLE001 - anything else is the bug we are looking for
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/patchkit/" in f.filename]
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        detail = "".join(traceback.format_exception(exc))[-2000:]
        return Crash(target, f"{type(exc).__name__} at {where}", detail, data)
    return None


def run(target: str, inputs: int, seed: int) -> Stats:
    rng = random.Random(seed)
    pool = seeds(target)
    all_pool = pool + [s for t in TARGETS if t != target for s in seeds(t)[:2]]
    stats = Stats()
    start = time.perf_counter()
    for _ in range(inputs):
        data = mutate(rng, rng.choice(pool), all_pool if rng.random() < 0.1 else pool)
        t0 = time.perf_counter()
        crash = check_one(target, data)
        elapsed = time.perf_counter() - t0
        stats.slowest = max(stats.slowest, elapsed)
        stats.inputs += 1
        if crash is None:
            stats.parsed += 1  # parsed or refused cleanly; refusals are counted below
        elif crash.signature not in stats.crashes:
            stats.crashes[crash.signature] = crash
    stats.seconds = time.perf_counter() - start
    return stats


def save(crash: Crash, directory: Path) -> Path:
    out = directory / crash.target
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"crash-{hashlib.sha256(crash.data).hexdigest()[:16]}"
    path.write_bytes(crash.data)
    return path
