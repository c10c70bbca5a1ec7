"""The base's coverage map (testrun/covermap): coverage's lines per context become scopes per test,
it round-trips through the cache, and a corrupt map or one of another base or environment is a
miss; which mapped tests a change affects (testrun/affected.split)."""

from pathlib import Path

import pytest

from patchkit import cache
from patchkit.analysis.scopes import MODULE
from patchkit.testrun import covermap
from patchkit.testrun.affected import EVERYTHING, split
from patchkit.testrun.pytestrun import TestSettings

POOL = "import os\n\nSIZE = 2\n\n\ndef grow(n):\n    return n * SIZE\n\n\ndef shrink(n):\n    return n - 1\n"
A, B, C = "tests.test_pool::test_grow", "tests.test_pool::test_shrink", "tests.test_other::test_env"
RAW = {
    "contexts": ["", "collect:tests/test_pool.py", A, B, C],
    "files": {
        "vllm/pool.py": {"0": [1, 3, 6, 10], "1": [1, 3, 6, 10], "2": [7], "3": [11]},
        "vllm/envs.py": {"4": [2]},
    },
}


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    return TestSettings(python="/venv/bin/python", base_root=tmp_path, base_hash="base-1")


ENV = {"python": "3.11.7", "torch": "2.13.0+cpu", "platform": "Linux", "machine": "x86_64", "pytest": "9.1.0"}


def maps() -> dict:
    return covermap.split(
        RAW, [A, B, C], ["tests/test_pool.py", "tests/test_other.py"], {"vllm/pool.py": POOL}.get
    )


def test_lines_per_context_become_scopes_per_test_and_an_import_counts_for_its_module():
    pool = maps()["tests/test_pool.py"]
    assert pool["tests"] == [A, B]
    scopes = pool["files"]["vllm/pool.py"]
    assert scopes["grow"] == [0] and scopes["shrink"] == [1]  # each test's own function
    assert scopes[MODULE] == [0, 1]  # the module's import (collect:) counts for both of its tests
    other = maps()["tests/test_other.py"]
    assert other["tests"] == [C] and other["files"] == {"vllm/envs.py": {MODULE: [0]}}  # not Python here


def test_the_map_round_trips_through_the_cache_and_a_corrupt_one_is_a_miss(settings):
    value = {
        **maps()["tests/test_pool.py"],
        "format": covermap.MAP_FORMAT,
        "base": "base-1",
        "environment": covermap.fingerprint(ENV),
    }
    key = covermap.map_key(settings, ENV, "tests/test_pool.py")
    cache.put_json(covermap.KIND, key, value)
    assert covermap.load(settings, ENV, ["tests/test_pool.py", "tests/test_other.py"]) == {
        "tests/test_pool.py": value
    }
    path = cache.json_path(covermap.KIND, key)
    path.write_text(path.read_text().replace("test_grow", "test_grew", 1))  # one edited byte
    assert covermap.load(settings, ENV, ["tests/test_pool.py"]) == {}


def test_a_map_of_another_base_or_environment_is_a_miss(settings):
    value = {
        **maps()["tests/test_pool.py"],
        "format": covermap.MAP_FORMAT,
        "base": "base-0",
        "environment": covermap.fingerprint(ENV),
    }
    cache.put_json(covermap.KIND, covermap.map_key(settings, ENV, "tests/test_pool.py"), value)
    assert (
        covermap.load(settings, ENV, ["tests/test_pool.py"]) == {}
    )  # written under our key, of another base
    value["base"] = "base-1"
    cache.put_json(covermap.KIND, covermap.map_key(settings, ENV, "tests/test_pool.py"), value)
    assert covermap.load(settings, {**ENV, "torch": "2.6.0+cpu"}, ["tests/test_pool.py"]) == {}  # another key
    assert covermap.map_key(settings, ENV, "p") != covermap.map_key(settings, {**ENV, "torch": "x"}, "p")
    # a map recorded on another vLLM platform (VLLM_TARGET_DEVICE) is another environment's
    assert covermap.fingerprint({**ENV, "vllm_target_device": "cpu"}) != covermap.fingerprint(ENV)
    assert covermap.load(settings, {**ENV, "vllm_target_device": "cpu"}, ["tests/test_pool.py"]) == {}
    assert list(covermap.load(settings, ENV, ["tests/test_pool.py"])) == ["tests/test_pool.py"]


def test_only_the_tests_that_ran_a_changed_scope_run_first():
    got = split(maps(), {"vllm/pool.py": {"shrink"}})
    assert got.unaffected == sorted([A, C]) and got.why == {"function": 1} and got.known == 3
    got = split(maps(), {"vllm/pool.py": {MODULE}})  # module-level: every test that executed a line of it
    assert got.unaffected == [C] and got.why == {"module": 2}
    got = split(maps(), {"tests/test_other.py": {"test_env"}, "vllm/unrun.py": {MODULE}})
    assert got.unaffected == [A, B] and got.why == {"test-file": 1}  # nobody ran unrun.py: nobody imported it
    got = split(maps(), {"vllm/pool.py": {"grow"}, "requirements/common.txt": {EVERYTHING}})
    assert got.unaffected == [] and got.why == {"everything": 3}


def test_build_records_contexts_per_test_in_a_real_run(tmp_path, monkeypatch):
    """coverage itself records the map: a tiny base, two tests, one function each (and a subprocess)."""
    import sys

    import coverage  # noqa: F401 - patchkit's [test] extra installs it; the test venv gets it pinned
    from fixtures.audit.builder import fake_base

    from patchkit.testrun.pytestrun import environment

    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    root = fake_base(tmp_path / "base")
    (root / "tests" / "test_spawn.py").write_text(
        "import subprocess, sys\n\n\ndef test_spawned():\n"
        "    code = 'from vllm.calc import hub_name; print(hub_name())'\n"
        "    assert subprocess.run([sys.executable, '-c', code], check=True).returncode == 0\n"
    )
    settings = TestSettings(python=sys.executable, base_root=root, base_hash="fake", test_timeout=120)
    env_info = environment(sys.executable)
    paths = ["tests/test_calc.py", "tests/test_spawn.py"]
    built = covermap.build(settings, env_info, paths, tmp_path / "work", lambda *a, **k: None, "t")
    assert isinstance(built, dict), built
    calc = built["tests/test_calc.py"]
    scopes = calc["files"]["vllm/calc.py"]
    tests = calc["tests"]
    assert [tests[i] for i in scopes["add"]] == ["tests.test_calc::test_add"]
    assert [tests[i] for i in scopes["scale"]] == ["tests.test_calc::test_scale"]
    spawn = built["tests/test_spawn.py"]  # the subprocess's lines carry the test that started it
    assert [spawn["tests"][i] for i in spawn["files"]["vllm/calc.py"]["hub_name"]] == [
        "tests.test_spawn::test_spawned"
    ]
    assert covermap.load(settings, env_info, paths) == built
    assert Path(tmp_path / "cache").is_dir()


def test_a_shared_fixtures_lines_belong_to_every_test_of_its_scope(tmp_path, monkeypatch):
    """A module-scoped fixture runs in the first test's setup only; the second test uses what it
    made, so a change of the code the fixture ran affects both (was: the first only)."""
    import sys

    import coverage  # noqa: F401
    from fixtures.audit.builder import fake_base

    from patchkit.testrun.pytestrun import environment

    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    root = fake_base(tmp_path / "base")
    (root / "tests" / "test_shared.py").write_text(
        "import pytest\n\nfrom vllm.calc import add\n\n\n@pytest.fixture(scope='module')\n"
        "def total():\n    return add(2, 3)\n\n\ndef test_first(total):\n    assert total == 5\n\n\n"
        "def test_second(total):\n    assert total > 0\n\n\ndef test_alone():\n    assert True\n"
    )
    settings = TestSettings(python=sys.executable, base_root=root, base_hash="fake", test_timeout=120)
    built = covermap.build(settings, environment(sys.executable), ["tests/test_shared.py"], tmp_path / "work",
                           lambda *a, **k: None, "t")  # fmt: skip
    assert isinstance(built, dict), built
    shared = built["tests/test_shared.py"]
    ran_add = {shared["tests"][i] for i in shared["files"]["vllm/calc.py"]["add"]}
    module = "tests.test_shared::"
    assert {module + "test_first", module + "test_second"} <= ran_add  # both depend on the fixture
    got = split(built, {"vllm/calc.py": {"add"}})
    assert module + "test_second" not in got.unaffected


def test_a_fixtures_context_names_the_tests_of_its_scope():
    by_file = {
        "tests/v1/test_a.py": ["a1", "a2"],
        "tests/v1/sub/test_b.py": ["b1"],
        "tests/test_c.py": ["c1"],
    }
    everyone = ["a1", "a2", "b1", "c1"]
    assert covermap.owners("fixture:module:tests/v1/test_a.py", by_file, everyone) == ["a1", "a2"]
    assert covermap.owners("fixture:class:tests/v1/test_a.py::TestX", by_file, everyone) == ["a1", "a2"]
    assert covermap.owners("fixture:package:tests/v1", by_file, everyone) == ["a1", "a2", "b1"]
    assert covermap.owners("fixture:package:tests/v1/__init__.py", by_file, everyone) == ["a1", "a2", "b1"]
    assert covermap.owners("fixture:session:", by_file, everyone) == everyone
    assert covermap.owners("collect:tests/test_c.py", by_file, everyone) == ["c1"]
    assert covermap.owners("c1", by_file, everyone) == ["c1"] and covermap.owners("", by_file, everyone) == []


def test_a_new_module_of_a_package_affects_every_test_and_a_new_test_file_only_its_own():
    from patchkit.testrun.affected import changes

    base = {"vllm/__init__.py": b"", "vllm/pool.py": POOL.encode(), "tests/test_pool.py": b""}
    new_module = changes(base.get, {}, {"vllm/plugin_b.py": b"X = 1\n"})
    assert new_module == {"vllm/plugin_b.py": {EVERYTHING}}  # a registry may import it by name
    assert split(maps(), new_module).unaffected == []
    gone = changes(base.get, {}, {"vllm/pool.py": None})
    assert gone == {"vllm/pool.py": {EVERYTHING}}
    script = changes(base.get, {}, {"examples/run_me.py": b"print(1)\n"})  # no package: nobody imports it
    assert script == {"examples/run_me.py": {MODULE}}
    test_file = changes(base.get, {}, {"tests/test_new.py": b"def test_x():\n    pass\n"})
    assert test_file == {"tests/test_new.py": {MODULE}}
    assert split(maps(), test_file).unaffected == sorted([A, B, C])  # its tests are new: they run
