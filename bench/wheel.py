"""``patchkit wheel`` on the real pinned vLLM wheel: time against the manual way, and the evidence.

    python -m bench.wheel [--series patches] [--pin patchkit.toml] [--runs 3] [--evidence] [--work DIR]

Timing: ``patchkit wheel SERIES --out DIR`` against what a vendor's container build does by hand
(a bash script: ``pip download vllm==X --no-deps``, ``wheel unpack``, ``patch -p1`` of each patch's
package part, ``mv`` of the ``.dist-info`` and ``sed`` of ``Version:`` and ``_version.py``, ``wheel
pack``), interleaved in the same run, each once untimed first (so pip's and patchkit's caches are
warm for both), medians and the ratio. The package-only patches the script applies are cut from
the series before the runs (a vendor keeps such a patch), outside the timed region.

``--evidence`` (not timed): two builds and their sha256; ``wheel unpack`` of the build; ``--verify``
of it and of a copy with one byte changed; a fresh venv with vLLM's ``requirements/common.txt``
and torch (CPU) from uv, then ``pip install --no-deps`` of the build; ``import vllm`` and its
``__version__``; ``pip show vllm``; ``patchkit status`` of that venv; and the witness, by this
script and git only: every installed file of the package against the original wheel unpacked with
``wheel unpack`` and the series applied with ``git apply`` (``_version.py``: the original with its
version lines replaced) — every file patchkit reports as patched must equal it, every other file
must be the original's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.cases import patchkit_command
from bench.measure import measure_pair

ROOT = Path(__file__).resolve().parents[1]
BASELINE = r"""set -euo pipefail
work="$1"; py="$2"; version="$3"; shift 3
rm -rf "$work/dl" "$work/unpacked" "$work/out"; mkdir -p "$work/dl" "$work/unpacked" "$work/out"
"$py" -m pip download -q --no-deps --only-binary=:all: -d "$work/dl" "vllm==$version"
"$py" -m wheel unpack -d "$work/unpacked" "$work"/dl/vllm-"$version"-*.whl >/dev/null
cd "$work/unpacked/vllm-$version"
for p in "$@"; do patch -p1 --batch --forward --quiet -i "$p"; done
mv "vllm-$version.dist-info" "vllm-$version+local.dist-info"
sed -i "s/^Version: $version\$/Version: $version+local/" "vllm-$version+local.dist-info/METADATA"
sed -i "s/version = '$version'/version = '$version+local'/" vllm/_version.py
cd "$work/unpacked" && mv "vllm-$version" "vllm-$version+local"
"$py" -m wheel pack -d "$work/out" "vllm-$version+local" >/dev/null
"""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def package_part(patch: Path, dest: Path, package: str = "vllm/") -> Path:
    """The patch's file sections under ``package`` (what a vendor's site-packages patch holds)."""
    sections, keep = [], False
    for line in patch.read_text("utf-8").splitlines(keepends=True):
        if line.startswith("diff --git "):
            keep = line.split()[2].startswith(f"a/{package}")
        if keep:
            sections.append(line)
    dest.write_text("".join(sections), "utf-8")
    return dest


def timing(series: Path, pin: Path, runs: int, work: Path, warm: bool = True) -> dict:
    version = _pin_version(pin)
    cuts = [package_part(series / n, work / f"pkg-{n}") for n in (series / "series").read_text().split()]
    script = work / "baseline.sh"
    script.write_text(BASELINE)
    out = work / "patchkit-out"
    candidate = [*patchkit_command(), "wheel", str(series), "--pin", str(pin), "--out", str(out)]
    baseline = ["bash", str(script), str(work / "manual"), sys.executable, version, *map(str, cuts)]

    def fresh(_: int) -> None:
        shutil.rmtree(out, ignore_errors=True)

    for command in (candidate, baseline) if warm else ():  # warm pip's and patchkit's caches, untimed
        fresh(0)
        subprocess.run(command, check=True, capture_output=True)
    cand, base = measure_pair(candidate, baseline, runs, cwd=ROOT, prepare=fresh)
    result = {
        "patchkit": cand.to_dict(),
        "manual": base.to_dict(),
        "ratio": round(cand.median / base.median, 3),
    }
    print(f"patchkit wheel   median {cand.median:6.1f} s  samples {[round(s, 1) for s in cand.wall]}")
    print(f"manual baseline  median {base.median:6.1f} s  samples {[round(s, 1) for s in base.wall]}")
    print(f"ratio patchkit / manual: {result['ratio']}  ({runs} interleaved runs each)")
    return result


def _pin_version(pin: Path) -> str:
    import tomllib

    return tomllib.loads(pin.read_text("utf-8"))["target"]["version"]


def _run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True)
    print(f"$ {' '.join(args)[:200]}\n  exit {proc.returncode}")
    for line in (proc.stdout + proc.stderr).strip().splitlines()[-12:]:
        print(f"  {line}")
    return proc


def evidence(series: Path, pin: Path, work: Path, bare: bool = False) -> dict:
    found: dict = {}
    builds = []
    for name in ("build-a", "build-b"):
        _run(
            *patchkit_command(), "wheel", str(series), "--pin", str(pin), "--out", str(work / name), cwd=ROOT
        )
        builds.append(next((work / name).glob("*.whl")))
    found["sha256"] = [sha256(b) for b in builds]
    found["identical"] = builds[0].read_bytes() == builds[1].read_bytes()
    print(f"sha256: {found['sha256']}; byte-identical: {found['identical']}")
    wheel = builds[0]
    found["wheel_unpack"] = _run(
        sys.executable, "-m", "wheel", "unpack", "-d", str(work / "u"), str(wheel)
    ).returncode
    found["verify"] = _run(
        *patchkit_command(), "wheel", "--verify", str(wheel), str(series), cwd=ROOT
    ).returncode
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    (work / "changed").mkdir(exist_ok=True)
    (work / "changed" / wheel.name).write_bytes(bytes(data))
    found["verify_changed_byte"] = _run(
        *patchkit_command(), "wheel", "--verify", str(work / "changed" / wheel.name), str(series), cwd=ROOT
    ).returncode
    python = _venv(work / "venv", pin, bare)
    found["pip_install"] = _run(python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)).returncode
    if not bare:  # a bare venv has no torch: vllm/__init__ cannot be imported there
        found["import"] = _run(python, "-c", "import vllm; print(vllm.__version__)").stdout.strip()
    found["pip_show"] = _run(python, "-m", "pip", "show", "vllm").stdout.splitlines()[:3]
    print("\n".join(f"  {line}" for line in found["pip_show"]))
    found["status"] = _run(
        *patchkit_command(), "status", str(series), "--target", "site-packages", "--python", python, cwd=ROOT
    ).returncode
    found["witness"] = witness(series, python, work)
    return found


def _venv(venv: Path, pin: Path, bare: bool) -> str:
    """A fresh venv holding vLLM's requirements/common.txt and torch (CPU), the test env's kind;
    ``bare``: only pip (for an older vLLM whose requirements need another torch)."""
    from patchkit.testrun import testenv

    uv = testenv.uv_binary()
    env = testenv.uv_environment(testenv.pip_settings(sys.executable))
    python = str(venv / "bin" / "python")
    subprocess.run([uv, "venv", "-q", "--seed", str(venv), "-p", sys.executable], check=True, env=env)
    if bare:
        return python
    base = Path(
        subprocess.run(
            [*patchkit_command(), "checkout", "--pin", str(pin)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
    )
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            python,
            testenv.TORCH,
            "-r",
            str(base / testenv.REQUIREMENTS),
        ],
        check=True,
        env=env,
        timeout=3600,
    )
    return python


def witness(series: Path, python: str, work: Path) -> dict:
    """The installed package against ``wheel unpack`` of the original + ``git apply`` of the series."""
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    dist_info = next(site.glob("vllm-*.dist-info"))  # the venv is fresh: one vllm
    record = json.loads((dist_info / "patchkit-provenance.json").read_text())
    cached = (
        Path.home()
        / ".cache/patchkit/wheel"
        / record["source_wheel"]["sha256"]
        / record["source_wheel"]["filename"]
    )
    assert sha256(cached) == record["source_wheel"]["sha256"]
    subprocess.run(
        [sys.executable, "-m", "wheel", "unpack", "-d", str(work / "original"), str(cached)],
        check=True,
        capture_output=True,
    )
    tree = next((work / "original").iterdir())
    for name in (series / "series").read_text().split():
        subprocess.run(["git", "apply", "--include=vllm/*", str(series / name)], cwd=tree, check=True)
    version, old = record["distribution"]["version"], record["distribution"]["source"]["version"]
    text = (tree / "vllm/_version.py").read_text()
    expected_version = text.replace(f"version = '{old}'", f"version = '{version}'")
    old_tuple = re.search(r"version_tuple = (\(.*\))$", text, re.M)
    if old_tuple and "+" in version:
        new_tuple = f"{old_tuple[1][:-1]}, '{version.split('+')[1]}')"
        expected_version = expected_version.replace(
            f"version_tuple = {old_tuple[1]}", f"version_tuple = {new_tuple}"
        )
    (tree / "vllm/_version.py").write_text(expected_version)
    mismatched, compared = [], 0
    originals = {str(p.relative_to(tree)) for p in (tree / "vllm").rglob("*") if p.is_file()}
    installed = {
        str(p.relative_to(site))
        for p in (site / "vllm").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    for rel in sorted(originals | installed):
        compared += 1
        if rel not in originals or rel not in installed or sha256(tree / rel) != sha256(site / rel):
            mismatched.append(rel)
    patched = sorted(record["files"])
    print(
        f"witness: {compared} files compared, {len(mismatched)} mismatched {mismatched[:5]}; "
        f"patchkit reports {len(patched)} patched, e.g. {patched[:4]}"
    )
    return {"compared": compared, "mismatched": mismatched, "patched": patched}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=Path, default=ROOT / "patches")
    parser.add_argument("--pin", type=Path, default=ROOT / "patchkit.toml")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--evidence", action="store_true", help="also install it and check it (not timed)")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument(
        "--bare-venv", action="store_true", help="--evidence: a venv without vLLM's requirements"
    )
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args()
    work = opts.work or Path(tempfile.mkdtemp(prefix="bench-wheel-"))
    work.mkdir(parents=True, exist_ok=True)
    series, pin = opts.series.resolve(), opts.pin.resolve()
    result = {"series": str(series)}
    if not opts.no_timing:
        result["timing"] = timing(series, pin, opts.runs, work)
    if opts.evidence:
        result["evidence"] = evidence(series, pin, work, opts.bare_venv)
    if opts.json:
        opts.json.write_text(json.dumps(result, indent=1) + "\n")
    if not opts.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
