"""``patchkit apply``: a series (and overlays) onto a checkout or an installed vllm, all or nothing."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.apply import plan as apply
from patchkit.atomic import write_atomic
from patchkit.errors import EXIT_OK, CheckFailed, UserError
from patchkit.project import Project
from patchkit.txn import journal
from patchkit.txn.lock import remove_if_idle, target_lock
from patchkit.ui.console import verbosity

TARGETS = ("checkout", "site-packages")


@dataclass
class Options:
    series_dir: Path | None = None
    target: str = "checkout"
    path: Path | None = None
    python: str | None = None
    site_packages: Path | None = None
    check: bool = False
    reverse: bool = False
    recover: bool = False
    force: bool = False
    json_out: Path | None = None
    lock_timeout: float = 30
    strict_index: bool = False


def resolve_target(
    kind: str, path: Path | None, python: str | None, site_packages: Path | None
) -> apply.Target:
    if kind not in TARGETS:
        raise UserError(f"--target must be one of {', '.join(TARGETS)}, got {kind!r}")
    if kind == "checkout":
        if python or site_packages:
            raise UserError("--python / --site-packages go with --target site-packages")
        return apply.checkout_target(path if path is not None else checkout_here(Path.cwd()))
    if path is not None:
        raise UserError("--path goes with --target checkout")
    if python and site_packages:
        raise UserError("give --python or --site-packages, not both")
    return apply.site_packages_target(python, site_packages)


def checkout_here(cwd: Path) -> Path:
    """The checkout ``--path`` defaults to: the nearest directory at or above ``cwd`` that holds a vLLM
    source tree (``vllm/__init__.py``) or a series patchkit applied (its state dir). An installed
    ``vllm`` (a ``*.dist-info`` beside it) is no checkout; nothing found is an error, never a guess."""
    for here in (cwd, *cwd.parents):
        # a .patchkit/ that holds apply's state (not a project's own state dir, project.STATE_DIR)
        applied = (here / ".git" / "patchkit").is_dir() or any(
            (here / ".patchkit" / name).exists()
            for name in (apply.STATE_NAME, apply.BASE_DIR, journal.JOURNAL_NAME)
        )
        if applied or (here / "vllm" / "__init__.py").is_file():
            if any(here.glob("vllm-*.dist-info")):
                raise UserError(f"{here} is an installed vllm: pass --target site-packages "
                                f"--site-packages {here}")  # fmt: skip
            return here
    raise UserError(f"--target checkout needs --path DIR (no vLLM checkout at or above {cwd})")


def recover_note(target: apply.Target) -> None:
    """Recover an interrupted transaction; CheckFailed when someone's edits were kept (partial)."""
    if recovery := journal.recover(target.state_dir):
        output.info(f"recovered: {recovery.note}")
        for path in recovery.kept:
            output.error(f"{path}: changed by someone else since the crash; kept")
        if recovery.kept:
            raise CheckFailed(f"recovery was partial: {len(recovery.kept)} file(s) kept as found; "
                              "check them, then run the command again")  # fmt: skip


def series_version(project: Project, series_dir: Path) -> tuple[str | None, str]:
    """The vllm version the series is pinned to, and where that was read."""
    from patchkit.series.files import load_split_json

    series = load_split_json(series_dir)
    if series is not None and series.base.version:
        return series.base.version, str(series_dir / "split.json")
    if project.owns(series_dir) and project.config.target is not None and project.config.target.version:
        return project.config.target.version, str(project.config_file)
    return None, ""


def check_version(project: Project, target: apply.Target, series_dir: Path, force: bool) -> str:
    if target.dist is None:
        return ""
    pinned, where = series_version(project, series_dir)
    installed = target.dist.version
    if pinned is None:
        return f"series pin names no version; installed {installed} not checked"
    from patchkit.versions import installed_matches

    matches, note = installed_matches(installed, pinned)
    if matches:
        return f"installed {installed} matches the pin {pinned} ({where})" + (f": {note}" if note else "")
    reason = f"installed {target.dist.name} {installed} is not the pinned {pinned} ({where})"
    if not force:
        raise CheckFailed(f"{reason}; pass --force to apply anyway")
    return f"{reason}; applying anyway (--force)"


def run(project: Project, options: Options) -> int:
    check, reverse, recover, json_out = options.check, options.reverse, options.recover, options.json_out
    target = resolve_target(options.target, options.path, options.python, options.site_packages)
    output.info(f"target: {target.describe()}")
    report: dict = {"command": "apply", "target": target.to_dict(), "check": check, "reverse": reverse}
    # --check writes nothing, not even the lock file, when nothing was ever applied here
    lock = (contextlib.nullcontext() if check and not target.state_dir.exists()
            else target_lock(target.state_dir, options.lock_timeout, target.describe()))  # fmt: skip
    try:
        with lock:
            if check:
                apply.require_no_journal(target)
            else:
                recover_note(target)
            if recover:
                report["action"] = "recovered"
            elif reverse:
                _reverse(target, options.series_dir, check, options.force, report)
            else:
                _apply(project, project.series(options.series_dir), target, options, report,
                       hashes=json_out is not None or verbosity() > 0)  # fmt: skip
    except (UserError, CheckFailed):
        if not (check or reverse or recover):
            apply.drop_if_unapplied(target)  # "nothing was changed" leaves nothing behind either
        raise
    if reverse and not check:
        remove_if_idle(target.state_dir, keep=(apply.BASE_DIR,))
    if json_out is not None:
        write_atomic(json_out, json.dumps(report, indent=1) + "\n")
    return EXIT_OK


def _apply(project: Project, series_dir: Path, target: apply.Target, options: Options, report: dict,
           hashes: bool = True) -> None:  # fmt: skip
    """``hashes``: each changed file's sha256 before and after, for ``--json`` and ``-v`` (the plain
    listing needs none)."""
    from patchkit.series.files import load_entries, load_overlays  # status does not read a series

    check = options.check
    entries = load_entries(series_dir)
    overlays = load_overlays(*[d for d in (series_dir, project.overlay_root(series_dir)) if d is not None])
    identity = apply.series_identity(entries, overlays)
    report["series_dir"] = str(series_dir)
    state = apply.load_state(target)
    if state is not None:
        if state["patches"] != identity:
            raise CheckFailed(f"{target.describe()} already has the series from {state['series_dir']} "
                              "applied (different patches); reverse it first")  # fmt: skip
        if drifted := apply.drift(target, state):
            raise CheckFailed(f"the series is applied but {len(drifted)} file(s) changed since: {drifted[0]}")
        output.info(f"already applied: {len(entries)} patch(es) from {state['series_dir']}; nothing to do")
        report["action"] = "already-applied"
        return
    if note := check_version(project, target, series_dir, options.force):
        output.info(note)
    plan = apply.plan_series(target, entries, overlays, options.strict_index)
    for name, rels in plan.skipped_by_patch.items():
        output.info(f"skipped (not part of the installed package): {name}: {', '.join(rels)}")
    for note in plan.warnings:
        output.info(f"warning: {note}")
    files = _files(plan, hashes)
    report.update(skipped=plan.skipped, problems=plan.problems, warnings=plan.warnings, files=files)
    if plan.problems:
        for problem in plan.problems:
            output.error(f"preimage mismatch: {problem}")
        raise CheckFailed(f"{len(plan.problems)} preimage mismatch(es); nothing was changed")
    _print_files(files)
    if check:
        output.info(f"check: {len(entries)} patch(es), {len(overlays)} overlay(s) would change "
                    f"{len(plan.changes)} file(s); nothing written")  # fmt: skip
        report["action"] = "check"
        return
    state = apply.new_state(target, series_dir, identity)
    for note in apply.commit_plan(target, plan, state):
        output.info(note)
    output.info(f"applied {len(entries)} patch(es), {len(overlays)} overlay(s): "
                f"{len(plan.changes)} file(s) changed; state in {target.state_dir}")  # fmt: skip
    report["action"] = "applied"


def _reverse(target: apply.Target, series_dir: Path | None, check: bool, force: bool, report: dict) -> None:
    state = apply.load_state(target)
    if state is None:
        output.info("nothing applied; nothing to reverse")
        report["action"] = "nothing-applied"
        return
    if series_dir is not None:
        from patchkit.series.files import load_entries, load_overlays

        identity = apply.series_identity(load_entries(series_dir), load_overlays(series_dir))
        if [p for p in identity if not p["name"].startswith("overlay:")] != [
            p for p in state["patches"] if not p["name"].startswith("overlay:")
        ]:
            raise CheckFailed(f"the series applied to {target.describe()} is from {state['series_dir']}, "
                              f"not the patches in {series_dir}; nothing was changed")  # fmt: skip
    plan = apply.reverse_plan(target, state, force)
    files = _files(plan)
    report.update(problems=plan.problems + plan.blocked, files=files)
    if plan.blocked:
        for problem in plan.blocked:
            output.error(problem)
        raise CheckFailed(f"cannot reverse: the pre-apply bytes of {len(plan.blocked)} file(s) are lost "
                          "(restore them from the package or VCS by hand); nothing was changed")  # fmt: skip
    if plan.problems:
        for problem in plan.problems:
            output.error(problem)
        raise CheckFailed(f"cannot reverse: {len(plan.problems)} file(s) changed since apply "
                          "(--force restores the base bytes anyway); nothing was changed")  # fmt: skip
    _print_files(files)
    if check:
        output.info(f"check: reversing would restore {len(plan.changes)} file(s); nothing written")
        report["action"] = "check"
        return
    for note in apply.commit_reverse(target, plan, state):
        output.info(note)
    output.info(f"reversed the series from {state['series_dir']}: {len(plan.changes)} file(s) restored")
    report["action"] = "reversed"


def _files(plan: apply.Plan, hashes: bool = True) -> list[dict]:
    out = []
    for rel, (old, new, _, _) in plan.changes.items():
        change = "added" if old is None else "removed" if new is None else "modified"
        item = {"path": rel, "change": change}
        if hashes:
            item.update(pre_sha256=journal.sha256(old), post_sha256=journal.sha256(new))
        out.append(item)
    return out


def _print_files(files: list[dict]) -> None:
    for item in files:
        output.info(f"  {item['change']:<8} {item['path']}")
        if "pre_sha256" in item:
            output.detail(f"           sha256 {item['pre_sha256'] or '-'} -> {item['post_sha256'] or '-'}")
