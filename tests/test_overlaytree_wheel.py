"""The overlay tree over the REAL compiled vLLM 0.33.0 wheel (issue 18, item 4).

The pinned wheel (336 MB, built for CUDA) comes from the package index at test time, its listed
sha256 checked, cached under patchkit's cache; it is installed ``--no-deps`` with a CPU torch into
a throwaway venv (uv, wheels from uv's cache). Our own patch 0002 is laid over it exactly as the
tests gate does, and ``importlib.util.find_spec`` in that venv's interpreter (which imports the
real ``vllm`` package and torch on the way) is the witness: the compiled extensions resolve to the
wheel's own files, the patched module to the patch's file, an unpatched module to the wheel's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit import cache
from patchkit.base.package_index import download, project_files
from patchkit.config import load_pin
from patchkit.diff.engine import apply_files
from patchkit.series.files import load_entries
from patchkit.testrun import testenv
from patchkit.testrun.overlaytree import installed_vllm, lay_over

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PATCHED = "vllm/v1/core/block_pool.py"  # what 0002-prefix-caching changes in vllm/
FIND = (
    "import importlib.util, json, os, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    spec = importlib.util.find_spec(name)\n"
    "    out[name] = spec and spec.origin and os.path.realpath(spec.origin)\n"
    "print(json.dumps(out))\n"
)


def _wheel() -> Path:
    pin = load_pin(ROOT / "patchkit.toml")
    machine = os.uname().machine
    wheels = [f for f in project_files("vllm", pin.version) if f[0].endswith(f"_{machine}.whl")]
    assert wheels, f"the index lists no vllm {pin.version} wheel for {machine}"
    filename, url, sha256 = wheels[0]
    assert sha256, f"the index lists no sha256 for {filename}"
    entry = cache.build_entry("wheel", sha256.lower(), lambda tmp: download(url, tmp / filename, sha256))
    return entry / filename


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A venv with the real vLLM wheel (--no-deps) and what importing its package needs on a CPU."""
    uv = testenv.uv_binary()
    assert uv, "uv (a dependency of patchkit) is not runnable"
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    env = {**os.environ, **testenv.uv_environment(testenv.pip_settings(sys.executable))}
    python = str(venv / "bin" / "python")
    install = ["pip", "install", "-q", "--python", python]
    for args in (["venv", "-q", str(venv), "-p", sys.executable],
                 [*install, "--no-deps", str(_wheel())],
                 [*install, "torch==2.13.0", "packaging", "numpy"]):  # fmt: skip
        proc = subprocess.run([uv, *args], env=env, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stderr[-2000:]
    yield python
    shutil.rmtree(venv, ignore_errors=True)  # 1.6 GB: pytest keeps its last three temp dirs


def _find(python: str, tree: Path | None, names: list[str]) -> dict[str, str | None]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    proc = subprocess.run([python, "-c", FIND, *names], capture_output=True, text=True, env=env,
                          cwd=tree or Path("/"), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_real_wheel_overlay_resolves_extensions_to_the_wheel_and_the_patch_to_its_file(
    wheel_python: str, pinned_base: Path, tmp_path: Path
) -> None:
    installed = installed_vllm(wheel_python)
    assert installed is not None, "the venv's vllm is not seen as a compiled build"
    # vLLM 0.33.0 ships stable-ABI extensions, no plain vllm._C
    assert "_C_stable_libtorch.abi3.so" in installed.compiled, installed.compiled

    entry = next(e for e in load_entries(ROOT / "patches") if e.name == "0002-prefix-caching.patch")
    (patch,) = entry.patches
    outcome = apply_files(patch.files, lambda p: ((pinned_base / p).read_bytes(), None))
    overlay = {path: data for path, (data, _) in outcome.files.items()}
    assert PATCHED in overlay and overlay[PATCHED] != (installed.root.parent / PATCHED).read_bytes()
    tree = tmp_path / "tree"
    tree.mkdir()
    lay_over(installed, overlay, tree)

    names = ["vllm", "vllm._C_stable_libtorch", "vllm._moe_C_stable_libtorch", "vllm.v1.core.block_pool",
             "vllm.v1.core.kv_cache_manager"]  # fmt: skip
    patched = _find(wheel_python, tree, names)
    wheel = str(installed.root.resolve())
    assert patched["vllm"] == f"{wheel}/__init__.py"  # the tree's vllm/ links to the wheel's files
    assert patched["vllm._C_stable_libtorch"] == f"{wheel}/_C_stable_libtorch.abi3.so"
    assert patched["vllm._moe_C_stable_libtorch"] == f"{wheel}/_moe_C_stable_libtorch.abi3.so"
    assert patched["vllm.v1.core.block_pool"] == str(tree / PATCHED)  # the patch's file, not a link
    assert not (tree / PATCHED).is_symlink() and (tree / PATCHED).read_bytes() == overlay[PATCHED]
    assert patched["vllm.v1.core.kv_cache_manager"] == f"{wheel}/v1/core/kv_cache_manager.py"

    # the base side: the installed package as it is
    base = _find(wheel_python, None, ["vllm._C_stable_libtorch", "vllm.v1.core.block_pool"])
    assert base["vllm.v1.core.block_pool"] == f"{wheel}/v1/core/block_pool.py"
    assert base["vllm._C_stable_libtorch"] == f"{wheel}/_C_stable_libtorch.abi3.so"
