"""The long fault profile: kill -9 patchkit anywhere in apply, reverse and recovery, and race a
user's editor against apply; the target must end exactly base or exactly patched, and no edit
may be lost.

    python -m bench.kill_profile --replay /work/real/08.patch --base /work/real/base130 \\
        --kills 500 --races 100 --work /tmp/kp

splits the replay against the base, then runs on two targets: a git-initialised copy of the
base (checkout) and a directory laid out like an installed package (``vllm/`` + dist-info with
RECORD; files outside ``vllm/`` are skipped there). Without ``--replay`` it uses the hand-made
fixture of tests/fixtures/apply (what CI runs, with a few kills). Prints the figures and, with
``--json``, writes them. ``--rebase-kills N`` runs bench/rebase_kill.py's profile too (kill -9 in
rebase, --continue, --abort and a second --abort; on tests/fixtures/rebase unless given
``--rebase-series/--rebase-from/--rebase-to``).
"""

from __future__ import annotations

import argparse
import base64
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
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "apply"
WRITE_STEPS = ["staged", "journal", "before-commit", "committed"]


@dataclass
class Target:
    kind: str
    root: Path
    args: list[str]
    state_dir: Path
    files: list[str]  # the files the series changes (what an editor races on)
    base: str = ""
    patched: str = ""
    figures: dict = field(default_factory=dict)


def digest(root: Path) -> str:
    """Bytes and permission bits of every file, patchkit's state, .git and byte-code aside
    (``__pycache__`` is compiled after the commit point and is not part of either state)."""
    out = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if {".git", ".patchkit", "__pycache__"} & set(rel.parts) or not path.is_file():
            continue
        out.update(f"{rel}\0{oct(path.stat().st_mode)}\0".encode())
        out.update(hashlib.sha256(path.read_bytes()).digest())
    return out.hexdigest()


def patchkit(*args: str, env: dict | None = None, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "patchkit", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip


def run(*args: str, cwd: Path) -> tuple[int, str]:
    proc = patchkit(*args, env=_env(), cwd=cwd)
    out = proc.communicate(timeout=300)[0].decode(errors="replace")
    return proc.returncode, out


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), **extra}


# --------------------------------------------------------------------------- set-up


def prepare(work: Path, replay: Path | None, base: Path | None) -> tuple[Path, Path]:
    """(series dir, base tree): the replay split against the base, or the CI fixture."""
    if replay is None:
        shutil.copytree(FIXTURES / "series", work / "series")
        return work / "series", FIXTURES / "base"
    code, out = run("split", str(replay), "--base", str(base), "--out", str(work / "series"), cwd=work)
    if code != 0:
        raise SystemExit(f"split failed: {out}")
    return work / "series", base


def checkout_target(work: Path, base: Path, files: list[str]) -> Target:
    root = work / "checkout"
    shutil.copytree(base, root)
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=kp", "-c", "user.email=kp@localhost",
                                                  "commit", "-q", "-m", "base"]):  # fmt: skip
        subprocess.run(["git", *argv], cwd=root, check=True, capture_output=True)
    return Target(
        "checkout", root, ["--target", "checkout", "--path", str(root)], root / ".git/patchkit", files
    )


def site_target(work: Path, base: Path, files: list[str]) -> Target:
    root = work / "site"
    shutil.copytree(base / "vllm", root / "vllm")
    info = root / "vllm-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    (info / "top_level.txt").write_text("vllm\n")
    rows = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{path.relative_to(root)},sha256={sha},{len(data)}")
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n")
    inside = [f for f in files if f.startswith("vllm/")]
    return Target("site-packages", root, ["--target", "site-packages", "--site-packages", str(root)],
                  root / ".patchkit", inside)  # fmt: skip


def changed_files(series: Path) -> list[str]:
    found = []
    for patch in sorted(series.glob("*.patch")):
        for line in patch.read_text(errors="replace").splitlines():
            if line.startswith("+++ b/"):
                found.append(line[6:])
    return sorted(set(found))


def calibrate(target: Target, series: Path, cwd: Path) -> None:
    target.base = digest(target.root)
    code, out = run("apply", str(series), *target.args, cwd=cwd)
    if code != 0:
        raise SystemExit(f"{target.kind}: the series does not apply: {out}")
    target.patched = digest(target.root)
    steps = json.loads((target.state_dir / "state.json").read_text())["files"]
    target.figures["files_in_transaction"] = len(steps) + 1
    code, out = run("apply", *target.args, "--reverse", cwd=cwd)
    if code != 0 or digest(target.root) != target.base:
        raise SystemExit(f"{target.kind}: reverse is not the identity: {out}")


# --------------------------------------------------------------------------- kills


def kill_round(target: Target, series: Path, rng: random.Random, cwd: Path, marker: Path) -> str:
    """One kill -9 of an apply / reverse (at a journal step or a random moment) or of a recovery
    paused mid-restore; then recovery. Returns what was killed ('' if the process finished first)."""
    applied = (target.state_dir / "state.json").exists()
    pending = (target.state_dir / "journal.json").exists()
    replaces = target.figures["files_in_transaction"]
    env = _env()
    if pending:  # kill the recovery itself
        what, argv = "recovery", ["apply", *target.args, "--recover"]
        env.update(PATCHKIT_PAUSE_AT=f"restore:{rng.randint(1, replaces)}")
    else:
        what = "reverse" if applied else "apply"
        argv = [
            "apply",
            *([] if applied else [str(series)]),
            *target.args,
            *(["--reverse"] if applied else []),
        ]
        if rng.random() < 0.6:
            env.update(
                PATCHKIT_PAUSE_AT=rng.choice(
                    [*WRITE_STEPS, *[f"replace:{n}" for n in range(1, replaces + 1)]]
                )
            )
    if "PATCHKIT_PAUSE_AT" in env:
        env["PATCHKIT_PAUSE_FILE"] = str(marker)
    marker.unlink(missing_ok=True)
    proc = patchkit(*argv, env=env, cwd=cwd)
    deadline = time.monotonic() + (30 if "PATCHKIT_PAUSE_AT" in env else rng.uniform(0.05, 1.5))
    while proc.poll() is None and time.monotonic() < deadline and not marker.exists():
        time.sleep(0.003)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    if killed:
        how = "at_step" if marker.exists() else "at_random"
        target.figures[how] = target.figures.get(how, 0) + 1
        if (target.state_dir / "journal.json").exists():
            target.figures["left_pending"] = target.figures.get("left_pending", 0) + 1
    return what if killed else ""


def settle(target: Target, cwd: Path, rng: random.Random) -> str:
    """Recover (by --recover or by status, as a user would) and say which state the target is in."""
    argv = ["apply", *target.args, "--recover"] if rng.random() < 0.5 else ["status", *target.args]
    code, out = run(*argv, cwd=cwd)
    if code not in (0, 1) or "Traceback" in out:
        raise AssertionError(f"{target.kind}: recovery failed: {out}")
    now = digest(target.root)
    applied = (target.state_dir / "state.json").exists()
    if (target.state_dir / "journal.json").exists():
        return "pending"
    if now == target.base and not applied:
        return "base"
    if now == target.patched and applied:
        return "patched"
    raise AssertionError(
        f"{target.kind}: neither base nor patched after recovery (state.json: {applied})\n{out}"
    )


def kill_profile(target: Target, series: Path, kills: int, rng: random.Random, cwd: Path) -> None:
    counts = {"apply": 0, "reverse": 0, "recovery": 0}
    ends = {"base": 0, "patched": 0}
    marker = cwd / f"paused-{target.kind}"
    started = time.monotonic()
    while sum(counts.values()) < kills:
        what = kill_round(target, series, rng, cwd, marker)
        if what:
            counts[what] += 1
        if (target.state_dir / "journal.json").exists() and rng.random() < 0.4:
            continue  # leave it pending: the next round kills the recovery
        end = settle(target, cwd, rng)
        if end != "pending":
            ends[end] += 1
    while (end := settle(target, cwd, rng)) == "pending":
        pass
    ends[end] += 1  # where the last round left it
    target.figures.update(kills=counts, kills_total=sum(counts.values()), ended=ends,
                          kill_seconds=round(time.monotonic() - started, 1))  # fmt: skip


# --------------------------------------------------------------------------- editor races


def race_round(target: Target, series: Path, rng: random.Random, cwd: Path, n: int) -> str:
    """Run apply (or reverse) while an 'editor' appends a line to one of the series' files;
    the line must survive: kept in the file (the apply aborted, refused, or ran before it)."""
    applied = (target.state_dir / "state.json").exists()
    argv = ["apply", *([] if applied else [str(series)]), *target.args, *(["--reverse"] if applied else [])]
    env = _env()
    paused = rng.random() < 0.6
    if paused:  # edit while the write phase is paused between two replacements
        step = rng.randint(1, target.figures["files_in_transaction"] - 1)
        env.update(PATCHKIT_PAUSE_AT=f"replace:{step}", PATCHKIT_PAUSE_SECONDS="0.3")
    rel = rng.choice(target.files)
    path = target.root / rel
    line = f"# user edit {n} {os.getpid()}\n".encode()
    proc = patchkit(*argv, env=env, cwd=cwd)
    time.sleep(rng.uniform(0.15, 0.9) if not paused else rng.uniform(0.2, 1.2))
    before_edit = path.read_bytes() if path.exists() else None
    with open(path, "ab") as handle:  # an editor saving in place
        handle.write(line)
    out = proc.communicate(timeout=120)[0].decode(errors="replace")
    data = path.read_bytes() if path.exists() else b""
    kept = line in data
    aborted = proc.returncode != 0 and ("changed while patchkit was writing" in out or "preimage" in out
                                        or "changed since apply" in out)  # fmt: skip
    outcome = "kept-aborted" if kept and aborted else "kept-applied" if kept and proc.returncode == 0 else ""
    if not kept:
        outcome = "LOST"
        case = {"file": rel, "paused": paused, "exit": proc.returncode, "said": out.strip().splitlines()[-1:]}
        target.figures.setdefault("lost_cases", []).append(case)
    elif not outcome:
        outcome = "kept-other"
    # undo the user's edit so the next round starts from base or patched
    if kept and data == line and before_edit is None:
        path.unlink()
    elif kept:
        path.write_bytes(data.replace(line, b"", 1))
    state = settle(target, cwd, rng)
    if state == "pending":
        raise AssertionError("a race left a pending journal")
    return outcome


def race_profile(target: Target, series: Path, races: int, rng: random.Random, cwd: Path) -> None:
    outcomes: dict[str, int] = {}
    for n in range(races):
        outcome = race_round(target, series, rng, cwd, n)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    target.figures["races"] = outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path)
    parser.add_argument("--base", type=Path)
    parser.add_argument("--kills", type=int, default=20, help="kill -9s in all (split over the targets)")
    parser.add_argument("--races", type=int, default=6, help="editor races in all")
    parser.add_argument("--targets", default="checkout,site-packages")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rebase-kills", type=int, default=0, help="kill -9s in rebase (bench/rebase_kill)")
    parser.add_argument("--rebase-series", type=Path)
    parser.add_argument("--rebase-from", type=Path)
    parser.add_argument("--rebase-to", type=Path)
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="patchkit-kp-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    series, base = prepare(work, args.replay, args.base)
    files = changed_files(series)
    kinds = args.targets.split(",")
    figures = {"series": str(series), "patches": len(list(series.glob("*.patch"))), "targets": {}}
    for kind in kinds:
        target = (checkout_target if kind == "checkout" else site_target)(work, base, files)
        calibrate(target, series, work)
        kill_profile(target, series, args.kills // len(kinds), rng, work)
        race_profile(target, series, args.races // len(kinds), rng, work)
        figures["targets"][kind] = target.figures
        print(json.dumps({kind: target.figures}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    lost = sum(t.get("races", {}).get("LOST", 0) for t in figures["targets"].values())
    if args.rebase_kills:
        from bench import rebase_kill

        extra = [f"--{flag}={value}" for flag, value in (("series", args.rebase_series),
                 ("from-base", args.rebase_from), ("to-base", args.rebase_to)) if value]  # fmt: skip
        rk = ["--kills", str(args.rebase_kills), "--work", str(work / "rebase"), "--seed", str(args.seed)]
        lost += rebase_kill.main([*rk, *extra, "--json", str(work / "rebase.json")])
        figures["rebase"] = json.loads((work / "rebase.json").read_text())
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
