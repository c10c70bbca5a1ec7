import json
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit import timing
from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings, materialise
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.testrun.pytestrun import owns_bytecode, xdist_args
from patchkit.values import Pin

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def build(tmp_path: Path, patches: dict[str, str]):
    root = fake_base(tmp_path / "base")
    series = write_series(tmp_path / "series", patches)
    return BaseTree(root), Pin(source="path", path=str(root), tree_hash=tree_hash(root)), series


def audit(base, pin, series, gates=("apply", "tests"), use_cache=True):
    settings = TestSettings(python=sys.executable, base_root=base.root, base_hash=pin.tree_hash,
                            test_timeout=120, use_cache=use_cache)  # fmt: skip
    options = AuditOptions(gates=list(gates), jobs=2, use_cache=use_cache, settings={"tests": settings})
    return fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))


def gate(result, patch_index, name="tests"):
    return next(g for g in result.patches[patch_index].gates if g.gate == name)


def test_regressed_could_not_run_and_passed(tmp_path, cache):
    patches = {
        "0001-hub.patch": patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n"), trailers=SIGN),
        "0002-calc.patch": patch_text(
            file_diff("vllm/calc.py", CALC, CALC.replace("import os", "import os  # env")), trailers=SIGN
        ),  # fmt: skip
        "0003-calc.patch": patch_text(
            file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3")), trailers=SIGN
        ),
    }
    base, pin, series = build(tmp_path, patches)
    timing.reset()
    result = audit(base, pin, series)
    hub, ok, broken = gate(result, 0), gate(result, 1), gate(result, 2)
    ran = [s for s in timing.stages() if s.name.startswith("tests.pytest.")]
    # the regression of 0003 is run once more with the patch before it fails the gate (confirm)
    assert {s.name for s in ran} == {"tests.pytest.base", "tests.pytest.patch", "tests.pytest.patch-retry"}
    assert [s.detail.split(":")[0] for s in ran if s.name == "tests.pytest.patch-retry"] == [
        "0003-calc.patch"
    ]
    assert any(s.detail.startswith("0003-calc.patch") for s in ran) and timing.was_cold(ran)

    assert hub.status == "could-not-run"  # nothing ran: never passed
    assert hub.details["causes"] == {"no-accelerator": 1, "model-hub-unreachable": 1}
    assert hub.summary.startswith("no selected test passed with the patch")
    assert result.patches[0].verdict == "incomplete"  # a requested gate that could not run: never ready
    assert any("tests could not run here" in r and "incomplete" in r for r in result.patches[0].reasons)

    # base on demand: both tests passed with the patch, so the base was not needed for them
    assert ok.status == "passed" and ok.summary == "2 passed with the patch (base not needed); 0 regressed"
    assert broken.status == "failed"
    assert broken.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert "assert 12 == 8" in broken.details["messages"]["tests.test_calc::test_scale"]
    assert result.patches[2].verdict == "needs-work" and result.verdict == "needs-work"

    again = audit(base, pin, series)
    assert all(g.cached for pa in again.patches for g in pa.gates)
    assert [g.status for pa in again.patches for g in pa.gates] == [
        g.status for pa in result.patches for g in pa.gates
    ]
    assert list((cache / "audit-baseline").glob("*.json"))
    assert not (base.root / "tests" / "__pycache__").exists()  # the base is never written


def test_no_cache_runs_both_sides_and_writes_nothing(tmp_path, cache):
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))
    base, pin, series = build(tmp_path, {"0001-calc.patch": patch_text(calc, trailers=SIGN)})
    timing.reset()
    result = gate(audit(base, pin, series, use_cache=False), 0)
    assert result.status == "failed"
    assert result.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert result.details["baseline_cached_paths"] == 0
    ran = sorted(s.name for s in timing.stages() if s.name.startswith("tests.pytest."))
    assert ran == [
        "tests.pytest.base",
        "tests.pytest.patch",
        "tests.pytest.patch-retry",
    ]  # the retry: confirm
    assert not list(cache.glob("audit-baseline/*.json"))


def test_no_selected_test_is_could_not_run(tmp_path, cache):
    base, pin, series = build(tmp_path, {"0001-x.patch": patch_text(file_diff("docs/x.md", None, "x\n"))})
    result = audit(base, pin, series, use_cache=False)
    assert gate(result, 0).status == "could-not-run"
    assert not list(cache.glob("audit-gate/*.json"))  # --no-cache writes nothing


def test_materialise_never_edits_the_base(tmp_path):
    root = fake_base(tmp_path / "base")
    materialise(root, {"vllm/calc.py": b"changed\n", "vllm/__init__.py": None}, tmp_path / "copy")
    assert (root / "vllm" / "calc.py").read_text() == CALC
    assert (root / "vllm" / "__init__.py").exists()
    assert (tmp_path / "copy" / "vllm" / "calc.py").read_text() == "changed\n"
    assert not (tmp_path / "copy" / "vllm" / "__init__.py").exists()


def test_unprepared_environment_is_could_not_run(tmp_path, cache):
    calc = patch_text(file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a")))
    base, pin, series = build(tmp_path, {"0001-calc.patch": calc})
    settings = TestSettings(python=sys.executable, base_root=base.root, base_hash=pin.tree_hash,
                            env_error="torch==2.13.0: exit 1")  # fmt: skip
    options = AuditOptions(gates=["tests"], use_cache=False, settings={"tests": settings})
    result = fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))
    assert gate(result, 0).status == "could-not-run" and "torch==2.13.0" in gate(result, 0).summary


def test_a_patch_that_stops_pytest_from_reporting_fails(tmp_path, cache):
    """The base ran and passed; with the patch pytest cannot even start (a broken conftest):
    that is the patch's failure, not the environment's."""
    broken = "import vllm.calc\nthis is not python\n"
    diff = file_diff("vllm/calc.py", CALC, CALC.replace("import os", "import os  # env"))
    diff += file_diff("tests/conftest.py", None, broken)
    patches = {"0001-calc.patch": patch_text(diff, trailers=SIGN)}
    base, pin, series = build(tmp_path, patches)
    result = gate(audit(base, pin, series), 0)
    assert result.status == "failed"
    assert result.summary.startswith("the patched tree gives no test report (")
    assert result.details["base"] >= 1


def test_a_module_that_cannot_be_collected_does_not_hide_the_others(tmp_path, cache):
    ok = "def test_ok():\n    assert 1 + 1 == 2\n"
    platform = "raise RuntimeError('Unsupported platform')\n"
    diff = file_diff("tests/test_new_ok.py", None, ok) + file_diff("tests/test_new_cpu.py", None, platform)
    base, pin, series = build(tmp_path, {"0001-tests.patch": patch_text(diff, trailers=SIGN)})
    result = gate(audit(base, pin, series), 0)
    # both modules ran (one did not collect); the base never hit "Unsupported platform", so the
    # environment is not blamed: a new test module the patch adds that cannot even be collected
    assert result.status == "failed", result.summary
    assert "1 new-passed; 1 new-failed; 0 regressed" in result.summary
    assert result.details["counts"] == {"new-passed": 1, "new-failed": 1}
    assert result.details["causes"] == {}


def test_xdist_only_where_it_can_spread_the_work():
    info = {"xdist": True}
    assert xdist_args(2, info, ["tests/a/test_x.py", "tests/b/"]) == ["-n", "2", "--dist", "loadfile"]
    assert xdist_args(2, info, ["tests/a/"]) == ["-n", "2", "--dist", "loadfile"]
    assert xdist_args(2, info, ["tests/a/test_x.py"]) == []  # one module: one worker would take it all
    assert xdist_args(1, info, ["tests/a/", "tests/b/"]) == []
    assert xdist_args(4, {"xdist": False}, ["tests/a/", "tests/b/"]) == []  # not installed there


def test_a_cold_audit_prints_and_records_its_stages(tmp_path, cache, monkeypatch, capsys):
    from patchkit.commands.audit import Options, run
    from patchkit.project import Project

    calc = patch_text(
        file_diff("vllm/calc.py", CALC, CALC.replace("import os", "import os  # env")), trailers=SIGN
    )
    base, pin, series = build(tmp_path, {"0001-calc.patch": calc})
    (tmp_path / "patchkit.toml").write_text(f'[series]\nrules = "{FAKE_TREE / "domains.toml"}"\n')
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "a.json"
    options = Options(series, "apply,tests", python=sys.executable, json_out=out)
    args = (Project.resolve(base=base.root), options)
    assert run(*args) == 0
    table = capsys.readouterr().err
    assert (
        "where the time went" in table and "tests.base-on-demand" in table and "tests.pytest.patch" in table
    )
    names = [s["name"] for s in json.loads(out.read_text())["stages"]]
    assert {"tests.base-on-demand", "tests.pytest.patch", "audit.gates", "audit.total"} <= set(names)
    assert "tests.pytest.base" not in names  # every test passed with the patch: no base side ran

    assert run(*args) == 0  # warm: every gate cached, no pytest, no table
    assert "where the time went" not in capsys.readouterr().err
    assert not [s for s in json.loads(out.read_text())["stages"] if s["name"].startswith("tests.")]


def test_only_patchkits_own_test_venv_gets_bytecode_written(cache):
    assert owns_bytecode(str(cache / "testenv" / "venv-0123" / "bin" / "python"))
    assert not owns_bytecode(sys.executable)  # somebody else's interpreter: never written to


def test_progress_reports_gates_with_n_of_m_and_live_pytest_counts_per_side(tmp_path, cache):
    diff = file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))  # test_scale: base needed
    base, pin, series = build(tmp_path, {"0001-calc.patch": patch_text(diff, trailers=SIGN)})
    settings = TestSettings(
        python=sys.executable, base_root=base.root, base_hash=pin.tree_hash, test_timeout=120
    )
    events = []
    options = AuditOptions(gates=["apply", "tests"], settings={"tests": settings}, progress=events.append)
    result = fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))
    assert gate(result, 0).summary == "1 passed with the patch (base not needed); 1 regressed"
    kinds = [(e.kind, e.gate, e.number, e.total) for e in events if e.kind != "tests"]
    gates = [(kind, name, 1, 1) for name in ("apply", "tests") for kind in ("gate-start", "gate-done")]
    assert kinds == [*gates, ("patch-done", "", 1, 1)]
    live = [(e.side, e.done, e.selected) for e in events if e.kind == "tests"]
    assert live and {side for side, _, _ in live} == {"base", "patched"}  # pytest's own "[ 2/2]"
    assert ("patched", 2, 2) in live and ("base", 1, 1) in live  # the base ran only the failing test


def test_plain_progress_lines_for_logs(tmp_path):
    import io

    from patchkit.audit.model import ProgressEvent
    from patchkit.ui.progress import AuditProgress

    stream = io.StringIO()
    with AuditProgress(stream) as tell:
        tell(ProgressEvent("gate-start", "0002-x.patch", 2, 4, gate="tests"))
        tell(ProgressEvent("tests", "0002-x.patch", 2, 4, gate="tests", side="base", done=12, selected=296))
        tell(ProgressEvent("gate-done", "0002-x.patch", 2, 4, gate="tests", status="passed", seconds=61.25))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("patchkit: [00:0") and lines[0].endswith(
        "[2/4] 0002-x.patch tests on base: 12/296 tests"
    )
    assert lines[1].endswith("[2/4] 0002-x.patch tests: passed (61.2 s)")


def test_a_base_run_that_times_out_after_the_patched_side_could_not_run(tmp_path, cache, monkeypatch):

    from patchkit.testrun import basesides

    sides, real_side = [], basesides.run_side
    monkeypatch.setattr(basesides, "run_side", lambda *args: sides.append(args[5]) or real_side(*args))
    diff = file_diff("vllm/calc.py", CALC, CALC.replace("import os", "import os  # env"))
    base, pin, series = build(tmp_path, {"0001-calc.patch": patch_text(diff, trailers=SIGN)})
    settings = TestSettings(
        python=sys.executable, base_root=base.root, base_hash=pin.tree_hash, test_timeout=0.01
    )
    events = []
    options = AuditOptions(gates=["apply", "tests"], settings={"tests": settings}, progress=events.append)
    result = fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))
    assert gate(result, 0).status == "could-not-run"
    assert gate(result, 0).summary == "base run: timeout: pytest did not finish in 0.01 s"
    assert sides == ["patch", "base"]  # the patched side first; it hung, so the whole base is needed
    assert result.patches[0].verdict == "incomplete"


def test_a_hung_hard_link_copy_times_out_and_copies_instead(tmp_path, monkeypatch):
    """`cp -al` has a timeout (issue 14, item 14): when it expires the base is copied in-process."""
    import subprocess as sp

    from patchkit.audit.gates import tests as gate_tests

    base = tmp_path / "base"
    (base / "vllm").mkdir(parents=True)
    (base / "vllm" / "calc.py").write_text("x = 1\n")
    seen = []

    def hung(args, **kw):
        seen.append(kw.get("timeout"))
        raise sp.TimeoutExpired(args, kw.get("timeout"))

    monkeypatch.setattr(sp, "run", hung)  # what patchkit.proc runs every process with
    gate_tests.materialise(base, {"vllm/new.py": b"y = 2\n"}, tmp_path / "tree")
    assert seen and all(t == gate_tests.LINK_TIMEOUT for t in seen)
    assert (tmp_path / "tree" / "vllm" / "calc.py").read_text() == "x = 1\n"
    assert (tmp_path / "tree" / "vllm" / "new.py").read_text() == "y = 2\n"


@pytest.mark.parametrize("jobs", [1, 2])  # 2: the two gates run at once; one waits for the other's run
def test_patches_whose_selections_overlap_run_a_shared_path_on_the_base_once(tmp_path, cache, jobs):
    """Two independent patches of vllm/calc.py both break test_scale, the second also adds
    tests/test_more.py: the selections differ, yet test_scale's base side (needed by both: it did
    not pass with the patch) runs once and the other patch reuses it; each patched side runs."""
    patches = {
        "0001-calc.patch": patch_text(
            file_diff("vllm/calc.py", CALC, CALC + "\n\ndef scale(x):\n    return x * 4\n"), trailers=SIGN
        ),
        "0002-calc.patch": patch_text(
            file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))
            + file_diff("tests/test_more.py", None, "def test_more():\n    assert True\n"),
            trailers=SIGN,
        ),
    }
    base, pin, series = build(tmp_path, patches)
    settings = TestSettings(python=sys.executable, base_root=base.root, base_hash=pin.tree_hash,
                            test_timeout=120)  # fmt: skip
    options = AuditOptions(gates=["apply", "tests"], jobs=jobs, settings={"tests": settings})
    timing.reset()
    result = fill_words(run_audit(series, base, pin, load_rules(FAKE_TREE / "domains.toml"), options))
    ran = [s.name for s in timing.stages() if s.name.startswith("tests.pytest.")]
    assert sorted(ran) == [
        "tests.pytest.base",
        "tests.pytest.patch",
        "tests.pytest.patch",
        "tests.pytest.patch-retry",
        "tests.pytest.patch-retry",
    ]  # each regression confirmed
    first, second = gate(result, 0), gate(result, 1)
    assert set(first.details["selection"]) < set(second.details["selection"])
    # test_calc's base side came from the other gate's run (its cache entry) in exactly one of them
    shared = sorted([first.details["base_on_demand"]["cached"], second.details["base_on_demand"]["cached"]])
    assert shared == [0, 1], shared
    assert first.status == "failed" and second.status == "failed"  # the shared base still compares
    assert first.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert second.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]


def test_vllm_platform_is_the_cpu_one_where_torch_is_a_cpu_build():
    from patchkit.testrun.pytestrun import target_device

    assert target_device("2.13.0+cpu", {}) == ("cpu", "torch 2.13.0+cpu is a CPU build")
    assert target_device("2.6.0+cpu.cxx11.abi", {})[0] == "cpu"
    for not_cpu in ("2.13.0", "2.6.0+cu124", "2.5.1+rocm6.2", None, "not a version"):
        assert target_device(not_cpu, {})[0] is None, not_cpu
    # the caller's own setting wins, whatever torch is
    assert target_device("2.13.0+cpu", {"VLLM_TARGET_DEVICE": "cuda"}) == ("cuda", "set in the environment")


def test_the_tests_run_on_the_platform_the_environment_names(tmp_path):
    """A real pytest run sees VLLM_TARGET_DEVICE=cpu when the interpreter's torch is a CPU build, and
    nothing when it is not (vLLM's own default then)."""
    from patchkit.testrun.pytestrun import environment, platform_env, run_pytest

    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_platform.py").write_text(
        "import os\n\ndef test_device():\n    assert os.environ.get('VLLM_TARGET_DEVICE') == 'cpu'\n"
    )
    settings = TestSettings(python=sys.executable, base_root=tree, base_hash="x", test_timeout=120)
    found = environment(sys.executable)
    assert "vllm_target_device" in found and "vllm_target_device_from" in found
    for device, status in (("cpu", "passed"), (None, "failed")):
        env_info = {**found, "vllm_target_device": device}
        assert platform_env(env_info) == ({"VLLM_TARGET_DEVICE": "cpu"} if device else {})
        outcomes = run_pytest(settings, tree, ["tests/test_platform.py"], env_info, lambda *_: None)
        assert [o.status for o in outcomes.values()] == [status], (device, outcomes)
