"""A deterministic synthetic replay shaped like opt21-25, at any scale.

At scale 1: 9 commits, 22 touched files, ~89 hunks, ~2400 added lines. Commits, files and hunks
grow linearly with the scale. The shape mirrors the real replay: hunks spread over many files,
shared files (``vllm/shared/``) touched by several commits and claimed line by line through pattern
rules, mixed hunks where two domains' lines sit in one hunk, new files, and a fallback domain.

    python -m bench.synth --scale 10 --out /tmp/synth10
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

DOMAINS = ("alpha", "beta", "gamma", "delta", "epsilon")
FALLBACK = "other"
PER_SCALE = {"commits": 9, "files": 22, "hunks": 89, "added": 2400}
AUTHOR = "Bench Synth <bench@example.invalid>"


@dataclass
class SynthReplay:
    """Where a generated replay lives and what it holds."""

    root: Path
    base: Path
    mbox: Path
    rules: Path
    commits: int
    files: int
    hunks: int
    added: int
    path_root: str = "vllm"
    shape: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {k: str(v) if isinstance(v, Path) else v for k, v in self.__dict__.items()}


class _Lines:
    """Unique source lines, so every hunk's context is unambiguous."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0

    def line(self, token: str | None = None) -> str:
        self.count += 1
        n = self.count
        if token:
            return f"{token}_{n} = int(os.environ.get('{token}_{n}', '{self.rng.randrange(1000)}'))\n"
        kind = self.rng.randrange(4)
        if kind == 0:
            return f"name_{n} = 'text {n}'\n"
        if kind == 1:
            return f"total_{n} = sum(({n}, {self.rng.randrange(100)}))\n"
        if kind == 2:
            return f"# note {n}: keep in sync with upstream\n"
        return f"value_{n} = max({n}, {self.rng.randrange(1000)})\n"


def _module(lines: _Lines, count: int) -> list[str]:
    return ["import os\n", *(lines.line() for _ in range(count))]


def domain_token(domain: str) -> str:
    return f"VLLM_{domain.upper()}"


def rules_toml() -> str:
    out = ["# synthetic domains: one directory each, plus pattern rules on the shared files\n"]
    for name in DOMAINS:
        out.append(
            f'[[domain]]\nname = "{name}"\ntitle = "{name.title()}"\n'
            f'paths = ["vllm/{name}/**"]\ntests = []\n'
            f'  [[domain.match]]\n  paths = ["vllm/shared/**"]\n'
            f"  patterns = ['{domain_token(name)}\\w*']\n\n"
        )
    out.append(f'[[domain]]\nname = "{FALLBACK}"\ntitle = "Other"\nfallback = true\ntests = []\n')
    return "".join(out)


def _plan_files(rng: random.Random, n_files: int) -> list[str]:
    """Touched paths: ~20% shared (pattern-claimed), ~10% fallback, the rest in domain dirs."""
    paths = []
    for i in range(n_files):
        roll = rng.random()
        if roll < 0.2:
            paths.append(f"vllm/shared/shared_{i}.py")
        elif roll < 0.3:
            paths.append(f"vllm/misc/misc_{i}.py")
        else:
            paths.append(f"vllm/{rng.choice(DOMAINS)}/mod_{i}.py")
    return paths


def _domain_of(path: str) -> str | None:
    part = path.split("/")[1]
    return part if part in DOMAINS else None


def _hunk_lines(lines: _Lines, rng: random.Random, path: str, domain: str, size: int) -> list[str]:
    """Added lines of one hunk; in shared files, sometimes a second domain's lines join (mixed)."""
    if not path.startswith("vllm/shared/"):
        return [lines.line() for _ in range(size)]
    other = rng.choice([d for d in DOMAINS if d != domain]) if rng.random() < 0.35 else None
    out = []
    for i in range(size):
        token = domain_token(other) if other and i >= size // 2 else domain_token(domain)
        out.append(lines.line(token) if i % 3 == 0 else lines.line())
    return out


def _edit(
    rng: random.Random, lines: _Lines, current: list[str], path: str, domain: str, hunks: int, added: int
) -> list[str]:
    """The file after one commit: ``hunks`` insertions (some replacing lines); line 0 (the import) stays."""
    if not current:
        return _hunk_lines(lines, rng, path, domain, max(added, 1))
    slots = sorted(rng.sample(range(1, len(current)), min(hunks, len(current) - 1)), reverse=True)
    new = list(current)
    for k, at in enumerate(slots):
        size = max(1, added // len(slots) + rng.randrange(-3, 4))
        removed = 1 if rng.random() < 0.3 and k % 2 == 0 else 0
        new[at : at + removed] = _hunk_lines(lines, rng, path, domain, size)
    return new


def _diff(path: str, old: list[str] | None, new: list[str]) -> tuple[str, int]:
    body = list(difflib.unified_diff(old or [], new, n=3))[2:]  # drop difflib's ---/+++ lines
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head += ["new file mode 100644\n", "index 0000000..1111111\n", "--- /dev/null\n"]
    else:
        head += ["index 1111111..2222222 100644\n", f"--- a/{path}\n"]
    head.append(f"+++ b/{path}\n")
    return "".join(head + body), sum(1 for ln in body if ln.startswith("@@"))


def _mail(index: int, total: int, subject: str, diffs: list[str]) -> str:
    sha = hashlib.sha1(f"synth-{index}".encode()).hexdigest()
    return (
        f"From {sha} Mon Sep 17 00:00:00 2001\nFrom: {AUTHOR}\n"
        f"Date: Tue, 18 Aug 2026 17:{index // 60 % 60:02d}:{index % 60:02d} +0800\n"
        f"Subject: [PATCH {index}/{total}] {subject}\n\n{subject}: synthetic change.\n\n"
        f"Signed-off-by: {AUTHOR}\n---\n" + "".join(diffs) + "-- \n2.43.0\n\n"
    )


def generate(out: Path, scale: int = 1, seed: int = 21) -> SynthReplay:
    """Write base/, replay.mbox, domains.toml and shape.json under ``out`` (idempotent per seed)."""
    rng = random.Random(f"{seed}:{scale}")
    lines = _Lines(rng)
    n_commits, n_files = PER_SCALE["commits"] * scale, PER_SCALE["files"] * scale
    n_hunks, n_added = PER_SCALE["hunks"] * scale, PER_SCALE["added"] * scale
    paths = _plan_files(rng, n_files)
    new_files = set(rng.sample(paths, max(1, n_files // 10)))
    base = {p: _module(lines, rng.randrange(150, 400)) for p in paths if p not in new_files}
    filler = {f"vllm/untouched/pkg_{i}.py": _module(lines, 60) for i in range(n_files)}

    # Every file is touched at least once; shared files by several commits.
    touches: list[list[str]] = [[] for _ in range(n_commits)]
    for i, path in enumerate(paths):
        touches[i % n_commits].append(path)
        if path.startswith("vllm/shared/"):
            for extra in rng.sample(range(n_commits), min(3, n_commits)):
                if path not in touches[extra]:
                    touches[extra].append(path)
    current: dict[str, list[str] | None] = {p: (list(base[p]) if p in base else None) for p in paths}
    created: set[str] = set()
    total_touches = sum(len(t) for t in touches)
    mails, hunks_written, added_written = [], 0, 0
    for c, files in enumerate(touches):
        domain = DOMAINS[c % len(DOMAINS)]
        diffs = []
        for path in sorted(files, key=lambda p: (p in new_files and p not in created, p), reverse=True):
            hunks = max(1, round(n_hunks / total_touches + rng.uniform(-1, 1)))
            added = max(1, round(n_added / n_hunks * hunks))
            old = current[path]
            new = _edit(rng, lines, old or [], path, _domain_of(path) or domain, hunks, added)
            text, count = _diff(path, old, new)
            diffs.append(text)
            hunks_written += count
            added_written += sum(1 for ln in text.split("\n") if ln.startswith("+") and ln[:3] != "+++")
            current[path] = new
            created.add(path)
        mails.append(_mail(c + 1, n_commits, f"synth({domain}): commit {c + 1}", diffs))

    out.mkdir(parents=True, exist_ok=True)
    for path, content in {**base, **filler}.items():
        target = out / "base" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(content), encoding="utf-8")
    (out / "replay.mbox").write_text("".join(mails), encoding="utf-8")
    (out / "domains.toml").write_text(rules_toml(), encoding="utf-8")
    replay = SynthReplay(
        root=out,
        base=out / "base",
        mbox=out / "replay.mbox",
        rules=out / "domains.toml",
        commits=n_commits,
        files=n_files,
        hunks=hunks_written,
        added=added_written,
        shape={
            "scale": scale,
            "seed": seed,
            "new_files": len(new_files),
            "shared_files": sum(p.startswith("vllm/shared/") for p in paths),
            "untouched_files": len(filler),
        },
    )
    (out / "shape.json").write_text(json.dumps(replay.to_dict(), indent=1) + "\n", encoding="utf-8")
    return replay


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.synth", description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    replay = generate(args.out, args.scale, args.seed)
    print(json.dumps(replay.to_dict(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
