"""``patchkit split``: replay files → one patch per domain, with the lossless proof."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import git, output
from patchkit.analysis.depends import compute_dependencies
from patchkit.atomic import write_atomic
from patchkit.base.tree import detect_prefix
from patchkit.diff.mail import parse_address
from patchkit.diff.parse import parse_files
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.project import REPLACED_DIR, Project
from patchkit.series.files import (
    MANIFEST,
    OVERLAY_DIR,
    OVERLAY_KEYWORD,
    SERIES_FILE,
    SPLIT_JSON,
    SPLIT_TXN,
    STAGING,
    load_entries,
    publish_series,
    record_json,
    series_record,
    staging_dir,
    write_series,
)
from patchkit.split.layout import check_layout
from patchkit.split.prefix import check_series, problem_text
from patchkit.split.proof import prove
from patchkit.split.replay import split_replay
from patchkit.split.rules import load_rules
from patchkit.split.witness import PendingWitness, Witness
from patchkit.upstream.meta import MERGIFY, read_upstream


@dataclass
class Options:
    replays: list[Path] | None = None
    rules: Path | None = None
    out: Path | None = None  # default: the project's series dir, where audit and apply read
    replace: bool = False  # a series already in ``out`` is replaced (a copy kept in the state dir)
    explain: bool = False
    json_out: Path | None = None
    root: str | None = None
    overlay_threshold: float | None = None
    author: str | None = None


def project_inputs(project: Project, replays: list[Path] | None,
                   rules: Path | None) -> tuple[list[Path], Path | None]:  # fmt: skip
    """The replays and the rules file: the ones named, else the project's ``[series] replays`` and
    ``[series] rules`` — the rules ``audit`` and ``ci buildkite`` classify with, so a split and its
    audit name the same domains."""
    if replays and rules is not None:  # both named: no patchkit.toml to read
        return list(replays), rules
    config = project.config
    replays = list(replays) if replays else list(config.series.replays)
    if not replays:
        where = f"[series] replays in {config.file}" if config.file else "[series] replays in a patchkit.toml"
        raise UserError(f"no replay to split: name the mbox / format-patch / diff files, or set {where}")
    return replays, rules if rules is not None else config.series.rules


def run(project: Project, options: Options) -> int:
    started = time.perf_counter()
    overlay_threshold, json_out, root = options.overlay_threshold, options.json_out, options.root
    if overlay_threshold is not None and not 0 < overlay_threshold <= 1:
        raise UserError(f"--overlay-threshold {overlay_threshold}: expected 0 < F <= 1, e.g. 0.6")
    replays, rules = project_inputs(project, options.replays, options.rules)
    out = options.out if options.out is not None else project.series_dir
    _check_out(out, replays)
    replay = parse_files(replays)
    replaced = replaced_series(out)
    if replaced and not options.replace:
        raise UserError(f"{out} holds a series already ({len(replaced)} file(s)): write this split elsewhere "
                        f"with --out DIR, or replace it with --replace (a copy is kept in "
                        f"{project.state_dir / REPLACED_DIR})")  # fmt: skip
    tree, pin = project.base()
    domains = load_rules(rules)
    prefix = _normalise_root(root) if root is not None else detect_prefix(replay, tree)
    check_layout(replay, tree, prefix)
    meta = read_upstream(tree.root)
    if meta.missing:
        output.info(
            f"the base has no {', '.join(meta.missing)}: domains come from the rules only"
            if MERGIFY in meta.missing
            else f"the base has no {', '.join(meta.missing)}"
        )
    pending = PendingWitness(tree, replays, replay, prefix)  # git's side of the proof, in a thread
    try:
        result = split_replay(replay, tree, domains, prefix, pin, overlay_threshold, background_checks=True,
                              labels=meta.labels)  # fmt: skip
    except BaseException:
        pending.cancel()
        raise
    try:  # the step check runs beside dependencies, writing and the proof
        compute_dependencies(tree, result.series.patches, result.overlays)
        supplied = supplied_author(options.author) if any(c is None for c in replay.commits) else None
        staging = staging_dir(out)  # written and proven here; --out changes only in publish_series
        # scratch: publish_series's transaction is what writes --out durably (one fsync per file)
        written = write_series(staging, result.series, result.texts, result.overlays, record=False,
                               supplied=supplied, durable=False)  # split.json below  # fmt: skip
        entries = load_entries(staging)
        if all(entry.overlay is None for entry in entries):
            pending.start_series([entry.path for entry in entries])  # git works beside the proof
        proof = prove(tree, entries, result.states)
        final = {path: state.post for path, state in result.states.items()}
        prefixes = check_series(tree, entries, final)  # every state base + patches[1..k]
        witnessed = _witness(pending, entries, result.states)
    except BaseException:
        shutil.rmtree(out / STAGING, ignore_errors=True)
        raise
    finally:
        pending.cancel()
        result.finish()
    witness, prefix_record = witnessed.to_dict(), prefixes.to_dict()
    result.series.proof = {**proof.to_dict(), "git_witness": witness, "prefixes": prefix_record}
    record = record_json(series_record(result.series))
    try:
        old = own_files(out) if replaced else set()
        kept = keep_replaced(project, out, replaced) if replaced else None
        publish_series(out, staging, written, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if kept is not None:
        drop_replaced(project, out, old)
        output.info(f"replaced the series in {out}; the old one is kept in {kept}")
    if json_out is not None:
        write_atomic(json_out, record)
    output.split_summary(result.series, replay, out, time.perf_counter() - started, options.explain)
    if witnessed.ran:
        trees = (witnessed.replay_tree[:12], witnessed.series_tree[:12], witnessed.patchkit_tree[:12])
        output.detail("git witness: replay tree {}, series tree {}, patchkit tree {}".format(*trees))
    else:
        output.info(f"git witness could not run: {witnessed.reason}")
    output.detail(f"prefix check: {prefixes.seconds:.2f} s, undefined names: {prefixes.undefined_names}")
    for record in prefixes.replay_findings:
        output.info(f"finding of the replay (its own final state has it too): {problem_text(record)}")
    if not proof.ok or not prefixes.ok:
        for line in proof.differences:
            output.error(f"proof: {line}")
        for record in prefixes.failures:
            output.error(f"prefix: {problem_text(record)}")
        return EXIT_FAILED
    if witnessed.ran and not witnessed.ok:
        where = witnessed.first_difference or witnessed.reason
        output.error(f"proof: git witness disagrees at {where}")
        return EXIT_FAILED
    return EXIT_OK


def _witness(pending: PendingWitness, entries: list, states: dict) -> Witness:
    if any(entry.overlay is not None for entry in entries):
        reason = "the series holds overlays (whole files), which git apply cannot take"
        return Witness(False, False, reason=reason)
    expected = {path: (state.post, state.post_mode) for path, state in states.items()}
    return pending.finish(expected)


def supplied_author(option: str | None) -> tuple[str, str, str] | None:
    """The author for patches made of loose diffs only: ``--author "Name <email>"``, else the
    user's git config; None when neither says (the patch then has no mail header)."""
    if option is not None:
        name, mail = parse_address(option)
        if not name or "@" not in mail:
            raise UserError(f'--author {option!r}: expected "Name <email>"')
        return name, mail, "--author"
    name = git.run(["config", "user.name"], check=False).stdout.decode().strip()
    mail = git.run(["config", "user.email"], check=False).stdout.decode().strip()
    return (name, mail, "git config user.name/user.email") if name and mail else None


def _check_out(out: Path, replays: list[Path]) -> None:
    """Refuse an ``--out`` that is a file or holds an input: split rewrites its directory."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a directory")
    home = out.resolve()
    for replay in replays:
        if replay.resolve().is_relative_to(home):
            raise UserError(f"--out {out} holds the input {replay}; write the series to another directory")


def replaced_series(out: Path) -> list[str]:
    """The files of the series ``out`` holds (its own, overlays/ included), [] when it holds none;
    a split into it that was cut short is rolled back first, as the next publish would."""
    if os.path.lexists(out / SPLIT_TXN / "journal.json"):
        from patchkit.txn import journal

        journal.recover(out / SPLIT_TXN)
    if not (out / SERIES_FILE).is_file():
        return []
    names = [p.name for p in out.iterdir() if p.is_file() and not p.is_symlink()]
    overlays = out / OVERLAY_DIR
    if overlays.is_dir() and not overlays.is_symlink():
        names += [f"{OVERLAY_DIR}/{p.name}" for p in overlays.iterdir() if p.is_file() and not p.is_symlink()]
    return sorted(names)


def keep_replaced(project: Project, out: Path, names: list[str]) -> Path:
    """A copy of the series ``split --replace`` is about to replace, under
    ``<state dir>/replaced/<time>-<dir name>/``: built beside it and renamed in whole
    (``txn.transaction.replace_dir_atomically``), so it is there entire or not at all."""
    from patchkit.txn.transaction import read_nofollow, replace_dir_atomically

    parent = project.ensure_state_dir() / REPLACED_DIR
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{out.resolve().name}"
    home = parent / stamp
    for n in range(2, 1000):
        if not os.path.lexists(home):
            break
        home = parent / f"{stamp}-{n}"
    try:
        contents = {name: read_nofollow(out / name)[0] for name in names}
        replace_dir_atomically(home, {name: data for name, data in contents.items() if data is not None})
    except (OSError, UserError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot keep a copy of the series in {home} ({reason}); nothing was replaced, "
                        "the previous version is kept", str(out)) from None  # fmt: skip
    return home


def own_files(out: Path) -> set[str]:
    """What the series in ``out`` is made of: its series file, what that lists, split.json, and what
    the split that wrote it recorded (its manifest). Other files of the directory are not its."""
    import json

    names = {SERIES_FILE, SPLIT_JSON}
    try:  # read leniently: a patch the user deleted by hand is no reason to stop
        listed = (out / SERIES_FILE).read_text("utf-8", errors="replace").splitlines()
    except OSError:
        listed = []
    for line in listed:
        words = line.split("#", 1)[0].split()
        names.update(words[1:2] if words[:1] == [OVERLAY_KEYWORD] else words[:1])
    try:
        names |= set(json.loads((out / MANIFEST).read_text("utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return {n for n in names if isinstance(n, str) and ".." not in Path(n).parts and not n.startswith("/")}


def drop_replaced(project: Project, out: Path, old: set[str]) -> None:
    """After the new series is published: the old series' files the new one does not have."""
    from patchkit.txn.transaction import Transaction

    with Transaction(project.state_dir / "txn", out) as txn:
        for name in sorted(old - own_files(out)):
            if (out / name).is_file() and not (out / name).is_symlink():
                txn.remove(out / name)


def _normalise_root(root: str) -> str:
    root = root.strip("/")
    return f"{root}/" if root and root != "." else ""
