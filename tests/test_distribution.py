"""The distribution is ``vllm-patchkit`` (``patchkit`` on PyPI is somebody else's project); the
command stays ``patchkit``; the CI templates install exactly the revision under audit."""

from __future__ import annotations

import shlex
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

import patchkit

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = sorted((ROOT / "ci").glob("*.y*ml"))


def test_the_distribution_is_ours_and_the_command_stays_patchkit():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == patchkit.DISTRIBUTION == "vllm-patchkit"
    assert project["scripts"] == {"patchkit": "patchkit.entry:main"}
    assert metadata.version(patchkit.DISTRIBUTION) == patchkit.__version__
    entry = [
        e for e in metadata.distribution(patchkit.DISTRIBUTION).entry_points if e.group == "console_scripts"
    ]
    assert [(e.name, e.value) for e in entry] == [("patchkit", "patchkit.entry:main")]


# --------------------------------------------------------------------------- the CI templates

_INSTALLERS = (
    ("pip", "install"),
    ("pip3", "install"),
    ("uv", "pip", "install"),
    ("pipx", "install"),
    ("uv", "tool", "install"),
    ("python", "-m", "pip", "install"),
    ("python3", "-m", "pip", "install"),
)
_WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
               "-f", "--find-links", "--python", "-t", "--target", "--prefix", "--root", "--python-version",
               "--platform", "--only-binary", "--no-binary"}  # fmt: skip


def _commands(script: str) -> list[list[str]]:
    joined = script.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for part in line.replace("&&", ";").replace("||", ";").split(";"):
            try:
                words = shlex.split(part)
            except ValueError:
                words = part.split()
            if words:
                commands.append(words)
    return commands


def bare_installs(script: str) -> list[str]:
    """Every requirement an install command in ``script`` takes from an index by bare name: not a
    URL, a path, a ``name @ url`` reference, or an exact ``==`` pin checked by ``--hash``."""
    found = []
    for words in _commands(script):
        for installer in _INSTALLERS:
            n = len(installer)
            starts = [i for i in range(len(words) - n + 1) if tuple(words[i : i + n]) == installer]
            if not starts:
                continue
            args = words[starts[0] + n :]
            hashed = any(a.startswith("--hash") or a == "--require-hashes" for a in args)
            skip = False
            for arg in args:
                if skip:
                    skip = False
                    continue
                if arg in _WITH_VALUE:
                    skip = arg not in ("-r", "--requirement")
                    if arg in ("-r", "--requirement") and not hashed:
                        found.append(f"{' '.join(words)} (a requirements file without --require-hashes)")
                        skip = True
                    continue
                if arg.startswith("-"):
                    continue
                pinned = " @ " in arg or "://" in arg or arg.startswith((".", "/", "~", "$")) or arg.endswith(
                    (".whl", ".tar.gz", ".zip")) or ("==" in arg and hashed)  # fmt: skip
                if not pinned:
                    found.append(f"{arg!r} in `{' '.join(words)}`")
            break  # `python -m pip install` is also `pip install`: one installer per command
    return found


def _run_steps(node) -> list[str]:
    if isinstance(node, dict):
        found = [node["run"]] if isinstance(node.get("run"), str) else []
        return found + [s for value in node.values() for s in _run_steps(value)]
    if isinstance(node, list):
        return [s for value in node for s in _run_steps(value)]
    return []


@pytest.mark.parametrize("script, bare", [
    ("pip install patchkit", ["patchkit"]),
    ("python -m pip install -q vllm-patchkit==0.1.0", ["vllm-patchkit==0.1.0"]),
    ("uv pip install --python .venv ruff", ["ruff"]),
    ("pipx install vllm-patchkit", ["vllm-patchkit"]),
    ("set -e; cd x && pip install \\\n  patchkit  # comment", ["patchkit"]),
    ("pip install -r requirements.txt", ["requirements.txt"]),
    ('pip install "vllm-patchkit @ git+https://github.com/o/r@0123abc"', []),
    ("pip install dist/*.whl", []),
    ("pip install ./patchkit-src", []),
    ("pip install vllm-patchkit==0.1.0 --hash=sha256:00", []),
    ("echo pip", []),
])  # fmt: skip
def test_the_install_checker_tells_a_bare_name_from_a_pinned_revision(script, bare):
    found = bare_installs(script)
    assert len(found) == len(bare) and all(name in f for name, f in zip(bare, found, strict=True))


def test_the_ci_templates_install_exactly_the_revision_under_audit():
    assert TEMPLATES, "no CI template in ci/"
    for template in TEMPLATES:
        steps = _run_steps(yaml.safe_load(template.read_text()))
        installs = [s for s in steps if any(" ".join(i) in " ".join(s.split()) for i in _INSTALLERS)]
        assert installs, f"{template.name}: no install step"
        for script in steps:
            assert bare_installs(script) == [], f"{template.name}: installs by bare name: {script}"
        assert all("vllm-patchkit" in s for s in installs if "patchkit" in s), template.name


def test_the_github_template_pins_a_full_commit_and_refuses_a_placeholder():
    workflow = yaml.safe_load((ROOT / "ci" / "github-actions.yml").read_text())
    steps = _run_steps(workflow)
    installs = [s for s in steps if "vllm-patchkit @ git+" in s]
    assert len(installs) == len(workflow["jobs"]) == 2
    for script in installs:
        assert "@${PATCHKIT_REV}" in script and "^[0-9a-f]{40}$" in script and "exit 2" in script
