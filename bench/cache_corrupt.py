"""The corrupted-cache profile: damage a random entry of the audit cache in a random way, audit
again; never a traceback, never a damaged result trusted (every audit equals a clean one), each
damaged entry said once and written again whole.

    nice -n 10 python -m bench.cache_corrupt --rounds 200 --work /tmp/cc --json cc.json

Audits tests/fixtures/apply (gates apply, ruff, dco and the guide: each cached per patch).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "apply"
KINDS = ["stray-byte", "truncated", "empty-object", "empty-file", "directory", "status-flipped", "other-key",
         "binary", "not-json", "value-list", "nested"]  # fmt: skip


def audit(work: Path, cache: Path, name: str) -> tuple[int, str, dict]:
    env = {**os.environ, "PATCHKIT_CACHE": str(cache), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = work / f"{name}.json"
    argv = [sys.executable, "-m", "patchkit", "audit", str(FIXTURES / "series"), "--base",
            str(FIXTURES / "base"), "--gates", "apply,ruff,dco", "--json", str(out)]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, cwd=work, timeout=300)
    said = (proc.stdout + proc.stderr).decode(errors="replace")
    record = json.loads(out.read_text()) if out.is_file() else {}
    return proc.returncode, said, record


def essence(record: dict) -> list:
    """What a verdict rests on: per patch its verdict, each gate's status, message and evidence."""
    found = []
    for patch in record.get("patches", []):
        gates = [(g["gate"], g["status"], json.dumps(g.get("message"), sort_keys=True),
                  json.dumps([{k: v for k, v in e.items() if k != "duration"} for e in g.get("evidence", [])],
                             sort_keys=True)) for g in patch["gates"]]  # fmt: skip
        found.append(
            (patch["patch"], patch["verdict"], gates, json.dumps(patch.get("guide"), sort_keys=True))
        )
    return found


def damage(path: Path, kind: str, rng: random.Random, others: list[Path]) -> None:
    data = path.read_bytes()
    if kind == "stray-byte":
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.randrange(256)]) + data[at:]
    elif kind == "truncated":
        data = data[: rng.randrange(len(data))]
    elif kind == "empty-object":
        data = b"{}"
    elif kind == "empty-file":
        data = b""
    elif kind == "status-flipped":  # a hand edit: failed <-> passed, any status word
        text = data.decode()
        for a, b in (('"passed"', '"failed"'), ('"failed"', '"passed"'), ('"ready"', '"needs-work"')):
            if a in text:
                text = text.replace(a, b, 1)
                break
        else:  # the body (after the header line) is the value: give it a status
            head, _, body = text.partition("\n")
            text = head + "\n" + body.replace("{", '{"status":"passed",', 1)
        data = text.encode()
    elif kind == "other-key":
        data = rng.choice([o for o in others if o != path] or [path]).read_bytes()
    elif kind == "binary":
        data = bytes(rng.randrange(256) for _ in range(64))
    elif kind == "not-json":
        data = b"patchkit was here\n"
    elif kind == "value-list":  # the header kept whole, the value replaced by another JSON value
        head, _, _ = data.partition(b"\n")
        json.loads(head)
        data = head + b"\n[1,2,3]\n"
    elif kind == "nested":
        data = b"[" * 100000 + b"]" * 100000
    if kind == "directory":
        path.unlink()
        path.mkdir()
        (path / "x").write_text("x")
        return
    path.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="patchkit-cc-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    code, said, record = audit(work, cache, "clean")
    clean = essence(record)
    assert code == 0 and clean, said
    figures = {"rounds": 0, "kinds": {}, "tracebacks": 0, "trusted_corrupt": 0, "not_said": 0,
               "said_twice": 0, "not_rewritten": 0, "problems": []}  # fmt: skip
    for n in range(args.rounds):
        entries = sorted(p for p in cache.glob("audit-*/*.json") if p.is_file())
        path = rng.choice(entries)
        kind = rng.choice(KINDS)
        damage(path, kind, rng, entries)
        code, said, record = audit(work, cache, f"r{n}")
        figures["rounds"] += 1
        figures["kinds"][kind] = figures["kinds"].get(kind, 0) + 1
        told = said.count(f"cache entry {path} is damaged")
        problem = None
        if "Traceback" in said:
            figures["tracebacks"] += 1
            problem = "traceback"
        elif code != 0 or essence(record) != clean:
            figures["trusted_corrupt"] += 1
            problem = "differs from the clean audit"
        elif told == 0 and kind != "other-key":
            figures["not_said"] += 1
            problem = "not said"
        elif told > 1:
            figures["said_twice"] += 1
            problem = "said more than once"
        elif not path.is_file():
            figures["not_rewritten"] += 1
            problem = "not written again"
        if problem:
            figures["problems"].append(f"round {n} {kind} {path.name}: {problem}: {said[-300:]}")
    print(json.dumps({k: v for k, v in figures.items() if k != "problems"}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if figures["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
