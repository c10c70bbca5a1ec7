import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from fixtures.audit.builder import fake_base

from patchkit.testrun import testenv


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def test_steps_install_the_given_torch_requirements_and_test_tools(tmp_path):
    base = fake_base(tmp_path / "base")
    (base / "requirements").mkdir()
    (base / "requirements" / "common.txt").write_text("numpy\n")
    plan = dict(testenv.steps(tmp_path / "venv", base, "torch==2.6.0+cpu"))
    assert plan["torch (CPU)"][-1] == "torch==2.6.0+cpu"
    assert str(base / "requirements" / "common.txt") in plan["requirements/common.txt"]
    assert plan["test tools"][-5:] == [
        "pytest",
        "tblib",
        "pytest-timeout",
        "pytest-xdist",
        "coverage==7.10.6",
    ]
    assert testenv.requirements(base, "torch==2.6.0+cpu") == [
        "torch==2.6.0+cpu", "-r", str(base / "requirements" / "common.txt"),
        "pytest", "tblib", "pytest-timeout", "pytest-xdist", "coverage==7.10.6",
    ]  # fmt: skip


def test_key_follows_the_requirements(tmp_path):
    base = fake_base(tmp_path / "base")
    (base / "requirements").mkdir()
    (base / "requirements" / "common.txt").write_text("numpy\n")
    first = testenv.env_key(base)
    (base / "requirements" / "common.txt").write_text("numpy\nrich\n")
    assert testenv.env_key(base) != first
    assert testenv.ready_python(base) is None


def test_a_failing_step_raises_and_leaves_no_ready_env(tmp_path):
    base = fake_base(tmp_path / "base")
    with pytest.raises(testenv.TestEnvError):
        testenv.prepare(base, python=str(tmp_path / "no-such-python"))
    assert testenv.ready_python(base) is None


def test_pip_settings_reach_uv_in_the_form_uv_reads():
    pip = {"extra-index-url": "file:///a/simple file:///b/simple", "find-links": "/w1 /w2",
           "constraint": "/etc/c.txt", "no-index": "true"}  # fmt: skip
    env = testenv.uv_environment(pip, {"UV_CONSTRAINT": "/mine.txt"})
    assert env["UV_FIND_LINKS"] == "/w1,/w2"  # uv: comma-separated
    assert env["UV_EXTRA_INDEX_URL"] == "file:///a/simple file:///b/simple"
    assert env["UV_CONSTRAINT"] == "/mine.txt"  # the caller's own uv setting wins
    assert env["UV_NO_INDEX"] == "1"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # pip weighs every index alike


def test_uv_phases_are_read_from_its_report():
    report = (
        "Resolved 151 packages in 4.41s\nPrepared 151 packages in 23.32s\n"
        "Installed 151 packages in 710ms\nBytecode compiled 17567 files in 44.76s\n + torch==2.13.0\n"
    )
    assert testenv.uv_phases(report) == [
        ("resolve", 151, 4.41),
        ("download", 151, 23.32),
        ("link", 151, 0.71),
        ("compile", 17567, 44.76),
    ]


def _wheel(folder, name="tinypkg", version="1.0"):
    """A hand-made pure-Python wheel: enough for pip and uv to install offline."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    files[f"{name}-{version}.dist-info/RECORD"] = (
        "\n".join([*rows, f"{name}-{version}.dist-info/RECORD,,"]) + "\n"
    ).encode()
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_builds_offline_from_pips_find_links(tmp_path, monkeypatch, installer):
    # the only place the package exists is pip's find-links (an environment setting here): uv must see it
    _wheel(tmp_path / "wheels")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("PATCHKIT_INSTALLER", installer)
    for name in ("UV_FIND_LINKS", "UV_NO_INDEX", "UV_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(testenv, "requirements", lambda base, torch=None: ["tinypkg"])

    def pip_step(venv, base, torch=None):
        return [("tiny", [str(venv / "bin" / "python"), "-m", "pip", "install", "tinypkg"])]

    monkeypatch.setattr(testenv, "steps", pip_step)
    base = fake_base(tmp_path / "base")
    python = testenv.prepare(base)
    assert subprocess.run([python, "-c", "import tinypkg; assert tinypkg.VALUE == 42"]).returncode == 0
    assert testenv.ready_python(base) == python
    marker = json.loads((Path(python).parents[1] / testenv.READY).read_text())
    assert marker["installer"] == installer
