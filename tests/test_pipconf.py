"""One reader of pip's settings with pip's own precedence, used by the sdist/ruff downloads and the
test venv alike (issue 27): ``index-url`` under ``[install]``, ``cert`` and ``find-links``."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from patchkit import pipconf
from patchkit.base import package_index
from patchkit.testrun import testenv


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine of our own: no pip settings from this one; global, user and site files under tmp."""
    for name in list(os.environ):
        if name.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (tmp_path / "xdg" / "pip").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    (tmp_path / "venv").mkdir()
    files = {"global": tmp_path / "xdg" / "pip" / "pip.conf", "user": home / ".config" / "pip" / "pip.conf",
             "site": tmp_path / "venv" / "pip.conf"}  # fmt: skip
    return files


def _pip_says(key: str, command: str = "install") -> str | None:
    """What pip itself takes for ``key`` in ``command`` (its own option parser), the witness."""
    code = (
        "import sys\nfrom pip._internal.commands import create_command\n"
        f"c = create_command({command!r}); o, _ = c.parse_args([])\n"
        f"v = getattr(o, {key.replace('-', '_')!r}); print(v if not isinstance(v, list) else ' '.join(v))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_install_section_over_global_whatever_the_file(machine):
    machine["site"].write_text("[global]\nindex-url = https://site-global.example/simple\n")
    machine["global"].write_text("[install]\nindex-url = https://global-install.example/simple\n")
    values = pipconf.settings(("install",))
    assert values["index-url"] == "https://global-install.example/simple" == _pip_says("index-url")


def test_files_global_user_site_and_env_last(machine, monkeypatch):
    machine["global"].write_text("[global]\ntimeout = 1\nretries = 1\nindex_url = https://g.example/simple\n")
    machine["user"].write_text("[global]\ntimeout = 2\nretries = 2\n")
    machine["site"].write_text("[global]\ntimeout = 3\n")
    values = pipconf.settings(("install",))
    assert (values["timeout"], values["retries"], values["index-url"]) == (
        "3",
        "2",
        "https://g.example/simple",
    )
    monkeypatch.setenv("PIP_TIMEOUT", "9")
    assert pipconf.settings(("install",))["timeout"] == "9" == _pip_says("timeout").split(".")[0]


def test_pip_config_file_replaces_the_user_files_and_devnull_reads_none(machine, tmp_path, monkeypatch):
    machine["user"].write_text("[global]\nindex-url = https://user.example/simple\n")
    own = tmp_path / "own.conf"
    own.write_text("[global]\nextra-index-url = https://own.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(own))
    values = pipconf.settings(("install",))
    assert "index-url" not in values and values["extra-index-url"] == "https://own.example/simple"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert pipconf.settings(("install",)) == {}


def test_the_index_client_and_the_test_venv_agree_on_an_install_section_index(machine):
    machine["user"].write_text("[global]\nindex-url = https://global.example/simple\n"
                               "[install]\nindex-url = https://mirror.example/simple\n"
                               "cert = /etc/mirror-ca.pem\nfind-links = /srv/wheels\n")  # fmt: skip
    assert package_index.index_url() == "https://mirror.example/simple"
    venv = testenv.uv_environment(testenv.pip_settings(), {})
    assert venv["UV_DEFAULT_INDEX"] == "https://mirror.example/simple"
    assert venv["SSL_CERT_FILE"] == "/etc/mirror-ca.pem" == package_index.pip_settings()["cert"]
    assert venv["UV_FIND_LINKS"] == "/srv/wheels" and package_index.find_links() == ["file:///srv/wheels"]


def test_the_index_client_uses_pips_cert(machine, tmp_path):
    machine["user"].write_text(f"[install]\ncert = {tmp_path / 'missing-ca.pem'}\n")
    with pytest.raises(Exception, match="missing-ca.pem"):
        package_index._urlopen("https://pypi.org/simple/", {}, timeout=5)


def test_the_sdist_is_found_on_pips_find_links(machine, tmp_path, monkeypatch):
    wheels = tmp_path / "links"
    wheels.mkdir()
    content = tmp_path / "pkg-1.0"
    content.mkdir()
    (content / "PKG-INFO").write_text("Name: pkg\nVersion: 1.0\n")
    sdist = wheels / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(content, arcname="pkg-1.0")
    machine["user"].write_text(f"[global]\nfind-links = {wheels}\nno-index = false\n"
                               "index-url = http://127.0.0.1:9/simple\n")  # fmt: skip
    filename, sha = package_index.sdist_sha256("pkg", "1.0.0")  # 1.0 is 1.0.0
    assert filename == "pkg-1.0.tar.gz"
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    assert Path(package_index.download_sdist("pkg", "1.0", sha)).read_bytes() == sdist.read_bytes()
