"""The overlay tree over an installed compiled vLLM: extensions from the install, patched files ours."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from patchkit.testrun.overlaytree import installed_vllm, lay_over

FIND = (
    "import importlib.util, json, os\n"
    "out = {}\n"
    "for name in ('vllm', 'vllm._C', 'vllm.calc', 'vllm.layers.gone', 'vllm.layers.kept'):\n"
    "    spec = importlib.util.find_spec(name)\n"
    "    out[name] = spec and spec.origin and os.path.realpath(spec.origin)\n"
    "print(json.dumps(out))\n"
)


def _venv_with_compiled_vllm(tmp_path: Path) -> tuple[str, Path]:
    """A venv (no pip) whose site-packages holds a 'compiled' vllm: an extension file beside .py."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    package = Path(purelib) / "vllm"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "calc.py").write_text("SIDE = 'installed'\n")
    (package / "layers" / "__init__.py").write_text("")
    (package / "layers" / "gone.py").write_text("")
    (package / "layers" / "kept.py").write_text("")
    so = sysconfig.get_config_var("EXT_SUFFIX")  # an extension name find_spec recognises
    (package / f"_C{so}").write_bytes(b"\x7fELF not really")
    return python, package


def _find(python: str, tree: Path) -> dict:
    import json

    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([python, "-c", FIND], capture_output=True, text=True, env=env, cwd=tree, check=True)
    return json.loads(proc.stdout)


def test_patched_side_links_the_install_and_copies_the_patch_in(tmp_path: Path) -> None:
    python, package = _venv_with_compiled_vllm(tmp_path)
    installed = installed_vllm(python)
    assert installed is not None and installed.root == package and installed.compiled[0].startswith("_C")
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "calc.py").write_text("SIDE = 'source tree'\n")  # the base's copy: not imported
    overlay = {"vllm/calc.py": b"SIDE = 'patched'\n", "vllm/layers/gone.py": None, "tests/test_x.py": b""}
    lay_over(installed, overlay, tree)
    found = _find(python, tree)
    assert found["vllm._C"] == str(package / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}")  # the wheel's
    assert found["vllm.calc"] == str(tree / "vllm" / "calc.py")  # the patch's file
    assert (tree / "vllm" / "calc.py").read_text() == "SIDE = 'patched'\n"
    assert found["vllm.layers.kept"] == str(package / "layers" / "kept.py")
    assert found["vllm.layers.gone"] is None  # the patch deletes it
    assert (package / "calc.py").read_text() == "SIDE = 'installed'\n"  # the install is never edited


def test_base_side_imports_the_install_as_it_is(tmp_path: Path) -> None:
    python, package = _venv_with_compiled_vllm(tmp_path)
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "calc.py").write_text("SIDE = 'source tree'\n")
    lay_over(installed_vllm(python), {"tests/test_x.py": b""}, tree)
    assert not (tree / "vllm").exists()
    assert _find(python, tree)["vllm.calc"] == str(package / "calc.py")


def test_an_interpreter_without_a_compiled_vllm_is_not_one(tmp_path: Path) -> None:
    assert installed_vllm(sys.executable) is None  # patchkit's own venv: no vllm at all
