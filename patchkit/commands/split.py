"""``patchkit split``: replay files → one patch per domain, with the lossless proof."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from patchkit import git, output
from patchkit.atomic import write_atomic
from patchkit.base.tree import BaseTree, detect_prefix
from patchkit.diff.mail import parse_address
from patchkit.diff.parse import parse_files
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.series.files import (
    STAGING,
    load_entries,
    publish_series,
    record_json,
    series_record,
    staging_dir,
    write_series,
)
from patchkit.split.depends import compute_dependencies
from patchkit.split.layout import check_layout
from patchkit.split.prefix import check_series, problem_text
from patchkit.split.proof import prove
from patchkit.split.replay import split_replay
from patchkit.split.rules import load_rules
from patchkit.split.witness import PendingWitness, Witness
from patchkit.upstream.meta import MERGIFY, read_upstream
from patchkit.values import Pin


def resolve_base(base: Path | None, pin_file: Path | None) -> tuple[BaseTree, Pin]:
    """The base tree from ``--base DIR`` or from a pin (``--config patchkit.toml``)."""
    if base is not None and pin_file is not None:
        raise UserError("give --base or --config, not both")
    if base is not None:
        return BaseTree(base), Pin(source="path", path=str(base.resolve()))
    from patchkit.base.pin import prepare_base
    from patchkit.config import find_project_config, load_pin

    config_path = pin_file or find_project_config(Path.cwd())
    if config_path is None:
        raise UserError("no base: pass --base DIR or --config patchkit.toml (none found from here up)")
    pin = load_pin(config_path)
    return BaseTree(prepare_base(pin)), pin


def project_inputs(replays: list[Path] | None, rules: Path | None,
                   pin_file: Path | None) -> tuple[list[Path], Path | None]:  # fmt: skip
    """The replays and the rules file: the ones named, else the project's ``[series] replays`` and
    ``[series] rules`` (``--config``'s file, else the patchkit.toml found from here up) — the rules
    ``audit`` and ``ci buildkite`` classify with, so a split and its audit name the same domains."""
    if replays and rules is not None:  # both named: no patchkit.toml to read
        return list(replays), rules
    from patchkit.config import load_config, project_config

    config = load_config(pin_file) if pin_file else project_config()
    replays = list(replays) if replays else list(config.series.replays)
    if not replays:
        where = f"[series] replays in {config.file}" if config.file else "[series] replays in a patchkit.toml"
        raise UserError(f"no replay to split: name the mbox / format-patch / diff files, or set {where}")
    return replays, rules if rules is not None else config.series.rules


def run(replays: list[Path] | None, base: Path | None, pin_file: Path | None, rules: Path | None,
        out: Path, explain: bool, json_out: Path | None, root: str | None,
        overlay_threshold: float | None = None, author: str | None = None) -> int:  # fmt: skip
    started = time.perf_counter()
    if overlay_threshold is not None and not 0 < overlay_threshold <= 1:
        raise UserError(f"--overlay-threshold {overlay_threshold}: expected 0 < F <= 1, e.g. 0.6")
    replays, rules = project_inputs(replays, rules, pin_file)
    _check_out(out, replays)
    replay = parse_files(replays)
    tree, pin = resolve_base(base, pin_file)
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
        supplied = supplied_author(author) if any(c is None for c in replay.commits) else None
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
        publish_series(out, staging, written, record)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if json_out is not None:
        write_atomic(json_out, record)
    output.split_summary(result.series, replay, out, time.perf_counter() - started, explain)
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


def _normalise_root(root: str) -> str:
    root = root.strip("/")
    return f"{root}/" if root and root != "." else ""
