"""The split's prefix promise checked without patchkit's code: git builds every state, ruff judges it.

For a series dir written by ``patchkit split`` (``series`` + ``NNNN-*.patch`` + ``split.json``) and
the base it was split against (a git work tree with the base commit at HEAD), every state is built
by ``git apply --cached`` into a private index (``GIT_INDEX_FILE``), its touched Python files are
taken out with ``git show :PATH``, and one ``ruff check --isolated --select F821,F822,F823`` reads
them all:

* prefix states: base + patches[1..k], for every k;
* needs states: base + split.json's ``depends_on`` of patch k + patch k (what the apply gate's
  "alone" check and the tests gate's two sides are built from).

A finding counts when the base does not have it (same file, rule, name) and the final state
(base + the whole series) does not have it either: that is a state the split made that the replay
never had. ``--import PY`` also runs ``PY -c 'import M'`` for each touched module of each needs
state in a scratch checkout (``git checkout-index``), compared with the final state's import.

    python -m bench.prefix_witness SERIES_DIR BASE_DIR [--import PY] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CODES = "F821,F822,F823"


def _git(base: Path, index: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    proc = subprocess.run(["git", "-C", str(base), *args], env=env, input=stdin, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])}: {proc.stderr.decode(errors='replace')[-400:]}")
    return proc.stdout


def _touched(text: str) -> set[str]:
    out = set()
    for line in text.splitlines():
        match = re.match(r"^diff --git a/(\S+) b/(\S+)$", line)
        if match:
            out.add(match.group(2))
    return out


def _state(base: Path, work: Path, label: str, patches: list[Path], paths: set[str]) -> tuple[Path, Path]:
    """Build base + patches in a private index; write the given paths that exist into work/label."""
    index = work / f"{label}.index"
    _git(base, index, "read-tree", "HEAD")
    for patch in patches:
        _git(base, index, "apply", "--cached", "--whitespace=nowarn", str(patch.resolve()))
    out = work / label
    listed = set(_git(base, index, "ls-files", "-z", "--", *sorted(paths)).decode().split("\0")) - {""}
    for path in sorted(listed):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_git(base, index, "show", f":{path}"))
    return out, index


def _ruff(root: Path) -> dict[str, set[tuple[str, str, str]]]:
    """label → {(file, code, message)} for every state directory under root, one ruff process."""
    exe = shutil.which("ruff") or "ruff"
    proc = subprocess.run(
        [
            exe,
            "check",
            "--isolated",
            "--no-cache",
            "--exit-zero",
            "--output-format",
            "json",
            "--select",
            CODES,
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-400:])
    found: dict[str, set] = {}
    for item in json.loads(proc.stdout or "[]"):
        rel = Path(item["filename"]).resolve().relative_to(root.resolve())
        label, path = rel.parts[0], "/".join(rel.parts[1:])
        found.setdefault(label, set()).add((path, item["code"], item["message"]))
    return found


def witness(series: Path, base: Path, python: str | None = None) -> dict:
    names = [n for n in (series / "series").read_text().split() if n.endswith(".patch")]
    split = json.loads((series / "split.json").read_text())
    needs_by = {p["filename"]: p.get("depends_on", []) for p in split["patches"]}
    domain_of = {p["domain"]: p["filename"] for p in split["patches"]}
    texts = {n: (series / n).read_text(errors="replace") for n in names}
    touched = {n: _touched(texts[n]) for n in names}
    every = set().union(*touched.values())
    py = {p for p in every if p.endswith(".py")}
    report: dict = {"series": str(series), "base": str(base), "states": []}
    with tempfile.TemporaryDirectory(prefix="prefix-witness-") as tmp:
        work = Path(tmp)
        _state(base, work, "base", [], py)
        _, final_index = _state(base, work, "final", [series / n for n in names], py)
        plan = []
        for k, name in enumerate(names):
            plan.append(
                (f"prefix-{k + 1:04d}", [series / n for n in names[: k + 1]], touched[name] & py, name)
            )
            order = [domain_of[d] for d in needs_by.get(name, []) if d in domain_of]
            order = [n for n in names if n in order] + [name]
            plan.append((f"needs-{k + 1:04d}", [series / n for n in order], touched[name] & py, name))
        indexes = {}
        for label, patches, paths, _name in plan:
            try:
                _, indexes[label] = _state(base, work, label, patches, paths)
            except RuntimeError as exc:
                report["states"].append({"state": label, "error": str(exc)})
        found = _ruff(work)
        on_base, at_end = found.get("base", set()), found.get("final", set())
        for label, patches, paths, name in plan:
            if label not in indexes:
                continue
            new = sorted(f for f in found.get(label, set()) if f not in on_base and f not in at_end)
            entry = {
                "state": label,
                "patch": name,
                "patches": [p.name for p in patches],
                "files": len(paths),
                "undefined_names_new": [f"{f[0]}: {f[1]} {f[2]}" for f in new],
            }
            if python and label.startswith("needs-"):
                entry["imports"] = _imports(base, work, label, indexes[label], final_index, paths, python)
            report["states"].append(entry)
    bad = [s for s in report["states"] if s.get("error") or s.get("undefined_names_new")]
    bad += [
        s
        for s in report["states"]
        if any(v == "fails (final imports)" for v in s.get("imports", {}).values())
    ]
    report["ok"] = not bad
    return report


def _imports(
    base: Path, work: Path, label: str, index: Path, final_index: Path, paths: set[str], python: str
) -> dict[str, str]:
    modules = sorted({p[:-3].replace("/", ".").removesuffix(".__init__") for p in paths if "/" in p})
    out = {}
    for side, idx in (("state", index), ("final", final_index)):
        tree = work / f"{label}-{side}-tree"
        env = {**os.environ, "GIT_INDEX_FILE": str(idx)}
        subprocess.run(
            ["git", "-C", str(base), "checkout-index", "-a", f"--prefix={tree}/"], env=env, check=True
        )
        for module in modules:
            proc = subprocess.run(
                [python, "-c", f"import {module}"],
                cwd=tree,
                capture_output=True,
                timeout=300,
                env={**os.environ, "PYTHONPATH": str(tree)},
            )
            out.setdefault(module, {})[side] = proc.returncode == 0
        shutil.rmtree(tree)
    return {
        m: ("imports" if r["state"] else "fails (final imports)" if r["final"] else "fails (final too)")
        for m, r in out.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("series", type=Path)
    parser.add_argument("base", type=Path)
    parser.add_argument("--import", dest="python", help="an interpreter to import each needs state's modules")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = witness(args.series.resolve(), args.base.resolve(), args.python)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    for state in report["states"]:
        new = state.get("undefined_names_new", [])
        said = state.get("error") or f"{len(new)} new finding(s) (F821-3 or syntax)"
        imports = state.get("imports")
        if imports:
            said += (
                "; imports: " + ", ".join(f"{m} {v}" for m, v in imports.items() if v != "imports") or "all"
            )
        print(f"{state['state']} {state.get('patch', '')}: {said}")
        for line in new[:5]:
            print(f"    {line}")
    print("ok" if report["ok"] else "NOT OK")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
