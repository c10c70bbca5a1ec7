"""Does every apply agree with git on a foreign series, patch by patch?

    python -m bench.series_agreement SERIES_DIR BASE_DIR [--work DIR]

Columns per patch (series order): ``git apply`` in order (the witness; tree id after it), patchkit's
apply plan for a checkout and for a site-packages tree (the series up to that patch, in memory,
the files compared with git's tree at that point), and the audit's apply gate (in series).
Then the real ``patchkit apply`` of the whole series to a checkout and to site-packages, compared
with git's final tree. Exit 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.cases import _site_packages, git_env, patchkit_command
from patchkit import git
from patchkit.apply.plan import checkout_target, plan_series, site_packages_target
from patchkit.series.files import load_entries


def _git(args: list[str], cwd: Path, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace"))
    return proc


def _files_at(tree: Path, env: dict) -> dict[str, str]:
    """path -> blob id of the index after ``git add -A``."""
    _git(["add", "-A", "."], tree, env)
    out = _git(["ls-files", "-s", "-z"], tree, env).stdout
    files = {}
    for row in out.split(b"\0"):
        if row:
            meta, _, path = row.partition(b"\t")
            files[path.decode()] = meta.split()[1].decode()
    return files


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("series", type=Path)
    parser.add_argument("base", type=Path)
    parser.add_argument("--work", type=Path)
    opts = parser.parse_args()
    work = opts.work or Path(tempfile.mkdtemp(prefix="agreement-"))
    env = git_env(work)
    witness = work / "git"
    shutil.copytree(opts.base, witness, symlinks=True)
    _git(["init", "-q", "-b", "base"], witness, env)
    base_files = _files_at(witness, env)
    entries = load_entries(opts.series)
    site = _site_packages(opts.base, work / "site")
    targets = {"checkout": checkout_target(opts.base), "site-packages": site_packages_target(None, site)}
    audit_json = work / "audit.json"
    audit = ["audit", str(opts.series), "--base", str(opts.base), "--gates", "apply"]
    audit += ["--json", str(audit_json)]
    proc = subprocess.run([*patchkit_command(), *audit], capture_output=True, text=True)
    gates = {}
    if audit_json.is_file():
        for patch in json.loads(audit_json.read_text())["patches"]:
            gate = next(g for g in patch["gates"] if g["gate"] == "apply")
            gates[patch["patch"]] = f"{gate['status']} ({gate['details'].get('in_series')})"
    else:
        print("audit did not run:", proc.stderr.strip()[-300:])
    rows, disagreements = [], 0
    for k, entry in enumerate(entries, 1):
        proc = _git(["apply", "--whitespace=nowarn", str(entry.path)], witness, env, check=False)
        git_ok = proc.returncode == 0
        truth = _files_at(witness, env)
        tree = _git(["write-tree"], witness, env).stdout.decode().strip()[:12]
        cells = []
        for kind, target in targets.items():
            plan = plan_series(target, entries[:k], [])
            same = not plan.problems
            for rel, (_, new, _, _) in plan.changes.items():
                want = truth.get(rel if kind == "checkout" else rel)
                got = git.blob_id(new) if new is not None else None
                same = same and want == got
            for rel, blob in truth.items():  # files git changed that the plan did not
                if blob != base_files.get(rel) and rel not in plan.changes and rel not in plan.skipped:
                    same = same and (kind == "site-packages" and not rel.startswith("vllm/"))
            cells.append("agrees" if same else f"DIFFERS {plan.problems[:1]}")
        gate = gates.get(entry.name, "n/a")
        agree = git_ok and all(c == "agrees" for c in cells) and gate.startswith("passed (applies)")
        disagreements += not agree
        rows.append((k, entry.name, "applies" if git_ok else "FAILS", tree, *cells, gate))
    print("| # | patch | git apply (in order) | git tree | patchkit plan: checkout | patchkit plan: "
          "site-packages | audit apply gate |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    final = _files_at(witness, env)
    for kind in ("checkout", "site-packages"):
        dest = work / f"real-{kind}"
        if kind == "checkout":
            shutil.copytree(opts.base, dest, symlinks=True)
            args = ["--target", "checkout", "--path", str(dest)]
            root = dest
        else:
            dest = _site_packages(opts.base, dest)
            args = ["--target", "site-packages", "--site-packages", str(dest)]
            root = dest
        command = [*patchkit_command(), "apply", str(opts.series.resolve()), *args]
        proc = subprocess.run(command, capture_output=True, text=True, cwd=work)  # no patchkit.toml pin here
        changed = [rel for rel, blob in final.items() if blob != base_files.get(rel)]
        wrong = [rel for rel in changed if (rel.startswith("vllm/") or kind == "checkout")
                 and git.blob_id((root / rel).read_bytes()) != final[rel]]  # fmt: skip
        why = proc.stderr.strip()[-200:] if proc.returncode else ""
        print(f"patchkit apply --target {kind}: exit {proc.returncode}; "
              f"files differing from git's final tree: {len(wrong)} {wrong[:3]} {why}")  # fmt: skip
        disagreements += proc.returncode != 0 or bool(wrong)
    print(f"{len(entries)} patches, {disagreements} disagreement(s)")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
