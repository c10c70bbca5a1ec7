"""Issue 27's packaging shapes through APIs that existed before it, so each fails by its assertion on
the previous main (not by a missing import): dist name, CI install, versions, pip settings, torch."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_the_distribution_name_is_not_the_pypi_projects():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == "vllm-patchkit"


def test_the_ci_template_installs_no_bare_patchkit():
    steps = []
    for job in yaml.safe_load((ROOT / "ci" / "github-actions.yml").read_text())["jobs"].values():
        steps += [s.get("run", "") for s in job["steps"]]
    installs = [s for s in steps if "pip install" in s]
    assert installs and all('"vllm-patchkit @ git+' in s and "${PATCHKIT_REV}" in s for s in installs)


@pytest.mark.parametrize("filename, version", [("vllm-0.6.3.post1.tar.gz", "0.6.3-post1"),
                                               ("vllm-1.0.tar.gz", "1.0.0")])  # fmt: skip
def test_the_sdist_is_found_for_another_spelling_of_its_version(filename, version):
    from patchkit.base import package_index

    assert package_index._is_sdist_of(filename, "vllm", version)


@pytest.mark.parametrize("installed", ["0.8.5+cpu", "0.8.5+g1a2b3c4"])
def test_a_local_build_of_the_pin_applies_without_force(tmp_path, monkeypatch, installed):
    from patchkit.commands import apply as command

    monkeypatch.setattr(command, "series_version", lambda project, series_dir: ("0.8.5", "patchkit.toml"))
    note = command.check_version(None, SimpleNamespace(dist=SimpleNamespace(name="vllm", version=installed)),
                                 tmp_path, force=False)  # fmt: skip
    assert installed.split("+")[1] in note


def test_index_url_under_install_reaches_the_sdist_download(tmp_path, monkeypatch):
    from patchkit.base import package_index

    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    conf = tmp_path / "pip.conf"
    conf.write_text("[install]\nindex-url = https://mirror.example/simple\ncert = /etc/mirror.pem\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert package_index.index_url() == "https://mirror.example/simple"


def _no_pip_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)


def test_pips_find_links_and_cert_reach_the_index_client(tmp_path, monkeypatch):
    import tarfile

    from patchkit.base import package_index

    _no_pip_env(monkeypatch)
    links = tmp_path / "links"
    (tmp_path / "pkg-1.0").mkdir(parents=True)
    links.mkdir()
    with tarfile.open(links / "pkg-1.0.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "pkg-1.0", arcname="pkg-1.0")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {links}\nindex-url = http://127.0.0.1:9/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert package_index.sdist_sha256("pkg", "1.0")[0] == "pkg-1.0.tar.gz"
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "no-such-ca.pem"))
    with pytest.raises(Exception, match="no-such-ca.pem"):
        package_index._urlopen("https://127.0.0.1:9/simple/", {}, timeout=5)


def test_the_test_venv_follows_the_pins_torch(tmp_path, monkeypatch):
    from patchkit.testrun import testenv

    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    keys, args = [], []
    for version in ("2.6.0", "2.14.0"):
        base = tmp_path / version
        (base / "requirements").mkdir(parents=True)
        (base / "requirements" / "common.txt").write_text("numpy\n")
        cpu = f"-r common.txt\ntorch=={version}+cpu; platform_machine == 'x86_64'\n"
        cpu += f"torch=={version}; platform_machine != 'x86_64'\n"
        (base / "requirements" / "cpu.txt").write_text(cpu)
        keys.append(testenv.env_key(base, sys.executable))
        args.append(" ".join(str(a) for a in testenv.requirements(base)))
    assert keys[0] != keys[1]  # another torch, another venv
    assert "2.13.0" not in " ".join(args)  # never the constant
