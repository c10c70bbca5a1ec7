"""A work tree's patch commits written back as a series dir (beside the old one, for the swap),
then checked: the proof (patchkit's engine), git as witness (tree ids), the prefix checks."""

from __future__ import annotations

import email.header
import email.utils
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import __version__
from patchkit.analysis.depends import compute_dependencies
from patchkit.atomic import write_atomic
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.edit import gitops
from patchkit.errors import CheckFailed, UserError
from patchkit.series.files import (
    MANIFEST,
    SERIES_FILE,
    SPLIT_JSON,
    load_entries,
    load_split_json,
    record_json,
    series_record,
)
from patchkit.series.model import SplitPatch
from patchkit.split.names import undefined_globals
from patchkit.split.prefix import check_series, series_states
from patchkit.split.proof import apply_entries


@dataclass
class Checks:
    proof_files: int = 0
    witness_tree: str = ""  # git apply --cached of the written series onto the base commit
    head_tree: str = ""  # the rebuilt last patch commit's tree
    prefix_states: int = 0
    prefix_failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "proof_files": self.proof_files,
            "witness_tree": self.witness_tree,
            "head_tree": self.head_tree,
            "prefix_states": self.prefix_states,
            "prefix_failures": self.prefix_failures,
        }


def staged_dir(series: Path) -> Path:
    return series.parent / f".{series.name}.patchkit-new"


def write_staged(
    repo: Path,
    series: Path,
    chain: list[tuple[str, str]],
    parent: str,
    edits: list[dict],
    base: BaseTree | None = None,
) -> Path:
    """Write ``chain`` ((file name, commit) in order, the first on ``parent``) as a new series dir;
    with ``base``, split.json's needs are computed again for the rewritten patches."""
    out = staged_dir(series)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    rewritten = {name for name, _ in chain}
    old_names = set(_listed(series))
    for item in series.iterdir():  # what is not ours to rewrite is carried over as it is
        if (
            item.name in rewritten
            or item.name in old_names
            or item.name in (SERIES_FILE, SPLIT_JSON, MANIFEST)
        ):
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.copytree(item, out / item.name, symlinks=True)
        elif item.is_file() and not item.is_symlink():
            shutil.copy2(item, out / item.name)
    previous = parent
    for number, (name, commit) in enumerate(chain, 1):
        old = series / name
        header = old.read_text("utf-8", "surrogateescape") if old.is_file() else None
        text = render_patch(repo, previous, commit, number, len(chain), header)
        write_atomic(out / name, text)
        previous = commit
    write_atomic(out / SERIES_FILE, "".join(f"{name}\n" for name, _ in chain))
    _write_record(series, out, chain, edits, base)
    files = sorted([name for name, _ in chain] + [SERIES_FILE, SPLIT_JSON])
    write_atomic(out / MANIFEST, json.dumps({"written_by": "patchkit edit", "files": files}, indent=1) + "\n")
    for path in [out, *[p for p in out.rglob("*") if p.is_dir()]]:
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return out


def _listed(series: Path) -> list[str]:
    try:
        return [
            ln.split()[0]
            for ln in (series / SERIES_FILE).read_text("utf-8").splitlines()
            if ln.strip() and not ln.startswith("#") and not ln.startswith("overlay")
        ]
    except OSError:
        return []


def render_patch(repo: Path, parent: str, commit: str, number: int, total: int, old: str | None) -> str:
    info = gitops.commit_info(repo, commit)
    subject, _, body = info["message"].partition("\n")
    body = body.strip("\n")
    head = _header(old, info, f"[PATCH {number}/{total}] {subject}")
    diff = gitops.run(
        repo,
        [
            "diff-tree",
            "-p",
            "--stat=80",
            "--summary",
            "--no-color",
            "--binary",
            "--no-renames",
            parent,
            commit,
        ],
    )
    stat, _, patch = diff.decode("utf-8", "surrogateescape").partition("\ndiff --git ")
    message = f"{body}\n" if body else ""
    return f"{head}\n\n{message}---\n{stat.strip(chr(10))}\n\ndiff --git {patch}-- \npatchkit {__version__}\n"


def _header(old: str | None, info: dict[str, str], subject: str) -> str:
    """The old patch's mail header with the new subject; a new patch gets the commit's author."""
    line = f"Subject: {_encode(subject)}"
    if old is not None and old.startswith("From "):
        lines, out, skipping = old.split("\n\n", 1)[0].split("\n"), [], False
        for raw in lines:
            if skipping and raw[:1] in (" ", "\t"):
                continue
            skipping = raw.lower().startswith("subject:")
            out.append(line if skipping else raw)
        return "\n".join(out)
    seconds, _, zone = info["GIT_AUTHOR_DATE"].partition(" ")
    sign = -1 if zone.startswith("-") else 1
    offset = sign * (int(zone[1:3] or 0) * 3600 + int(zone[3:5] or 0) * 60) if zone else 0
    date = email.utils.formatdate(int(seconds) + offset, localtime=False).replace("-0000", zone or "+0000")
    name, mail = info["GIT_AUTHOR_NAME"], info["GIT_AUTHOR_EMAIL"]
    who = email.utils.formataddr((name, mail)) if name.isascii() else f"{_encode(name)} <{mail}>"
    return "\n".join(
        [
            "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001",
            f"From: {who}",
            f"Date: {date}",
            line,
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=UTF-8",
            "Content-Transfer-Encoding: 8bit",
        ]
    )


def _encode(value: str) -> str:
    return value if value.isascii() else email.header.Header(value, "utf-8").encode()


def _write_record(series: Path, out: Path, chain: list[tuple[str, str]], edits: list[dict],
                  base: BaseTree | None = None) -> None:  # fmt: skip
    record = load_split_json(series)
    if record is None:
        return
    old = {p.filename: p for p in record.patches}
    patches = []
    for number, (name, _) in enumerate(chain, 1):
        text = (out / name).read_text("utf-8", "surrogateescape")
        files = [fp for patch in parse_text(text, name) for fp in patch.files]
        sp = old.get(name) or SplitPatch(number, _domain(name), {"en": _domain(name)}, name, [], [])
        sp.number, sp.files = number, files
        sp.sha256 = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
        patches.append(sp)
    names = {p.filename for p in patches}
    for sp in patches:  # a dropped patch is no longer needed first by anyone
        sp.depends_on = [d for d in sp.depends_on if any(p.domain == d for p in patches)]
    if base is not None and not any(sp.overlays for sp in patches):
        # an edit moves lines between patches: what each needs first (to apply, and to work) is
        # computed again; a need the split recorded with why and still unresolved stays
        for sp in patches:
            sp.needs_why = {d: w for d, w in sp.needs_why.items() if d in sp.depends_on}
        compute_dependencies(base, patches)
    record.patches = patches
    record.edits = [e for e in record.edits if e.get("patch") in names] + edits
    write_atomic(out / SPLIT_JSON, record_json(series_record(record)))


def record_checks(staged: Path, op: str, checks: Checks) -> None:
    """split.json's ``proof`` after an edit says what was proven of *this* series: base + series is
    the edit work tree's commit (file by file, and git's tree id), its prefix states; the split's own
    proof of the replay stays beside it as ``split_proof`` (it was true of the series before the
    edits, not of this one)."""
    path = staged / SPLIT_JSON
    if not path.is_file():
        return
    record = json.loads(path.read_text("utf-8"))
    old = record.get("proof") or {}
    split_proof = old.get("split_proof", old)  # an earlier edit's record keeps the split's
    record["proof"] = {
        "ok": not checks.prefix_failures,
        "of": f"patchkit {op}",
        "method": "base + the written series equals the edit work tree's commit, file by file; "
        "git apply --cached of the series gives its tree id; every prefix state checked",
        "files_checked": checks.proof_files,
        "git_witness": {"series_tree": checks.witness_tree, "work_tree_commit_tree": checks.head_tree},
        "prefixes": {"states": checks.prefix_states, "failures": checks.prefix_failures},
        "split_proof": split_proof,
    }
    write_atomic(path, record_json(record))


def _domain(name: str) -> str:
    stem = name.removesuffix(".patch")
    head, _, rest = stem.partition("-")
    return rest if head.isdigit() and rest else stem


def check(
    repo: Path, staged: Path, base: BaseTree, base_commit: str, head: str, before: set[str] | None = None
) -> Checks:
    """The proof, git's witness and the prefix checks of ``staged`` (CheckFailed on any failure).
    ``before``: prefix problems the old series already had (not this edit's)."""
    entries = load_entries(staged)
    checks = Checks(head_tree=gitops.tree_of(repo, head))
    tree, problems = apply_entries(base, entries)
    if problems:
        raise CheckFailed(f"the rewritten series does not apply: {problems[0]}")
    for path, (data, mode) in sorted(tree.items()):
        want = (
            gitops.run(repo, ["cat-file", "blob", f"{head}:{path}"], check=False)
            if data is not None
            else None
        )
        listed = gitops.text(repo, ["ls-tree", head, "--", path])
        if data is None and listed:
            raise CheckFailed(f"proof: {path} is deleted by the series but present in the work tree's commit")
        if data is not None and (want != data or not listed.startswith(mode or "100644")):
            raise CheckFailed(f"proof: base + series differs from the work tree at {path}")
        checks.proof_files += 1
    checks.witness_tree = _git_witness(repo, staged, entries, base_commit)
    if checks.witness_tree != checks.head_tree:
        raise CheckFailed(
            f"witness: git apply of the series gives tree {checks.witness_tree[:12]}, "
            f"the work tree's commit has {checks.head_tree[:12]}"
        )
    final = {path: data for path, (data, _) in tree.items()}
    result = check_series(base, entries, final)
    checks.prefix_states = result.states
    checks.prefix_failures = [f"{f['patch']}: {f['text']}" for f in result.failures]
    new = [f for f in result.failures if f["text"] not in (before or set())]
    if new:
        raise CheckFailed(f"prefix: the state after {new[0]['patch']} breaks: {new[0]['text']}")
    _undefined_names(base, entries, final)
    return checks


def _undefined_names(base: BaseTree, entries: list, final: dict) -> None:
    """No state reads a name nothing binds (pyflakes' F821, through ``split.names``) that neither
    the base nor the final state reads unbound: what an edit's order alone would break."""
    for name, files in series_states(base, entries):
        for path, data in sorted(files.items()):
            if not path.endswith(".py") or data is None:
                continue
            state = undefined_globals(data) or set()
            known = (undefined_globals(final.get(path) or b"") or set()) | (
                undefined_globals(base.read(path) or b"") or set()
            )
            missing = sorted(state - known)
            if missing:
                raise CheckFailed(
                    f"prefix: the state after {name} reads {missing[0]!r} in {path}, not defined yet"
                )


def prefix_problems(staged: Path, base: BaseTree) -> set[str]:
    entries = load_entries(staged)
    tree, _ = apply_entries(base, entries)
    result = check_series(base, entries, {p: d for p, (d, _) in tree.items()})
    return {f["text"] for f in result.failures}


def _git_witness(repo: Path, staged: Path, entries: list, base_commit: str) -> str:
    fd, index = tempfile.mkstemp(prefix="patchkit-witness-", suffix=".index")
    os.close(fd)
    os.unlink(index)
    env = {"GIT_INDEX_FILE": index}
    try:
        gitops.run(repo, ["read-tree", base_commit], env=env)
        files = [str((staged / e.name).resolve()) for e in entries]
        try:
            gitops.run(repo, ["apply", "--cached", "--whitespace=nowarn", *files], env=env)
        except UserError as exc:
            raise CheckFailed(f"witness: git apply refused the rewritten series: {exc.line()}") from None
        return gitops.text(repo, ["write-tree"], env=env)
    finally:
        Path(index).unlink(missing_ok=True)
