"""``patchkit rebase``: carry a series to a new base; stop on conflicts like ``git rebase``.

``OUT/.rebase/state.json`` exists from the start (``rebase/state``); nothing else of ``--out`` is
touched until the finished series is published in one transaction (``rebase/publish``), so
``--abort`` only removes what the rebase wrote. On a conflict ``.rebase/`` holds the report so far
and ``worktree`` (a git repo of the new base + rebased patches before the stop, with the stopped
patch's merge result and conflict markers left uncommitted); ``--continue`` takes it as
``rebase/worktree`` says.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import git, output
from patchkit.analysis.depends import compute_dependencies
from patchkit.atomic import write_atomic
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import diffstat, render_diff
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.project import Project
from patchkit.rebase import publish, state, worktree
from patchkit.rebase.merge import Rebaser, SourceSeries, load_source, rebased_series
from patchkit.rebase.outcome import PatchOutcome, RebaseReport, describe_pin, print_summary
from patchkit.rebase.state import STATE_DIR
from patchkit.rebase.worktree import digest
from patchkit.series.files import SERIES_FILE, SPLIT_JSON, format_patch, load_entries, series_record
from patchkit.series.model import SplitPatch
from patchkit.txn.journal import step
from patchkit.values import Pin

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
    out_created: bool

    @property
    def state_dir(self) -> Path:
        return self.out / STATE_DIR

    def rebaser(self) -> Rebaser:
        labels = (f"new base {describe_pin(self.new_pin)}", f"old base {describe_pin(self.old_pin)}")
        return Rebaser(self.source, self.old_tree, self.new_tree, labels)


@dataclass
class Options:
    series_dir: Path | None = None
    to: str | None = None  # a pin in any form (project.parse_pin)
    to_base: Path | None = None
    from_: str | None = None
    from_base: Path | None = None
    out: Path = Path("rebase-out")
    continue_: bool = False
    abort: bool = False
    json_out: Path | None = None
    accept_delete: bool = False


def run(project: Project, options: Options) -> int:
    started = time.perf_counter()
    series_dir, to_pin, to_base, from_pin, from_base = (options.series_dir, options.to, options.to_base,
                                                        options.from_, options.from_base)  # fmt: skip
    out, cont, abort, json_out = options.out, options.continue_, options.abort, options.json_out
    accept_delete = options.accept_delete
    if cont and abort:
        raise UserError("give --continue or --abort, not both")
    out = Path(os.path.abspath(out))
    if abort:
        return abort_rebase(out)
    if cont:
        return continue_rebase(out, json_out, accept_delete, started)
    if state.load(out) is not None:
        raise UserError("a rebase is in progress here: run with --continue or --abort", str(out / STATE_DIR))
    state.remove_leftovers(out)
    series_dir = project.series(series_dir)
    if os.path.lexists(out) and not out.is_dir():
        raise UserError("--out is not a directory", str(out))
    if out.is_dir() and out.resolve() == series_dir.resolve():
        raise UserError("--out is the series directory itself: the series would be rewritten file by file "
                        "while it is read; give a new directory", str(out))  # fmt: skip
    source = load_source(series_dir)
    if to_pin is None and to_base is None:
        raise UserError("no new base: pass --to PIN or --to-base DIR")
    new_tree, new_pin = project.tree(to_base, to_pin, "--to")
    old_tree, old_pin = _old_tree(project, source, from_base, from_pin, series_dir)
    if out.is_dir():
        publish.refuse_foreign(out, [sp.filename for sp in source.patches] + list(OWN_FILES))
    report = RebaseReport(str(series_dir), str(out), old_pin, new_pin)
    job = Job(series_dir.resolve(), out, source, old_pin, new_pin, old_tree, new_tree, report,
              [], json_out, not os.path.lexists(out))  # fmt: skip
    state.begin(out, _state(job, "running"))
    step("rebase:begun")
    return drive(job, (job.rebaser(), 0), started)


OWN_FILES = (SERIES_FILE, SPLIT_JSON, REPORT_JSON)


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


def _state(job: Job, phase: str, **extra) -> dict:
    return {"version": state.STATE_VERSION, "phase": phase, "series_dir": str(job.series_dir),
            "out_created": job.out_created,
            "old": {"pin": job.old_pin.to_dict(), "root": str(job.old_tree.root)},
            "new": {"pin": job.new_pin.to_dict(), "root": str(job.new_tree.root)},
            "json_out": str(job.json_out) if job.json_out else None, **extra}  # fmt: skip


def stop(job: Job, rebaser: Rebaser, k: int, results: dict[str, bytes | None]) -> None:
    """Leave patch k's merge (with markers) in a worktree, then write the state to resume from:
    the worktree is built under another name and renamed in, the state saved after it."""
    building = job.state_dir / "worktree.new"
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(job.new_tree.root, building, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    _write_files(building, rebaser.new.files)
    git.init_with_commit(building, f"new base + rebased patches 1..{k}")
    _write_files(building, results)
    tree_dir = job.state_dir / "worktree"
    if os.path.lexists(tree_dir):
        os.rename(tree_dir, job.state_dir / "worktree.old")
    step("rebase:worktree-built")
    os.rename(building, tree_dir)
    shutil.rmtree(job.state_dir / "worktree.old", ignore_errors=True)
    job.report.status, job.report.worktree = "conflict", str(tree_dir)
    job.report.pending = [sp.filename for sp in job.source.patches[k + 1 :]]
    job.report.tally()
    written = {rel: digest(data) for rel, data in results.items()}
    saved = _state(job, "stopped", current=k, files=list(results), written=written,
                   conflicts=job.report.patches[-1].conflict_files,
                   rebased=[sp.to_dict() for sp in job.rebased], report=job.report.to_dict())  # fmt: skip
    state.save(job.out, saved)
    step("rebase:stopped")
    _write_report(job, job.state_dir / REPORT_JSON)


def _job(out: Path, saved: dict, json_out: Path | None) -> Job:
    try:
        series_dir = Path(saved["series_dir"])
        json_out = json_out or (Path(saved["json_out"]) if saved.get("json_out") else None)
        report = (RebaseReport.from_dict(saved["report"]) if "report" in saved else
                  RebaseReport(str(series_dir), str(out), Pin.from_dict(saved["old"]["pin"]),
                               Pin.from_dict(saved["new"]["pin"])))  # fmt: skip
        return Job(series_dir, out, load_source(series_dir), Pin.from_dict(saved["old"]["pin"]),
                   Pin.from_dict(saved["new"]["pin"]), BaseTree(Path(saved["old"]["root"])),
                   BaseTree(Path(saved["new"]["root"])), report,
                   [SplitPatch.from_dict(d) for d in saved.get("rebased", [])], json_out,
                   bool(saved["out_created"]))  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"the rebase state is unreadable ({exc!r:.80}); run patchkit rebase --abort",
                        str(out / STATE_DIR / state.STATE_FILE)) from None  # fmt: skip


def continue_rebase(out: Path, json_out: Path | None, accept_delete: bool, started: float) -> int:
    saved = state.load(out)
    if saved is None:
        state.remove_leftovers(out)
        raise UserError("no rebase in progress (no .rebase/state.json)", str(out))
    job = _job(out, saved, json_out)
    phase = saved["phase"]
    if phase in ("publishing", "published"):
        return _publish(job, saved.get("entries", {}), started)
    if phase == "running":  # killed before it stopped or finished: start again (nothing was written)
        publish.recover(out)
        job.report.patches, job.rebased = [], []
        return drive(job, (job.rebaser(), 0), started)
    if phase != "stopped":
        raise UserError(f"the rebase state is unreadable (phase {phase!r}); run patchkit rebase --abort",
                        str(out / STATE_DIR))  # fmt: skip
    return drive(job, resume(job, saved, accept_delete), started)


def resume(job: Job, saved: dict, accept_delete: bool) -> tuple[Rebaser, int]:
    """Take patch k's files from the worktree (see ``rebase/worktree``) and go on with k+1."""
    k = saved["current"]
    results = worktree.take(job.state_dir / "worktree", saved["files"], saved.get("written", {}),
                            saved["conflicts"], accept_delete)  # fmt: skip
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
    """Undo everything the rebase wrote, nothing else; a killed abort is finished by the next."""
    try:
        saved = state.load(out)
    except UserError:  # unreadable: the journal still rolls back a publish that was cut short
        publish.recover(out)
        state.clear(out, False)
        output.info(f"rebase state was unreadable; removed {out / STATE_DIR}, the other files of {out} kept")
        return EXIT_OK
    if saved is None:
        if state.remove_leftovers(out):
            output.info(f"removed what a killed rebase left in {out}")
            return EXIT_OK
        raise UserError("no rebase in progress (no .rebase/state.json)", str(out))
    entries = saved.get("entries", {}) if saved["phase"] in ("publishing", "published") else {}
    kept = publish.restore(out, entries)
    step("abort:restored")
    state.clear(out, bool(saved.get("out_created")))
    for name in kept:
        output.error(f"{out / name} changed since the rebase wrote it; kept as it is")
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
    files = render_rebased(series, rebased_from, job.source.foreign)
    result = publish.stage(job.out, files)
    job.report.proof = check(job.new_tree, result, rebaser.new.files)
    series.proof = job.report.proof
    job.report.status, job.report.worktree, job.report.pending = "done", None, []
    job.report.tally()
    (result / SPLIT_JSON).write_bytes(_json(series_record(series)))
    (result / REPORT_JSON).write_bytes(_json(job.report.to_dict()))
    entries = publish.plan(job.out)
    step("rebase:planned")
    state.save(job.out, _state(job, "publishing", entries=entries, report=job.report.to_dict()))
    step("rebase:publishing")
    return _publish(job, entries, started)


def _publish(job: Job, entries: dict, started: float) -> int:
    """The staged result into --out in one transaction, then the state removed."""
    if not publish.published(job.out, entries):
        publish.publish(job.out, entries)
    state.save(job.out, _state(job, "published", entries=entries, report=job.report.to_dict()))
    step("rebase:published")
    if job.json_out is not None:
        _dump(job.json_out, job.report.to_dict())
    state.clear(job.out, False)
    print_summary(job.report, time.perf_counter() - started)
    for problem in job.report.proof.get("differences", []):
        output.error(f"check: {problem}")
    return EXIT_OK if job.report.proof.get("ok") else EXIT_FAILED


def render_rebased(series, trailer: str, foreign: dict[str, str] | None = None) -> dict[str, bytes]:
    """Patches in format-patch form (authorship and trailers kept, the rebase trailer added) and the
    ``series`` file, by name; a patch patchkit did not write keeps its name and its own header and
    message, only its diff (and diffstat) change."""
    import hashlib

    files: dict[str, bytes] = {}
    for sp in series.patches:
        if sp.filename in (foreign or {}):
            data = keep_header(foreign[sp.filename], sp.files).encode("utf-8", errors="surrogateescape")
        else:
            text = format_patch(sp, len(series.patches), render_diff(sp.files), series.commits)
            head, sep, tail = text.partition("\n---\n")
            data = f"{head}\n{trailer}{sep}{tail}".encode("utf-8", errors="surrogateescape")
        files[sp.filename] = data
        sp.sha256 = hashlib.sha256(data).hexdigest()
    files[SERIES_FILE] = "".join(f"{sp.filename}\n" for sp in series.patches).encode()
    return files


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


def _json(record: dict) -> bytes:
    return (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode()


def _dump(path: Path, record: dict) -> None:
    write_atomic(path, _json(record))


def _old_tree(project: Project, source: SourceSeries, base: Path | None, pin: str | None,
              series_dir: Path) -> tuple[BaseTree, Pin]:  # fmt: skip
    if base is not None or pin is not None:
        return project.tree(base, pin, "--from")
    pin = source.base
    if pin is None:
        raise UserError("the series has no split.json base pin: pass --from PIN or --from-base DIR",
                        str(series_dir))  # fmt: skip
    if pin.source == "path" and pin.path and Path(pin.path).is_dir():
        return BaseTree(Path(pin.path)), pin  # used in place: the old base is only read
    from patchkit.base.pin import prepare_base

    return BaseTree(prepare_base(pin)), pin
