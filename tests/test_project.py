"""The project context: one grammar for a pin, read in one place by every option that takes one; one
series default; what is read only when asked."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.errors import UserError
from patchkit.project import Project, parse_pin

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@e"]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A local git repository with a tag ``v1`` on a commit holding ``vllm/__init__.py``."""
    repo = tmp_path / "upstream"
    (repo / "vllm").mkdir(parents=True)
    (repo / "vllm" / "__init__.py").write_text("X = 1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"], ["tag", "-a", "v1", "-m", "v1"]):
        subprocess.run([*GIT, *args], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout
    return repo, head.strip()


@pytest.mark.parametrize(
    "text, url, rev",
    [
        ("git+https://github.com/vllm-project/vllm.git@v0.33.0", "https://github.com/vllm-project/vllm.git",
         "v0.33.0"),
        ("https://github.com/vllm-project/vllm@v0.33.0", "https://github.com/vllm-project/vllm", "v0.33.0"),
        ("git+ssh://git@github.com/org/vllm.git@main#egg=vllm", "ssh://git@github.com/org/vllm.git", "main"),
        ("git@github.com:org/vllm.git@v1.2", "git@github.com:org/vllm.git", "v1.2"),
        ("git+file:///srv/git/vllm@0123abc", "file:///srv/git/vllm", "0123abc"),
    ],
)  # fmt: skip
def test_a_git_url_at_a_revision_as_pip_and_uv_write_it(text, url, rev):
    spec = parse_pin(text)
    assert (spec.kind, spec.url, spec.rev) == ("git", url, rev)


def test_every_form_of_a_pin(tmp_path, repo):
    repo_dir, head = repo
    toml = tmp_path / "pin.toml"
    toml.write_text(f'[target]\nsource = "git"\nurl = "{repo_dir}"\nrev = "{head}"\n')
    assert parse_pin("vllm==0.33.0").kind == "index" and parse_pin(" vllm == 0.33.0 ").version == "0.33.0"
    assert parse_pin(str(toml)).kind == "config"
    assert parse_pin(str(repo_dir)).kind == "path"
    local = parse_pin(f"{repo_dir}@v1")  # a local repository at a tag: resolved to its commit, no network
    pin = local.pin()
    assert (pin.source, pin.url, pin.rev) == ("git", str(repo_dir.resolve()), head)
    assert parse_pin(str(toml)).pin() == parse_pin(f"git+file://{repo_dir}@{head}").pin().__class__(
        name="vllm", source="git", url=str(repo_dir), rev=head
    )
    for bad in ("vllm>=1", "https://github.com/vllm-project/vllm.git", str(tmp_path / "none.toml")):
        with pytest.raises(UserError) as err:
            parse_pin(bad, "--since")
        assert str(err.value).startswith(f"--since {bad}") or str(err.value).startswith(f"--since {bad!r}")


def test_pin_writes_the_same_target_from_either_spelling(tmp_path, monkeypatch, repo):
    repo_dir, head = repo
    monkeypatch.chdir(tmp_path)
    targets = []
    for args in (["--git", str(repo_dir), "v1"], [f"git+file://{repo_dir}@v1"], [f"{repo_dir}@v1"]):
        result = CliRunner().invoke(app, ["pin", *args])
        assert result.exit_code == 0, result.output
        targets.append(tomllib.loads((tmp_path / "patchkit.toml").read_text())["target"])
    assert [t["rev"] for t in targets] == [head] * 3
    assert {t["source"] for t in targets} == {"git"}


def test_one_series_default_and_nothing_read_until_asked(tmp_path):
    broken = tmp_path / "broken"
    deep = broken / "a" / "b"
    deep.mkdir(parents=True)
    (broken / "patchkit.toml").write_text('[series]\ndir = "mine"\n[target\n')  # broken past [series]
    project = Project(deep)
    assert project.config_file == broken / "patchkit.toml" and project.root == broken
    assert project.state_dir == broken / ".patchkit" and not project.state_dir.exists()
    assert project.overlay_root(tmp_path / "elsewhere") is None  # no overlays/ at the root: nothing read
    with pytest.raises(UserError):  # asked for the series dir: read, and the broken file said so
        _ = project.series_dir
    fine = tmp_path / "fine"
    fine.mkdir()
    (fine / "patchkit.toml").write_text('[series]\ndir = "mine"\n')
    assert Project(fine).series_dir == fine / "mine"
    bare = tmp_path / "bare"
    bare.mkdir()
    assert Project(bare).series_dir == bare / "patches" and Project(bare).config_file is None
    assert Project.resolve(config="vllm==0.33.0", cwd=bare).pin_option.kind == "index"


def test_a_pin_named_for_a_command_that_needs_one_says_how(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["checkout"])
    assert result.exit_code == 2
    assert "no pin: pass --config patchkit.toml (or vllm==X) (none found from here up)" in result.output


def test_a_pin_and_a_config_are_two_things(tmp_path, repo):
    """``--config`` names the project's file; a pin (``Project.resolve(pin=...)``, the one ``--pin`` an
    option vocabulary may give) names the base in any form, a toml's [target] included."""
    repo_dir, head = repo
    project_toml = tmp_path / "patchkit.toml"
    project_toml.write_text('[series]\ndir = "s"\n')
    other = tmp_path / "other.toml"
    other.write_text(f'[target]\nsource = "git"\nurl = "{repo_dir}"\nrev = "{head}"\n')
    both = Project.resolve(config=str(project_toml), pin=str(other), cwd=tmp_path)
    assert both.config_file == project_toml and both.series_dir == tmp_path / "s"
    assert (both.pin().source, both.pin().rev) == ("git", head)
    older = Project.resolve(config=f"{repo_dir}@v1", cwd=tmp_path)  # --config given a pin: still a pin
    assert older.config_file == project_toml and older.pin().rev == head
