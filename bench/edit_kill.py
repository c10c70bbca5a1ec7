"""kill -9 in the edit loop: ``patchkit absorb``, ``refresh``, ``new``, ``drop`` and ``move`` on a
small series of ours, each killed at a spread-out point (half paused at a named step of
``patchkit.txn`` — ``PATCHKIT_PAUSE_AT`` — half after a random delay), sometimes its recovery
killed too; then one recovery command (``patchkit edit --path WT`` or ``absorb --dry-run``).

After it the series dir is byte for byte (sha256 of every file, nothing more, nothing less) the
series before the command or the one an uninterrupted run writes, never a mix or missing; the work
tree's files (the user's uncommitted edits and untracked notes) are as they were (``drop``, which
runs only on a clean tree, takes the dropped patch's lines out: then they are the new run's); HEAD, the
index (``git status``) and the work tree's record agree with that series; no record, staged dir or
git lock file is left; ``git fsck --full --strict`` is clean.

    nice -n 10 python -m bench.edit_kill --kills 120 --work /tmp/ek --json ek.json

``SOURCE_DATE_EPOCH`` is fixed, so the uninterrupted run is reproducible byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ["dirswap:recorded", "dirswap:swapped", "edit:ref", "edit:reset", "edit:saved", "dirswap:forwarded",
         "dirswap:cleaned"]  # fmt: skip
OPS = {  # argv after "patchkit"; the uncommitted edits (file, old, new) the round starts with
    "absorb": (["absorb"], [("pkg/a.py", "return 3 + 100\n", "return 3 + 101\n"),
                            ("pkg/c.py", "return 7 + 300\n", "return 7 + 301\n"),
                            ("pkg/b.py", "return 15\n", "return 15 + 1\n")], True),
    "refresh": (["refresh", "0002"], [("pkg/b.py", "return 5 + 200\n", "return 5 + 202\n")], False),
    "new": (["new", "extra", "--after", "0002"], [("pkg/b.py", "return 15\n", "return 15 + 1\n")], False),
    "drop": (["drop", "beta-change-b"], [], False),
    "move": (["move", "0002", "--after", "base"], [("pkg/a.py", "return 20\n", "return 20 + 1\n")], True),
}  # fmt: skip
NOTES = "notes.txt"  # an untracked file of the user's own (where the op keeps it untracked)


def _git(cwd: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout  # fmt: skip


def sub(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def hashes(root: Path, skip_git: bool = False) -> dict[str, str]:
    """sha256 of every file under ``root`` (links as their target, never followed); {} if absent."""
    found: dict[str, str] = {}
    for top, dirs, files in os.walk(root):
        if skip_git:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(top) / name
            rel = str(path.relative_to(root))
            found[rel] = ("link " + os.readlink(path)) if path.is_symlink() else \
                hashlib.sha256(path.read_bytes()).hexdigest()  # fmt: skip
    return found


class Profile:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.base, self.series, self.wt = work / "base", work / "series", work / "wt"
        self.marker = work / "paused"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": str(work / "gitconfig"), "HOME": str(work),
                    "SOURCE_DATE_EPOCH": "1760000000"}  # fmt: skip
        self.kills: dict[str, int] = {}
        self.where: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.recovered: dict[str, int] = {}
        self.left: dict[str, int] = {}  # before each recovery: a record or none, the series old or new
        self.op = ""
        self.problems: list[str] = []
        self.states: dict[str, dict] = {}
        self.seconds: dict[str, float] = {}

    # ------------------------------------------------------------------ the series and its states

    def build(self) -> None:
        """A base of three modules, a three-patch series by git format-patch (as test_edit_loop.py)."""
        shutil.rmtree(self.work, ignore_errors=True)
        (self.base / "pkg").mkdir(parents=True)
        (self.work / "gitconfig").write_text("[user]\n\tname = Ursula User\n\temail = ursula@x\n")
        for name in "abc":
            body = "".join(f"def {name}{i}():\n    return {i}\n\n\n" for i in range(30))
            (self.base / "pkg" / f"{name}.py").write_text(f'"""{name}."""\n\n\n' + body)
        (self.base / "pkg" / "__init__.py").write_text("")
        src = self.work / "src"
        shutil.copytree(self.base, src)
        _git(src, "init", "-q", env=self.env)
        steps = [
            ("Alice A", "alpha: change a", [("pkg/a.py", "return 3\n", "return 3 + 100\n")]),
            ("Bob B", "beta: change b", [("pkg/b.py", "return 5\n", "return 5 + 200\n")]),
            ("Carl C", "gamma: change c and a", [("pkg/c.py", "return 7\n", "return 7 + 300\n"),
                                                 ("pkg/a.py", "def a4():\n", "def a4():  # gamma\n")]),
        ]  # fmt: skip
        self._commit(src, "B", "base")
        for who, subject, subs in steps:
            for rel, old, new in subs:
                sub(src / rel, old, new)
            self._commit(src, who, subject, f"Signed-off-by: {who} <{who[0].lower()}@x>")
        _git(src, "format-patch", "-q", "-o", str(self.series), "HEAD~3", env=self.env)
        (self.series / "series").write_text(
            "".join(f"{p.name}\n" for p in sorted(self.series.glob("*.patch")))
        )
        code, said = self.run(["edit", str(self.series), "--path", str(self.wt), "--base", str(self.base)])
        assert code == 0, said
        self.pristine = self.work / "pristine"
        self.save(self.pristine)

    def _commit(self, repo: Path, who: str, *message: str) -> None:
        ident = {"GIT_AUTHOR_NAME": who, "GIT_AUTHOR_EMAIL": f"{who[0].lower()}@x", "GIT_COMMITTER_NAME": who,
                 "GIT_COMMITTER_EMAIL": f"{who[0].lower()}@x", "GIT_AUTHOR_DATE": "1700000000 +0100",
                 "GIT_COMMITTER_DATE": "1700000000 +0100"}  # fmt: skip
        _git(repo, "add", "-A", env=self.env)
        _git(repo, "commit", "-q", *[a for m in message for a in ("-m", m)], env={**self.env, **ident})

    def save(self, where: Path) -> None:
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        shutil.copytree(self.series, where / "series", symlinks=True)
        shutil.copytree(self.wt, where / "wt", symlinks=True)

    def put_back(self, where: Path) -> None:
        for path in (self.series, self.wt, self.staged()):
            shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(where / "series", self.series, symlinks=True)
        shutil.copytree(where / "wt", self.wt, symlinks=True)

    def staged(self) -> Path:
        return self.series.parent / f".{self.series.name}.patchkit-new"

    def state(self) -> dict:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=self.wt, capture_output=True, text=True,
                              env=self.env).stdout.strip()  # fmt: skip
        status = subprocess.run(["git", "status", "--porcelain=v1", "-uall"], cwd=self.wt,
                                capture_output=True, text=True, env=self.env).stdout  # fmt: skip
        meta = (self.wt / ".git" / "patchkit-edit.json").read_text()
        return {"series": hashes(self.series), "files": hashes(self.wt, skip_git=True), "head": head,
                "status": status, "meta": meta}  # fmt: skip

    def prepare(self, op: str) -> None:
        """The work tree of a round of ``op``: pristine plus the user's uncommitted edits."""
        self.put_back(self.pristine)
        _argv, edits, notes = OPS[op]
        for rel, old, new in edits:
            sub(self.wt / rel, old, new)
        if notes:
            (self.wt / NOTES).write_text("the user's own notes, untracked\n")

    def setup(self) -> None:
        self.build()
        for op in OPS:
            self.prepare(op)
            before = self.state()
            self.save(self.work / f"before-{op}")
            started = time.monotonic()
            code, said = self.run(self.argv(op))
            self.seconds[op] = time.monotonic() - started
            assert code == 0, said
            after = self.state()
            assert after["series"] != before["series"], op
            self.prepare(op)  # twice: the uninterrupted run is reproducible, or "new" means nothing
            code, said = self.run(self.argv(op))
            assert code == 0 and self.state() == after, (op, said)
            self.states[op] = {"old": before, "new": after}

    # ------------------------------------------------------------------ runs and kills

    def argv(self, op: str) -> list[str]:
        return [*OPS[op][0], "--path", str(self.wt)]

    def run(self, argv: list[str]) -> tuple[int, str]:
        proc = subprocess.run([sys.executable, "-m", "patchkit", *argv], env=self.env, capture_output=True,
                              timeout=600)  # fmt: skip
        return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")

    def killed(self, argv: list[str], rng: random.Random, window: float, what: str) -> bool:
        env = dict(self.env)
        paused = rng.random() < 0.5
        if paused:
            env.update(PATCHKIT_PAUSE_AT=rng.choice(STEPS), PATCHKIT_PAUSE_FILE=str(self.marker))
        self.marker.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-m", "patchkit", *argv], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        at = None if paused else rng.uniform(0.05, window)
        started = time.monotonic()
        deadline = started + window + 10
        while proc.poll() is None and time.monotonic() < deadline and not self.marker.exists():
            if at is not None and time.monotonic() - started >= at:
                break
            time.sleep(0.005)
        hit = proc.poll() is None
        if hit:
            proc.send_signal(signal.SIGKILL)
            where = env["PATCHKIT_PAUSE_AT"] if paused else "random delay"
            self.where[where] = self.where.get(where, 0) + 1
            self.kills[what] = self.kills.get(what, 0) + 1
        proc.wait()
        time.sleep(0.05)  # a child git (ended with its parent) has gone
        return hit

    def recover(self, rng: random.Random) -> tuple[int, str]:
        """One recovery command; one time in four a first one killed part-way."""
        now, states = hashes(self.series), self.states[self.op]
        series = next((name for name in ("old", "new") if now == states[name]["series"]), "neither")
        record = (self.wt / ".git" / "patchkit-txn" / "dirswap.json").exists()
        left = f"record, series {series}" if record else f"no record, series {series}"
        self.left[left] = self.left.get(left, 0) + 1
        argv = rng.choice([["edit", "--path", str(self.wt)], ["absorb", "--dry-run", "--path", str(self.wt)]])
        if rng.random() < 0.25 and (self.wt / ".git" / "patchkit-txn" / "dirswap.json").exists():
            self.killed(argv, rng, 1.5, "recovery")
        code, said = self.run(argv)
        kind = (
            "finished" if "finished the interrupted" in said else "undid" if "undid the" in said else "none"
        )
        self.recovered[kind] = self.recovered.get(kind, 0) + 1
        return code, said

    def check(self, op: str, code: int, said: str) -> str:
        now = self.state()
        states = self.states[op]
        end = next((name for name in ("old", "new") if now["series"] == states[name]["series"]), "WRONG")
        wrong = []
        if end != "WRONG":
            wrong += [key for key in ("files", "head", "status", "meta") if now[key] != states[end][key]]
        if code != 0 or "Traceback" in said:
            wrong.append(f"recovery exit {code}: {said.strip()[-300:]}")
        gitdir = self.wt / ".git"
        left = [p for p in (gitdir / "patchkit-txn" / "dirswap.json", self.staged(), gitdir / "index.lock",
                            gitdir / "HEAD.lock", gitdir / "refs" / "heads" / "patchkit.lock")
                if os.path.lexists(p)]  # fmt: skip
        wrong += [f"left behind: {p}" for p in left]
        fsck = subprocess.run(["git", "fsck", "--full", "--strict", "--no-dangling"], cwd=self.wt,
                              capture_output=True, text=True, env=self.env)  # fmt: skip
        if fsck.returncode != 0 or fsck.stdout.strip() or "error" in fsck.stderr:
            wrong.append(f"git fsck: {(fsck.stdout + fsck.stderr).strip()[:300]}")
        if end == "WRONG" or wrong:
            diff = sorted(set(now["series"].items()) ^ set(states["old"]["series"].items()))[:4]
            self.problems.append(f"{op} ended {end}: {wrong} :: {diff}")
            end = "WRONG"
        self.ends[f"{op}:{end}"] = self.ends.get(f"{op}:{end}", 0) + 1
        return end

    def round(self, rng: random.Random) -> None:
        op = self.op = rng.choice(sorted(OPS))
        self.put_back(self.work / f"before-{op}")
        self.killed(self.argv(op), rng, self.seconds[op], op)
        code, said = self.recover(rng)
        end = self.check(op, code, said)
        if end == "old" and rng.random() < 0.3:  # the same command again converges on the new series
            code, said = self.run(self.argv(op))
            converged = code == 0 and self.state() == self.states[op]["new"]
            self.ends["rerun:converged" if converged else "rerun:WRONG"] = \
                self.ends.get("rerun:converged" if converged else "rerun:WRONG", 0) + 1  # fmt: skip
            if not converged:
                self.problems.append(f"{op} run again after a kill: exit {code} {said.strip()[-300:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=15)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="patchkit-ek-"))
    rng = random.Random(args.seed)
    profile = Profile(work)
    profile.setup()
    started = time.monotonic()
    rounds = 0
    while True:
        total = sum(profile.kills.values())
        ends = {k: v for k, v in sorted(profile.ends.items())}
        figures = {"kills": dict(sorted(profile.kills.items())), "kills_total": total, "rounds": rounds,
                   "killed_at": dict(sorted(profile.where.items())), "ends": ends,
                   "old": sum(v for k, v in ends.items() if k.endswith(":old")),
                   "new": sum(v for k, v in ends.items() if k.endswith(":new")),
                   "wrong": sum(v for k, v in ends.items() if k.endswith("WRONG")),
                   "before_recovery": dict(sorted(profile.left.items())),
                   "recovery_said": dict(sorted(profile.recovered.items())), "problems": profile.problems,
                   "op_seconds": {k: round(v, 2) for k, v in profile.seconds.items()},
                   "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        if args.json:  # after every round: a long run's figures so far are never lost
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
        if total >= args.kills or rounds >= args.kills * 4:
            break
        profile.round(rng)
        rounds += 1
    print(json.dumps(figures), flush=True)
    return 1 if profile.problems or figures["wrong"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
