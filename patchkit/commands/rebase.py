"""``patchkit rebase``: carry a series to a new base; stop on conflicts like ``git rebase``.

On a conflict, ``OUT/.rebase`` holds ``state.json``, a backup of OUT as it was, the report so
far and ``worktree`` (a git repo of the new base + rebased patches before the stop, with the
stopped patch's merge result and conflict markers left uncommitted).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import git, output
from patchkit.atomic import write_atomic
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import diffstat, render_diff
from patchkit.errors import EXIT_FAILED, EXIT_OK, CheckFailed, UserError
from patchkit.rebase.merge import Rebaser, SourceSeries, load_source, marker_lines, rebased_series
from patchkit.rebase.outcome import PatchOutcome, RebaseReport, describe_pin, print_summary
from patchkit.series.files import SERIES_FILE, SPLIT_JSON, format_patch, load_entries, series_record
from patchkit.series.model import SplitPatch
from patchkit.split.depends import compute_dependencies
from patchkit.values import Pin

STATE_DIR = ".rebase"
REPORT_JSON = "rebase.json"


@dataclass
class Job:
    """One rebase in progress: where it reads, where it writes, and how far it got."""

    series_dir: Path
    out: Path
    source: SourceSeries
    old_pin: Pin
    new_pin: Pin
    old_tree: BaseTree
    new_tree: BaseTree
    report: RebaseReport
    rebased: list[SplitPatch]
    json_out: Path | None
    out_existed: bool

    @property
    def state_dir(self) -> Path:
        return self.out / STATE_DIR

    def rebaser(self) -> Rebaser:
        labels = (f"new base {describe_pin(self.new_pin)}", f"old base {describe_pin(self.old_pin)}")
        return Rebaser(self.source, self.old_tree, self.new_tree, labels)


def run(series_dir: Path | None, to_pin: Path | None, to_base: Path | None, from_pin: Path | None,
        from_base: Path | None, out: Path, cont: bool, abort: bool,
        json_out: Path | None) -> int:  # fmt: skip
    started = time.perf_counter()
    if cont and abort:
        raise UserError("give --continue or --abort, not both")
    if abort:
        return abort_rebase(out)
    if cont:
        job, k = load_state(out, json_out)
        return drive(job, resume(job, k), started)
    if (out / STATE_DIR).exists():
        raise UserError("a rebase is in progress here: run with --continue or --abort", str(out / STATE_DIR))
    series_dir = series_dir or _default_series_dir()
    source = load_source(series_dir)
    if to_pin is None and to_base is None:
        raise UserError("no new base: pass --to PIN or --to-base DIR")
    new_tree, new_pin = _tree(to_base, to_pin, "--to")
    old_tree, old_pin = _old_tree(source, from_base, from_pin, series_dir)
    report = RebaseReport(str(series_dir), str(out), old_pin, new_pin)
    job = Job(series_dir.resolve(), out.resolve(), source, old_pin, new_pin, old_tree, new_tree, report,
              [], json_out, out.exists())  # fmt: skip
    return drive(job, (job.rebaser(), 0), started)


def drive(job: Job, resumed: tuple[Rebaser, int], started: float) -> int:
    rebaser, start = resumed
    for k in range(start, len(job.source.patches)):
        sp = job.source.patches[k]
        step = rebaser.step(k)
        outcome = PatchOutcome(sp.filename, sp.domain, "pending", hunks=step.hunks)
        job.report.patches.append(outcome)
        if step.conflicts:
            outcome.status, outcome.conflict_files = "conflict", step.conflicts
            stop(job, rebaser, k, step.results)
            print_summary(job.report, time.perf_counter() - started)
            return EXIT_FAILED
        _record(job, outcome, rebaser.commit(k, step.results))
    return finish(job, rebaser, started)


def _record(job: Job, outcome: PatchOutcome, rebased: SplitPatch | None) -> None:
    if rebased is None:
        outcome.status = "dropped"
        return
    outcome.status = "resolved" if outcome.status == "conflict" else "rebased"
    job.rebased.append(rebased)


# --------------------------------------------------------------------------- stop / continue / abort


def stop(job: Job, rebaser: Rebaser, k: int, results: dict[str, bytes | None]) -> None:
    """Leave patch k's merge (with markers) in a worktree and write the state to resume from."""
    state_dir = job.state_dir
    if not state_dir.exists():
        before = list(job.out.iterdir()) if job.out_existed else []
        backup = state_dir / "backup"
        backup.mkdir(parents=True)
        for entry in before:
            copy = shutil.copytree if entry.is_dir() and not entry.is_symlink() else shutil.copy2
            copy(entry, backup / entry.name)
    worktree = state_dir / "worktree"
    if worktree.exists():
        shutil.rmtree(worktree)
    shutil.copytree(job.new_tree.root, worktree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    _write_files(worktree, rebaser.new.files)
    git.init_with_commit(worktree, f"new base + rebased patches 1..{k}")
    _write_files(worktree, results)
    job.report.status, job.report.worktree = "conflict", str(worktree)
    job.report.pending = [sp.filename for sp in job.source.patches[k + 1 :]]
    job.report.tally()
    state = {
        "version": 1,
        "series_dir": str(job.series_dir),
        "out_existed": job.out_existed,
        "old": {"pin": job.old_pin.to_dict(), "root": str(job.old_tree.root)},
        "new": {"pin": job.new_pin.to_dict(), "root": str(job.new_tree.root)},
        "current": k,
        "files": list(results),
        "conflicts": job.report.patches[-1].conflict_files,
        "rebased": [sp.to_dict() for sp in job.rebased],
        "report": job.report.to_dict(),
    }
    _dump(state_dir / "state.json", state)
    _write_report(job, state_dir / REPORT_JSON)


def load_state(out: Path, json_out: Path | None) -> tuple[Job, int]:
    path = out / STATE_DIR / "state.json"
    if not path.is_file():
        raise UserError("no rebase in progress (no .rebase/state.json)", str(out))
    state = json.loads(path.read_text("utf-8"))
    series_dir = Path(state["series_dir"])
    job = Job(series_dir, out.resolve(), load_source(series_dir), Pin.from_dict(state["old"]["pin"]),
              Pin.from_dict(state["new"]["pin"]), BaseTree(Path(state["old"]["root"])),
              BaseTree(Path(state["new"]["root"])), RebaseReport.from_dict(state["report"]),
              [SplitPatch.from_dict(d) for d in state["rebased"]], json_out,
              state["out_existed"])  # fmt: skip
    return job, state["current"]


def resume(job: Job, k: int) -> tuple[Rebaser, int]:
    """Take patch k's files from the worktree (refusing leftover markers) and go on with k+1."""
    state = json.loads((job.state_dir / "state.json").read_text("utf-8"))
    worktree = job.state_dir / "worktree"
    results: dict[str, bytes | None] = {}
    for rel in state["files"]:
        full = worktree / rel
        results[rel] = full.read_bytes() if full.is_file() else None
    for rel in state["conflicts"]:
        left = marker_lines(results[rel])
        if left:
            raise CheckFailed(
                f"conflict markers remain ({len(left)} line(s)); resolve them, then --continue",
                f"{worktree / rel}:{left[0]}",
            )
    rebaser = job.rebaser()
    rebaser.replay(k, job.rebased)
    rebaser.step(k)  # advances the old state past patch k; its merge is replaced by the resolution
    outcome = job.report.patches[-1]
    for hunk in outcome.hunks:
        if hunk.status == "conflict":
            hunk.status, hunk.note = "resolved", (hunk.note + "; resolved by hand").lstrip("; ")
    _record(job, outcome, rebaser.commit(k, results))
    job.report.status, job.report.worktree, job.report.pending = "done", None, []
    return rebaser, k + 1


def abort_rebase(out: Path) -> int:
    state_dir = out / STATE_DIR
    path = state_dir / "state.json"
    if not path.is_file():
        raise UserError("no rebase in progress (no .rebase/state.json)", str(out))
    existed = json.loads(path.read_text("utf-8"))["out_existed"]
    if not existed:
        shutil.rmtree(out)
    else:
        for entry in out.iterdir():
            if entry.name != STATE_DIR:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in (state_dir / "backup").iterdir():
            shutil.move(str(entry), str(out / entry.name))
        shutil.rmtree(state_dir)
    output.info(f"rebase aborted; {out} restored as it was before")
    return EXIT_OK


# --------------------------------------------------------------------------- output


def finish(job: Job, rebaser: Rebaser, started: float) -> int:
    series = rebased_series(job.source, job.new_pin, job.rebased)
    kept = iter(series.patches)
    for outcome in job.report.patches:
        if outcome.status in ("rebased", "resolved"):
            outcome.new_patch = next(kept).filename
    compute_dependencies(job.new_tree, series.patches)
    rebased_from = f"Patchkit-Rebased-From: {describe_pin(job.old_pin)}"
    write_rebased(job.out, series, rebased_from, job.source.foreign)
    job.report.proof = check(job.new_tree, job.out, rebaser.new.files)
    series.proof = job.report.proof
    _dump(job.out / SPLIT_JSON, series_record(series))
    job.report.status, job.report.worktree = "done", None
    job.report.tally()
    _write_report(job, job.out / REPORT_JSON)
    if job.state_dir.exists():
        shutil.rmtree(job.state_dir)
    print_summary(job.report, time.perf_counter() - started)
    for problem in job.report.proof.get("differences", []):
        output.error(f"check: {problem}")
    return EXIT_OK if job.report.proof.get("ok") else EXIT_FAILED


def write_rebased(out: Path, series, trailer: str, foreign: dict[str, str] | None = None) -> None:
    """Patches in format-patch form (authorship and trailers kept, the rebase trailer added); a
    patch patchkit did not write keeps its name and its own header and message, only its diff
    (and diffstat) change."""
    import hashlib

    out.mkdir(parents=True, exist_ok=True)
    names = {sp.filename for sp in series.patches}
    for stale in out.glob("[0-9][0-9][0-9][0-9]-*.patch"):
        if stale.name not in names:
            stale.unlink()
    for sp in series.patches:
        path = out / sp.filename
        if sp.filename in (foreign or {}):
            data = keep_header(foreign[sp.filename], sp.files).encode("utf-8", errors="surrogateescape")
            write_atomic(path, data)
            sp.sha256 = hashlib.sha256(data).hexdigest()
            continue
        text = format_patch(sp, len(series.patches), render_diff(sp.files), series.commits)
        head, sep, tail = text.partition("\n---\n")
        data = f"{head}\n{trailer}{sep}{tail}".encode("utf-8", errors="surrogateescape")
        write_atomic(path, data)
        sp.sha256 = hashlib.sha256(data).hexdigest()
    write_atomic(out / SERIES_FILE, "".join(f"{sp.filename}\n" for sp in series.patches))


def keep_header(original: str, files) -> str:
    """``original``'s text before its diff (mail header, message; a diffstat redone) + the new diff."""
    lines = original.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("diff --git ")
               or (line.startswith("--- ") and lines[i + 1 : i + 2] and lines[i + 1].startswith("+++ "))),
              len(lines))  # fmt: skip
    head = lines[:at]
    if "---" in head:  # format-patch's separator: a diffstat of the old diff follows it
        head = head[: len(head) - head[::-1].index("---")] + [diffstat(files).rstrip("\n"), ""]
    prefix = "\n".join(head) + "\n" if head else ""
    return prefix + render_diff(files)


def check(new_tree: BaseTree, out: Path, expected: dict[str, bytes | None]) -> dict:
    """The written series, re-parsed and applied to the new base, gives the rebase result."""
    from patchkit.split.proof import apply_entries

    tree, problems = apply_entries(new_tree, load_entries(out)) if (out / SERIES_FILE).is_file() else ({}, [])
    differences = list(problems)
    for path in sorted(set(tree) | set(expected)):
        want = expected.get(path, new_tree.read(path))
        got = tree[path][0] if path in tree else new_tree.read(path)
        if want != got:
            differences.append(f"{path}: new base + rebased series differs from the rebase result")
    return {"ok": not differences, "files_checked": len(set(tree) | set(expected)),
            "differences": differences,
            "method": "rebased series re-parsed from disk and applied in order to the new base, "
                      "compared file by file with the merge results"}  # fmt: skip


def _write_files(root: Path, files: dict[str, bytes | None]) -> None:
    for rel, data in files.items():
        full = root / rel
        if data is None:
            full.unlink(missing_ok=True)
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(data)


def _write_report(job: Job, path: Path) -> None:
    job.report.tally()
    _dump(path, job.report.to_dict())
    if job.json_out is not None:
        _dump(job.json_out, job.report.to_dict())


def _dump(path: Path, record: dict) -> None:
    write_atomic(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def _tree(base: Path | None, pin_file: Path | None, flag: str) -> tuple[BaseTree, Pin]:
    from patchkit.commands.split import resolve_base

    if base is None and pin_file is None:
        raise UserError(f"no base: pass {flag} PIN or {flag}-base DIR")
    return resolve_base(base, pin_file)


def _old_tree(source: SourceSeries, base: Path | None, pin_file: Path | None,
              series_dir: Path) -> tuple[BaseTree, Pin]:  # fmt: skip
    if base is not None or pin_file is not None:
        return _tree(base, pin_file, "--from")
    pin = source.base
    if pin is None:
        raise UserError("the series has no split.json base pin: pass --from PIN or --from-base DIR",
                        str(series_dir))  # fmt: skip
    if pin.source == "path" and pin.path and Path(pin.path).is_dir():
        return BaseTree(Path(pin.path)), pin  # used in place: the old base is only read
    from patchkit.base.pin import prepare_base

    return BaseTree(prepare_base(pin)), pin


def _default_series_dir() -> Path:
    from patchkit.config import project_config

    return project_config().series.dir
