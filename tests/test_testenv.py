import pytest
from fixtures.audit.builder import fake_base

from patchkit.audit import testenv


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def test_steps_install_torch_requirements_and_test_tools(tmp_path):
    base = fake_base(tmp_path / "base")
    (base / "requirements").mkdir()
    (base / "requirements" / "common.txt").write_text("numpy\n")
    plan = dict(testenv.steps(tmp_path / "venv", base))
    assert plan["torch (CPU)"][-1] == "torch==2.13.0"
    assert str(base / "requirements" / "common.txt") in plan["requirements/common.txt"]
    assert plan["test tools"][-3:] == ["pytest", "tblib", "pytest-timeout"]


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
