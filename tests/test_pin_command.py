"""``patchkit pin``: [target] written or updated with the hash the index lists, comments kept."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib

from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.commands.pin import with_target

runner = CliRunner()
PROJECT = """# our project
[target]  # the base
name = "vllm"
source = "index"
# bumped by hand until now
version = "0.1.0"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[series]
dir = "patches"  # ours
"""


def test_the_edit_keeps_comments_and_other_tables():
    new = with_target(PROJECT, {"name": "vllm", "source": "git", "url": "u", "rev": "a" * 40})
    assert "# our project\n[target]  # the base\n# bumped by hand until now\n" in new
    assert '[series]\ndir = "patches"  # ours\n' in new
    assert tomllib.loads(new)["target"] == {"name": "vllm", "source": "git", "url": "u", "rev": "a" * 40}
    assert tomllib.loads(with_target("", {"source": "path", "path": "/x"})) == {
        "target": {"source": "path", "path": "/x"}
    }


def test_pin_from_the_index_writes_the_listed_sha256(tmp_path, monkeypatch):
    sdist = tmp_path / "files" / "vllm-9.9.9.tar.gz"
    sdist.parent.mkdir()
    sdist.write_bytes(b"not really an sdist")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    page = tmp_path / "simple" / "vllm" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../files/{sdist.name}#sha256={digest}">{sdist.name}</a>\n')
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", " ")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    toml = tmp_path / "patchkit.toml"
    toml.write_text(PROJECT)
    result = runner.invoke(app, ["pin", "vllm==9.9.9", "--config", str(toml)])
    assert result.exit_code == 0, result.output
    target = tomllib.loads(toml.read_text())["target"]
    assert target == {"name": "vllm", "source": "index", "version": "9.9.9", "sha256": digest}
    assert "# bumped by hand until now" in toml.read_text()
    missing = runner.invoke(app, ["pin", "vllm==1.2.3", "--config", str(toml)])
    assert missing.exit_code == 2 and "no sdist vllm-1.2.3" in missing.output
    assert tomllib.loads(toml.read_text())["target"]["version"] == "9.9.9"  # unchanged


def test_pin_a_git_tag_resolves_to_its_commit_and_a_path(tmp_path, monkeypatch):
    repo = tmp_path / "upstream"
    repo.mkdir()
    for args in (
        ["init", "-q"],
        ["commit", "-q", "--allow-empty", "-m", "x"],
        ["tag", "-a", "v1", "-m", "v1"],
    ):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["pin", "--git", str(repo), "v1"])
    assert result.exit_code == 0, result.output
    target = tomllib.loads((tmp_path / "patchkit.toml").read_text())["target"]
    assert target["source"] == "git" and target["rev"] == head
    result = runner.invoke(app, ["pin", "--path", str(repo)])
    assert result.exit_code == 0
    assert tomllib.loads((tmp_path / "patchkit.toml").read_text())["target"]["path"] == str(repo)
    assert runner.invoke(app, ["pin", "vllm", "--path", str(repo)]).exit_code == 2
    assert "expected NAME==VERSION" in runner.invoke(app, ["pin", "vllm>=1"]).output
