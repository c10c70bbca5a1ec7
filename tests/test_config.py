from __future__ import annotations

from pathlib import Path

import pytest

from patchkit import config
from patchkit.errors import UserError

SHA = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"

FULL = f"""
[target]
name = "vllm"
source = "index"
version = "0.33.0"
sha256 = "{SHA}"

[series]
dir = "my-patches"
rules = "my-patches/domains.toml"
replays = ["replays/a.mbox", "/abs/b.patch"]

[audit]
gates = ["apply", "dco"]
jobs = 4
test_timeout = 600
per_test_timeout = 30.5
python = ".venv/bin/python"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "patchkit.toml"
    path.write_text(text)
    return path


def test_full_config(tmp_path: Path) -> None:
    cfg = config.load_config(write(tmp_path, FULL))
    assert cfg.root == tmp_path and cfg.file == tmp_path / "patchkit.toml"
    assert cfg.target is not None
    assert (cfg.target.name, cfg.target.source, cfg.target.version) == ("vllm", "index", "0.33.0")
    assert cfg.target.sha256 == SHA
    assert cfg.series.dir == tmp_path / "my-patches"
    assert cfg.series.rules == tmp_path / "my-patches" / "domains.toml"
    assert cfg.series.replays == [tmp_path / "replays" / "a.mbox", Path("/abs/b.patch")]
    assert cfg.audit.gates == ["apply", "dco"]
    assert (cfg.audit.jobs, cfg.audit.test_timeout, cfg.audit.per_test_timeout) == (4, 600, 30.5)
    assert cfg.audit.python == str(tmp_path / ".venv" / "bin" / "python")


def test_defaults(tmp_path: Path) -> None:
    cfg = config.load_config(write(tmp_path, ""))
    assert cfg.target is None
    assert cfg.series == config.SeriesConfig(dir=tmp_path / "patches")
    assert cfg.audit == config.AuditConfig()
    assert cfg.audit.gates == ["apply", "ruff", "dco", "tests"]
    assert (cfg.audit.jobs, cfg.audit.test_timeout, cfg.audit.per_test_timeout) == (2, 300, 60)
    assert cfg.audit.python is None


def test_bare_python_name_is_kept(tmp_path: Path) -> None:
    cfg = config.load_config(write(tmp_path, '[audit]\npython = "python3.11"\n'))
    assert cfg.audit.python == "python3.11"


def test_path_and_git_targets_resolve_relative_paths(tmp_path: Path) -> None:
    cfg = config.load_config(write(tmp_path, '[target]\nsource = "path"\npath = "../src"\n'))
    assert cfg.target is not None and cfg.target.path == str((tmp_path / ".." / "src").resolve())
    rev = "a" * 40
    for url, expected in [
        ("../repo", str((tmp_path / ".." / "repo").resolve())),
        ("https://github.com/vllm-project/vllm", "https://github.com/vllm-project/vllm"),
        ("git@github.com:vllm-project/vllm.git", "git@github.com:vllm-project/vllm.git"),
        ("/srv/vllm", "/srv/vllm"),
    ]:
        text = f'[target]\nsource = "git"\nurl = "{url}"\nrev = "{rev}"\n'
        target = config.load_config(write(tmp_path, text)).target
        assert target is not None and target.url == expected


def test_find_project_config_walks_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchkit.project import Project, find_config

    path = write(tmp_path, "")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == path
    monkeypatch.chdir(deep)
    assert Project.resolve().config_file == path
    assert Project.resolve().config.file == path
    assert find_config(tmp_path.parent) is None or tmp_path.parent != tmp_path


def test_project_config_without_file_is_defaults(tmp_path: Path) -> None:
    from patchkit.project import Project

    cfg = Project(tmp_path).config
    if cfg.file is None:  # unless some parent of tmp_path holds a patchkit.toml
        assert cfg.root == tmp_path and cfg.series.dir == tmp_path / "patches"


def test_load_pin(tmp_path: Path) -> None:
    assert config.load_pin(write(tmp_path, FULL)).sha256 == SHA
    with pytest.raises(UserError, match=r"no \[target\] table"):
        config.load_pin(write(tmp_path, "[audit]\njobs = 1\n"))


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[audit]\njobs = 2\ngatse = []\n", 3, "audit.gatse: unknown key"),
        ('[audit]\n\njobs = "2"\n', 3, "audit.jobs: expected an integer, got str '2'"),
        ("[audit]\njobs = 1.5\n", 2, "audit.jobs: expected an integer"),
        ("[audit]\njobs = true\n", 2, "audit.jobs: expected an integer, got bool"),
        ("[audit]\ntest_timeout = '5'\n", 2, "audit.test_timeout: expected a number of seconds"),
        ("[audit]\ntest_timeout = 0\n", 2, "audit.test_timeout: must be positive"),
        ('[audit]\ngates = ["apply", "frob"]\n', 2, "audit.gates: unknown gate 'frob'"),
        ("[audit]\ngates = []\n", 2, "audit.gates: no gate to run"),
        ('[audit]\nselect = "bogus"\n', 2, "audit.select: 'bogus' is not one of upstream, affected"),
        ("[series]\nreplays = 'a.mbox'\n", 2, "series.replays: expected a list of paths"),
        ("[series]\ndir = 3\n", 2, "series.dir: expected a non-empty string, got int 3"),
        ("[audit]\njobs = 1\n\n[targets]\nname = 'x'\n", 4, "unknown table or key 'targets'"),
        ("audit = 3\n", 1, "'audit' must be a table"),
        ('[target]\nsource = "index"\nversion = "1"\n', 1, "target.sha256: a pin with source"),
        ('[target]\nsource = "wheel"\n', 2, "target.source: pin source must be one of"),
        ('[target]\nsource = "git"\nurl = "x"\nrev = "main"\n', 4, "target.rev: pin rev must be"),
        ("[audit]\njobs = \n", 2, "invalid TOML"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as err:
        config.load_config(path)
    assert message in str(err.value)
    assert err.value.where == f"{path}:{line}"
    assert err.value.line().startswith(f"{path}:{line}: ")


def test_prepare_env_is_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "patchkit.toml"
    path.write_text("[audit]\nprepare_env = true\n")
    assert config.load_config(path).audit.prepare_env is True
    path.write_text("[audit]\nprepare_env = 1\n")
    with pytest.raises(UserError) as info:
        config.load_config(path)
    assert "audit.prepare_env" in str(info.value) and "true or false" in str(info.value)


def test_every_gate_of_the_registry_can_be_named_in_the_config(tmp_path):
    # [audit] gates once refused "imports" (and optional too): the config knew only the default gates
    from patchkit.audit.gates.registry import GATES

    path = tmp_path / "patchkit.toml"
    path.write_text('[audit]\ngates = ["apply", "imports", "lint"]\noptional = ["imports"]\n')
    audit = config.load_config(path).audit
    assert audit.gates == ["apply", "imports", "lint"] and audit.optional == ["imports"]
    path.write_text(f"[audit]\ngates = {list(GATES)!r}\n".replace("'", '"'))
    assert config.load_config(path).audit.gates == list(GATES)


def test_audit_optional_gates_are_read_and_checked(tmp_path):
    from patchkit.config import load_config

    path = tmp_path / "patchkit.toml"
    path.write_text('[audit]\noptional = ["tests"]\n')
    assert load_config(path).audit.optional == ["tests"]
    path.write_text('[audit]\noptional = ["frob"]\n')
    with pytest.raises(UserError, match="audit.optional: unknown gate 'frob'"):
        load_config(path)
