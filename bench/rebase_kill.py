"""kill -9 in every part of ``rebase`` (the run that stops on a conflict, ``--continue``, ``--abort``,
a second ``--abort`` after a killed one) on a series with a conflict; after each kill ONE command
(``--abort``, or ``--continue``) must restore exactly the pre-rebase ``--out`` (every entry: file
bytes and mode by sha256, links as links with their target, directories) or complete the rebase
(equal to an uninterrupted run's result).

    nice -n 10 python -m bench.rebase_kill --series S --from-base OLD --to-base NEW --kills 300 \\
        --work /tmp/rk --json rk.json

Without ``--series`` it uses tests/fixtures/rebase (what CI runs, a few kills). ``--out`` starts
with files of the user's own (a note, a link to it, a directory, a link to the directory): they
must come back exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "rebase"
STEPS = {  # the named points each command passes (PATCHKIT_PAUSE_AT), where half the kills land
    "stop": ["rebase:begun", "rebase:worktree-built", "rebase:stopped"],
    "continue": ["rebase:planned", "rebase:publishing", "staged", "journal", "replace:1", "replace:2",
                 "before-commit", "committed", "rebase:published", "clear:renamed"],
    "abort": ["abort:restored", "clear:renamed"],
}  # fmt: skip


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): file sha256 + mode, link target, dir."""
    if not os.path.lexists(root):
        return {"": "absent"}
    found = {}
    for top, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(top) / name
            rel = str(path.relative_to(root))
            info = path.lstat()
            if path.is_symlink():
                found[rel] = "link " + os.readlink(path)
            elif path.is_dir():
                found[rel] = "dir"
            elif not stat.S_ISREG(info.st_mode):
                found[rel] = f"special {oct(info.st_mode)}"  # a FIFO: never opened
            else:
                found[rel] = f"file {oct(info.st_mode)} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return found


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), **extra}


class Profile:
    def __init__(self, args, work: Path) -> None:
        self.series, self.old, self.new = args.series, args.from_base, args.to_base
        self.work, self.out = work, work / "out"
        self.marker = work / "paused"
        self.counts: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.problems: list[str] = []

    def argv(self, *extra: str) -> list[str]:
        if extra and extra[0] in ("--continue", "--abort"):
            return ["rebase", *extra, "--out", str(self.out)]
        return ["rebase", str(self.series), "--from-base", str(self.old), "--to-base", str(self.new),
                "--out", str(self.out), *extra]  # fmt: skip

    def run(self, argv: list[str]) -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-m", "patchkit", *argv], env=_env(), capture_output=True,
                              timeout=600)  # fmt: skip
        return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")

    def killed(self, argv: list[str], rng: random.Random, window: float, what: str) -> bool:
        env = _env()
        if rng.random() < 0.5:
            env.update(PATCHKIT_PAUSE_AT=rng.choice(STEPS[what]), PATCHKIT_PAUSE_FILE=str(self.marker))
        self.marker.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "patchkit", *argv], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + (window if "PATCHKIT_PAUSE_AT" not in env else window + 5)
        at = rng.uniform(0.05, window) if "PATCHKIT_PAUSE_AT" not in env else None
        started = time.monotonic()
        while proc.poll() is None and time.monotonic() < deadline and not self.marker.exists():
            if at is not None and time.monotonic() - started >= at:
                break
            time.sleep(0.005)
        hit = proc.poll() is None
        if hit:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(0.05)  # a child git (killed with its parent) has gone
        return hit

    def resolve(self) -> None:
        """Resolve the stopped patch's conflicts by taking the patch's side of every marker block."""
        state = json.loads((self.out / ".rebase" / "state.json").read_text())
        for rel in state["conflicts"]:
            path = self.out / ".rebase" / "worktree" / rel
            lines, keep, side = [], True, ""
            for line in path.read_text(errors="surrogateescape").splitlines(keepends=True):
                if line.startswith("<<<<<<< "):
                    keep, side = False, "ours"
                elif line.startswith("||||||| "):
                    side = "base"
                elif line.rstrip("\n") == "=======" and side:
                    keep, side = True, "theirs"
                elif line.startswith(">>>>>>> ") and side == "theirs":
                    side = ""
                elif keep:
                    lines.append(line)
            path.write_text("".join(lines), errors="surrogateescape")

    def to_stopped(self, rng: random.Random) -> None:
        """The stopped rebase: run it (one round in four), or put back the copy of what it wrote
        (the same bytes, a copy of a directory patchkit wrote, as a faster way to the same state)."""
        if rng.random() < 0.25:
            code, said = self.run(self.argv())
            assert code == 1 and self.phase() == "stopped", said
            return
        shutil.copytree(self.saved, self.out / ".rebase", symlinks=True)
        self.count_restored = getattr(self, "count_restored", 0) + 1

    def phase(self) -> str:
        try:
            return json.loads((self.out / ".rebase" / "state.json").read_text())["phase"]
        except (OSError, ValueError, KeyError):
            return "none"

    def reset(self) -> None:
        """From a completed rebase back to the pre-rebase --out (what the last rebase wrote, removed)."""
        written = json.loads((self.out / ".patchkit-rebase.json").read_text())["files"]
        for name in [*written, ".patchkit-rebase.json"]:
            (self.out / name).unlink()

    def setup(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True)
        (self.out / "notes.txt").write_text("the user's own notes\n")
        os.symlink("notes.txt", self.out / "notes-link")
        (self.out / "mine").mkdir()
        (self.out / "mine" / "0001-mine.patch").write_text("a patch of the user's own\n")
        os.symlink("mine", self.out / "mine-link")
        self.pre = snapshot(self.out)
        code, said = self.run(self.argv())
        assert code == 1 and self.phase() == "stopped", said
        self.run(self.argv("--abort"))
        started = time.monotonic()
        code, _ = self.run(self.argv())
        self.t_stop = time.monotonic() - started
        self.saved = self.work / "stopped-state"  # what the stop wrote, to come back to it cheaply
        shutil.rmtree(self.saved, ignore_errors=True)
        shutil.copytree(self.out / ".rebase", self.saved, symlinks=True)
        started = time.monotonic()
        self.run(self.argv("--abort"))
        self.t_abort = time.monotonic() - started
        self.run(self.argv())
        self.resolve()
        started = time.monotonic()
        code, said = self.run(self.argv("--continue"))
        self.t_continue = time.monotonic() - started
        assert code == 0, said
        self.done = snapshot(self.out)
        self.reset()
        assert snapshot(self.out) == self.pre

    def check(self, what: str, code: int, said: str) -> None:
        now = snapshot(self.out)
        if "Traceback" in said:
            self.problems.append(f"{what}: traceback {said[-400:]}")
        if now == self.pre:
            end = "restored"
        elif now == self.done:
            end = "completed"
        elif code == 1 and self.phase() == "stopped":
            end = "stopped-again"
        else:
            end = "WRONG"
        if end == "WRONG":
            diff = sorted(set(now.items()) ^ set((self.pre if what == "abort" else self.done).items()))[:6]
            self.problems.append(f"{what} (exit {code}): {said.strip()[-300:]} :: {diff}")
        self.ends[f"{what}:{end}"] = self.ends.get(f"{what}:{end}", 0) + 1

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def round(self, rng: random.Random) -> None:
        """Bring the rebase to a random phase, kill the next command in it, then one command."""
        what = rng.choices(["stop", "continue", "abort", "second-abort"], weights=[40, 25, 15, 20])[0]
        if what == "stop":
            hit = self.killed(self.argv(), rng, self.t_stop, "stop")
        else:
            self.to_stopped(rng)
            if what == "continue":
                self.resolve()
                hit = self.killed(self.argv("--continue"), rng, self.t_continue, "continue")
            else:
                hit = self.killed(self.argv("--abort"), rng, self.t_abort, "abort")
                if what == "second-abort" and hit and self.phase() != "none":
                    self.count("abort (first)")
                    hit = self.killed(self.argv("--abort"), rng, self.t_abort, "abort")
        if hit:
            self.count(what)
        final = "continue" if what in ("stop", "continue") and rng.random() < 0.35 else "abort"
        if final == "continue" and self.phase() == "stopped" and what == "stop":
            final = "abort"  # the stop was written: --continue now is the resolution round, not recovery
        code, said = self.run(self.argv(f"--{final}"))
        self.check(final, code, said)
        if snapshot(self.out) == self.done:
            self.reset()
        elif self.phase() != "none":
            self.run(self.argv("--abort"))
        if snapshot(self.out) != self.pre:
            raise AssertionError(f"could not bring --out back for the next round: {self.problems[-1:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=Path, default=FIXTURES / "series-conflict")
    parser.add_argument("--from-base", type=Path, default=FIXTURES / "old")
    parser.add_argument("--to-base", type=Path, default=FIXTURES / "new")
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="patchkit-rk-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    profile = Profile(args, work)
    profile.setup()
    started = time.monotonic()
    rounds = 0
    while True:
        total = sum(profile.counts.values())
        figures = {"series": str(args.series), "kills": profile.counts, "kills_total": total,
                   "rounds": rounds, "ends": profile.ends, "problems": profile.problems,
                   "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        if args.json:  # after every round: a long run's figures so far are never lost
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
        if total >= args.kills or rounds >= args.kills * 4:
            break
        try:
            profile.round(rng)
        except AssertionError as exc:  # --out could not be brought back: the run stops, said
            profile.problems.append(f"round {rounds}: {str(exc)[:600]}")
            rounds = args.kills * 4
            continue
        rounds += 1
    print(json.dumps(figures), flush=True)
    return 1 if profile.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
