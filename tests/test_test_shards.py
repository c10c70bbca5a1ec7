"""Test-level shards (issue 28): ``--shard I/N`` splits the test files of the whole audit, balanced
by recorded durations; ``patchkit report`` merges the shards into the unsharded record."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.commands import report
from patchkit.errors import UserError
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.testrun.testplan import SECONDS_KEYS, durations_from, expand, owner, plan
from patchkit.values import Pin

SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
PASSING = "def test_{n}():\n    assert {n!r}\n"


def test_plan_balances_by_durations_and_falls_back_to_counts():
    units = {f"tests/test_{k}.py": 1 for k in "abcdef"}
    durations = {"tests/test_a.py": 60, "tests/test_b.py": 30, "tests/test_c.py": 20, "tests/test_d.py": 10,
                 "tests/test_e.py": 10, "tests/test_f.py": 10}  # fmt: skip
    by_time = plan(units, durations, 2)
    loads = [sum(durations[f] for f, s in by_time.items() if s == k) for k in (1, 2)]
    assert loads == [70, 70]  # longest first onto the least loaded: a d | b c e f
    by_count = plan(units, {}, 3)
    assert sorted(list(by_count.values()).count(k) for k in (1, 2, 3)) == [2, 2, 2]
    assert plan(units, durations, 2) == by_time  # every runner computes the same plan
    assert owner("tests/test_zzz.py", by_time, 2) == owner("tests/test_zzz.py", {}, 2)  # unknown: stable


def test_a_selected_directory_is_expanded_into_its_test_files():
    listing = {"tests/tool/": ["tests/tool/test_a.py", "tests/tool/test_b.py"]}
    found = expand(["tests/tool/", "tests/test_x.py", "tests/tool/test_a.py"], lambda p: listing.get(p, []))
    assert found == ["tests/tool/test_a.py", "tests/tool/test_b.py", "tests/test_x.py"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    root = fake_base(tmp_path / "base")
    (root / "tests" / "tool").mkdir()
    for k in range(4):  # a selected directory of four test files (expanded for the shards)
        (root / "tests" / "tool" / f"test_t{k}.py").write_text(PASSING.format(n=f"t{k}"))
    regress = file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))
    patches = {
        "0001-calc.patch": patch_text(regress + file_diff("tests/test_extra.py", None, PASSING.format(n="e")),
                                     trailers=SIGN),
        "0002-hub.patch": patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n"), trailers=SIGN),
        "0003-tool.patch": patch_text(
            file_diff("tests/tool/test_t1.py", PASSING.format(n="t1"), "def test_t1():\n    assert 0\n")
            + file_diff("vllm/tool.py", None, "X = 1\n"),
            trailers=SIGN,
        ),
    }  # fmt: skip
    series = write_series(tmp_path / "series", patches)
    rules = tmp_path / "domains.toml"
    rules.write_text((FAKE_TREE / "domains.toml").read_text().replace(
        '[[domain]]\nname = "other"',
        '[[domain]]\nname = "tool"\ntitle = { en = "Tool", zh = "Tool" }\npaths = ["vllm/tool.py"]\n'
        'tests = ["tests/tool/"]\n\n[[domain]]\nname = "other"'))  # fmt: skip
    return root, series, rules


def _audit(project, shard=None, gates=("apply", "dco", "tests")):
    root, series, rules = project
    pin = Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    settings = TestSettings(python=sys.executable, base_root=root, base_hash=pin.tree_hash, test_timeout=120,
                            use_cache=False)  # fmt: skip
    options = AuditOptions(gates=list(gates), jobs=1, use_cache=False, shard=shard,
                           settings={"tests": settings})  # fmt: skip
    return fill_words(run_audit(series, BaseTree(root), pin, load_rules(rules), options))


TIMINGS = ("created", "stages", "shard")


def _normal(record: dict) -> dict:
    """A record minus timings (and what says it was sharded)."""
    out = {k: v for k, v in record.items() if k not in TIMINGS}
    out["environment"] = {
        k: v for k, v in record["environment"].items() if k not in ("test_shards", "merged_shards")
    }
    for pa in out["patches"]:
        for gate in pa["gates"]:
            gate.pop("duration", None)
            gate.pop("cached", None)
            gate["details"].get("base_on_demand", {}).pop("saved_seconds", None)
            for key in SECONDS_KEYS:  # JUnit's times
                gate["details"].pop(key, None)
    return out


@pytest.mark.parametrize("shards", [2, 3])
def test_merged_shards_equal_the_unsharded_audit_minus_timings(project, tmp_path, shards):
    whole = _audit(project)
    tests_gates = [next(g for g in pa.gates if g.gate == "tests") for pa in whole.patches]
    assert [g.status for g in tests_gates] == ["failed", "could-not-run", "failed"]  # what the fixture says
    files = []
    for i in range(1, shards + 1):
        part = _audit(project, (i, shards))
        assert part.environment["test_shards"]["shard"] == f"{i}/{shards}"
        ran = {f for pa in part.patches for g in pa.gates if g.gate == "tests"
               for f in g.details.get("shard_part", {}).get("files", [])}  # fmt: skip
        files.append(ran)
        path = tmp_path / f"audit-{i}.json"
        path.write_text(json.dumps(part.to_dict()))
    assert sum(len(f) for f in files) == len(set().union(*files))  # each test file in one shard only
    assert {"tests/tool/test_t0.py", "tests/tool/test_t3.py"} <= set().union(*files)  # the dir, expanded
    merged = report.merge([report.load(tmp_path / f"audit-{i}.json") for i in range(1, shards + 1)])
    expected = json.loads(json.dumps(whole.to_dict()))
    differences = list(_diff(_normal(json.loads(json.dumps(merged.to_dict()))), _normal(expected)))
    assert not differences, "\n".join(differences[:20])
    assert merged.verdict == whole.verdict


def test_a_patchs_other_gates_run_on_one_shard_and_the_merge_finishes_its_guide(project, tmp_path):
    """The lint-like gates of the patch at index k run on shard k % N + 1 only (every shard runs its
    apply check); the merge takes each from the shard that ran it and finishes the guide from them:
    the F821 finding of ruff, which only that shard saw, is in the merged guide and the series lead
    as in the unsharded record."""
    root, series, rules = project
    undefined = file_diff("vllm/hub.py", None, "def hub() -> Registry:\n    return None\n")  # F821
    (series / "0002-hub.patch").write_text(patch_text(undefined, trailers=SIGN))
    gates = ("apply", "ruff", "dco", "tests")
    whole = _audit(project, gates=gates)
    ruff = next(g for g in whole.patches[1].gates if g.gate == "ruff")
    assert ruff.status == "failed" and "F821" in json.dumps(ruff.details)
    kinds = [f["kind"] for f in whole.patches[1].guide["findings"]]
    assert "undefined-name" in kinds  # the gate's finding, added when the guide is finished
    for i in (1, 2):
        part = _audit(project, (i, 2), gates)
        for k, pa in enumerate(part.patches):
            by_gate = {g.gate: g for g in pa.gates}
            assert by_gate["apply"].message.key.startswith("gate.apply.")  # every shard: the apply check
            for name in ("ruff", "dco"):
                here = k % 2 + 1 == i
                assert (by_gate[name].message.key != "gate.other-shard") == here, (i, k, name)
                if not here:
                    assert by_gate[name].status == "could-not-run"
                    assert by_gate[name].message.params == {"shard": f"{i}/2", "runs_on": f"{k % 2 + 1}/2"}
        if i == 2:  # 0002's ruff ran on shard 2: shard 1's guide of it lacks the finding
            assert "undefined-name" in [f["kind"] for f in part.patches[1].guide["findings"]]
        else:
            assert "undefined-name" not in [f["kind"] for f in part.patches[1].guide["findings"]]
        (tmp_path / f"audit-{i}.json").write_text(json.dumps(part.to_dict()))
    merged = report.merge([report.load(tmp_path / f"audit-{i}.json") for i in (1, 2)])
    assert next(g for g in merged.patches[1].gates if g.gate == "ruff").status == "failed"
    expected = json.loads(json.dumps(whole.to_dict()))
    got = json.loads(json.dumps(merged.to_dict()))
    assert "unfinished" not in json.dumps([pa["guide"] for pa in got["patches"]])
    differences = list(_diff(_normal(got), _normal(expected)))
    assert not differences, "\n".join(differences[:20])
    assert merged.verdict == whole.verdict == "needs-work"


def test_shards_of_different_plans_or_a_missing_shard_are_refused(project, tmp_path):
    one, two = _audit(project, (1, 2)), _audit(project, (2, 2))
    with pytest.raises(UserError, match="missing 2/2"):
        report.merge([one, one])
    two.environment["test_shards"]["plan"] = "0" * 16
    with pytest.raises(UserError, match="planned differently"):
        report.merge([one, two])


def test_durations_come_from_a_record_for_the_next_sharded_run(project):
    whole = _audit(project)
    durations = durations_from(json.loads(json.dumps(whole.to_dict())))
    assert {"tests/test_calc.py", "tests/tool/test_t0.py", "tests/test_extra.py"} <= set(durations)
    assert all(isinstance(v, float) and v >= 0 for v in durations.values())


def test_the_shard_record_says_how_it_was_balanced(project):
    root, series, rules = project
    part = _audit(project, (1, 2))
    assert part.environment["test_shards"]["balanced_by"] == "counts"
    (series / "test-durations.json").write_text(json.dumps({"tests/test_calc.py": 5.0}))
    part = _audit(project, (1, 2))
    assert part.environment["test_shards"]["balanced_by"] == "recorded durations"
    assert part.environment["test_shards"]["recorded"] == 1


def _diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            yield from _diff(a.get(k), b.get(k), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b)):
            yield from _diff(x, y, f"{path}[{k}]")
    elif a != b:
        yield f"{path}: {str(a)[:300]} != {str(b)[:300]}"


# --------------------------------------------------------------------------- issue 28: test-id units

BIG = (
    "import importlib.util\n\nimport pytest\n\n\n"
    "@pytest.mark.parametrize('k', range(6))\ndef test_many(k):\n    assert k >= 0\n\n\n"
    "def test_fails_on_both():\n    assert 0\n\n\n"
    "def test_no_tool_module():  # passes on the base; the tool patch adds vllm/tool.py\n"
    "    has_tool = importlib.util.find_spec('vllm.tool') is not None\n    assert not has_tool\n"
)
BIG_IDS = [f"tests.tool.test_big::test_many[{k}]" for k in range(6)] + [
    "tests.tool.test_big::test_fails_on_both", "tests.tool.test_big::test_no_tool_module"]  # fmt: skip


def test_a_heavy_file_is_split_by_test_id_and_the_plan_is_the_same_on_every_runner():
    from patchkit.testrun.testplan import heavy, owns, shard_files, split_files

    units = {"tests/test_big.py": 1, "tests/test_a.py": 1, "tests/test_b.py": 2}
    durations = {"tests/test_big.py": 80.0, "tests/test_a.py": 5.0, "tests/test_b.py": 5.0}
    assert heavy(units, durations, 4) == ["tests/test_big.py"]  # 80 > 0.25 * 90 / 4; 5 is not
    assert heavy(units, {}, 4) == [] and heavy(units, durations, 1) == []  # nothing recorded / one shard
    ids = {"tests/test_big.py": [f"tests.test_big::test_{k}" for k in range(8)]}
    assignment = plan(units, durations, 4, ids)
    again = plan(dict(reversed(units.items())), dict(reversed(durations.items())), 4,
                 {f: list(t) for f, t in ids.items()})  # fmt: skip
    assert assignment == again  # deterministic: input order does not matter
    split = split_files(assignment)["tests/test_big.py"]
    assert len(set(split.values())) == 4  # 8 tests of 10 s each over the 4 shards
    wholes = ("tests/test_a.py", "tests/test_b.py")
    loads = [
        10.0 * list(split.values()).count(k) + 5.0 * sum(assignment[f] == k for f in wholes)
        for k in (1, 2, 3, 4)
    ]
    assert sorted(loads) == [20.0, 20.0, 25.0, 25.0]  # whole files stay whole; the big one is spread
    home = assignment["tests/test_big.py"]
    assert home == split["tests.test_big::test_0"]  # a split file's home: the shard of its first test
    assert owner("tests.test_big::test_unknown", assignment, 4) == home  # a test the plan lacks: home
    for k in range(1, 5):  # every shard runs the big file (it owns tests of it); each test has one owner
        assert "tests/test_big.py" in shard_files(list(units), assignment, (k, 4))
    for test_id in [*ids["tests/test_big.py"], "tests.test_big::test_unknown", "tests.test_a::test_x"]:
        assert sum(owns(test_id, assignment, (k, 4)) for k in range(1, 5)) == 1


@pytest.fixture
def heavy_project(project):
    root, series, rules = project
    (root / "tests" / "tool" / "test_big.py").write_text(BIG)
    recorded = {"tests/tool/test_big.py": 100.0, "tests/test_calc.py": 1.0, "tests/tool/test_t0.py": 1.0}
    (series / "test-durations.json").write_text(json.dumps(recorded))
    return project


@pytest.mark.parametrize("shards", [2, 3])
def test_a_big_file_split_across_shards_merges_into_the_unsharded_record(heavy_project, tmp_path, shards):
    whole = _audit(heavy_project)
    tool = next(g for g in whole.patches[2].gates if g.gate == "tests")
    assert "tests.tool.test_big::test_no_tool_module" in tool.details["tests"]["regressed"]
    assert "tests.tool.test_big::test_fails_on_both" in tool.details["tests"]["still-failing"]
    ran: dict[str, list[int]] = {}
    plans = set()
    for i in range(1, shards + 1):
        part = _audit(heavy_project, (i, shards))
        info = part.environment["test_shards"]
        assert info["split"] == {"tests/tool/test_big.py": len(BIG_IDS)}  # collected by pytest itself
        plans.add(info["plan"])
        gate = next(g for g in part.patches[2].gates if g.gate == "tests")
        for test_id in gate.details.get("shard_part", {}).get("patched") or {}:
            ran.setdefault(test_id, []).append(i)
        (tmp_path / f"audit-{i}.json").write_text(json.dumps(part.to_dict()))
    assert len(plans) == 1  # every runner computed the same plan
    big = {t: s for t, s in ran.items() if t.startswith("tests.tool.test_big::")}
    assert sorted(big) == sorted(BIG_IDS) and all(len(s) == 1 for s in big.values())  # each test once
    assert len({s[0] for s in big.values()}) == shards  # the one file ran on every shard, split
    merged = report.merge([report.load(tmp_path / f"audit-{i}.json") for i in range(1, shards + 1)])
    expected = json.loads(json.dumps(whole.to_dict()))
    differences = list(_diff(_normal(json.loads(json.dumps(merged.to_dict()))), _normal(expected)))
    assert not differences, "\n".join(differences[:20])
    assert merged.verdict == whole.verdict


def test_the_audit_starts_the_longest_recorded_tests_first(project):
    from patchkit.audit.engine import load_patches
    from patchkit.audit.gates.apply import series_states
    from patchkit.audit.shardplan import longest_first

    root, series, rules = project
    base = BaseTree(root)
    patches = load_patches(series, load_rules(rules))
    states = series_states(base, patches)
    settings = TestSettings(python=sys.executable, base_root=root, base_hash="")

    def order() -> list[str]:
        return [p.name for p in longest_first(series, base, patches, states, settings)]

    assert order() == [
        "0001-calc.patch",
        "0002-hub.patch",
        "0003-tool.patch",
    ]  # nothing recorded: series order
    recorded = {"tests/tool/test_t2.py": 50.0, "tests/test_calc.py": 5.0}
    (series / "test-durations.json").write_text(json.dumps(recorded))
    assert order() == ["0003-tool.patch", "0001-calc.patch", "0002-hub.patch"]  # LPT: the tool tests first
    shard = {"tests/tool/test_t2.py": 1, "tests/test_calc.py": 2}  # a shard counts only its own files
    settings = TestSettings(python=sys.executable, base_root=root, base_hash="", shard=(2, 2), plan=shard)
    assert order()[0] == "0001-calc.patch"


def test_a_split_files_slow_tests_weigh_their_recorded_seconds_and_the_rest_share_the_remainder():
    """One test of a heavy file takes most of its time (the record's ``test_seconds``): it gets a shard
    of its own and the file's other tests share the rest — not an even share each."""
    from patchkit.audit.gates.tests import test_seconds
    from patchkit.testrun.testplan import split_files
    from patchkit.testrun.testselect import Outcome

    patched = {"tests.test_big::test_slow": Outcome("failed", seconds=120.0),
               **{f"tests.test_big::test_{k}": Outcome("passed", seconds=0.4) for k in range(7)}}  # fmt: skip
    slow = test_seconds(patched)
    assert slow == {"tests.test_big::test_slow": 120.0}  # only the slow one is recorded by id
    details = {"path_seconds": {"tests/test_big.py": 122.8, "tests/test_a.py": 3.0}, "test_seconds": slow}
    record = {"patches": [{"gates": [{"gate": "tests", "details": details}]}]}
    durations = durations_from(record)
    assert durations["tests.test_big::test_slow"] == 120.0 and durations["tests/test_big.py"] == 122.8
    ids = {"tests/test_big.py": list(patched)}
    assignment = plan({"tests/test_big.py": 1, "tests/test_a.py": 1}, durations, 2, ids)
    split = split_files(assignment)["tests/test_big.py"]
    alone = split["tests.test_big::test_slow"]
    assert [t for t, k in split.items() if k == alone] == ["tests.test_big::test_slow"]  # a shard of its own
    assert assignment["tests/test_a.py"] != alone  # the other shard takes the rest


def test_a_test_that_needs_its_base_run_weighs_both_sides_and_a_shard_orders_by_its_own_tests_seconds():
    """Base on demand runs the base side of a test that did not pass with the patch: the durations
    file counts that run too (the record's ``base_*_seconds``), so the slow failing test weighs both
    sides; and a shard's patch order weighs its own tests of a split file by their seconds, not by
    how many of the file's tests it owns."""
    from patchkit.audit.gates.tests import path_seconds, test_seconds
    from patchkit.audit.shardplan import _share
    from patchkit.testrun.testselect import Outcome

    patched = {"tests.test_big::test_hangs": Outcome("timeout", seconds=120.0),
               **{f"tests.test_big::test_{k}": Outcome("passed", seconds=0.5) for k in range(5)}}  # fmt: skip
    base = {"tests.test_big::test_hangs": Outcome("timeout", seconds=120.0)}  # run on demand: only it
    details = {"path_seconds": path_seconds(patched), "test_seconds": test_seconds(patched),
               "base_path_seconds": path_seconds(base), "base_test_seconds": test_seconds(base)}  # fmt: skip
    assert details["base_path_seconds"] == {"tests/test_big.py": 120.0}
    record = {"patches": [{"gates": [{"gate": "tests", "details": details}]}]}
    durations = durations_from(record)
    assert durations["tests.test_big::test_hangs"] == 240.0  # both sides, not the patched one only
    assert durations["tests/test_big.py"] == 242.5
    assignment = {"tests.test_big::test_hangs": 1, **{f"tests.test_big::test_{k}": 2 for k in range(5)},
                  "tests/test_big.py": 1}  # fmt: skip
    one = TestSettings(
        python=sys.executable, base_root=Path("."), base_hash="", shard=(1, 2), plan=assignment
    )
    two = replace(one, shard=(2, 2))
    assert _share("tests/test_big.py", one, durations) == pytest.approx(240.0 / 242.5)  # 1 test of 6
    assert _share("tests/test_big.py", two, durations) == pytest.approx(2.5 / 242.5)  # 5 tests of 6
    assert _share("tests/test_big.py", one, {}) == pytest.approx(1 / 6)  # nothing recorded: by counts


def test_a_heavy_files_recorded_ids_split_it_without_a_collection(heavy_project, tmp_path, monkeypatch):
    """The durations file's ``@tests`` (from the last record's pytest JUnit ids) split a heavy file
    with no ``--collect-only`` first; a test the list lacks runs once, on its file's home shard."""
    from patchkit.audit import shardplan
    from patchkit.testrun.testplan import TESTS_KEY

    root, series, rules = heavy_project
    recorded = json.loads((series / "test-durations.json").read_text())
    listed = [t for t in BIG_IDS if not t.endswith("test_no_tool_module")]  # new since the record
    recorded[TESTS_KEY] = {"tests/tool/test_big.py": listed}
    (series / "test-durations.json").write_text(json.dumps(recorded))
    whole = _audit(heavy_project)

    def no_collection(*args, **kwargs):
        raise AssertionError("collected although the ids are recorded")

    monkeypatch.setattr(shardplan, "collect_ids", no_collection)
    ran: dict[str, list[int]] = {}
    for i in (1, 2):
        part = _audit(heavy_project, (i, 2))
        info = part.environment["test_shards"]
        assert info["split"] == {"tests/tool/test_big.py": len(listed)}
        assert info["split_ids_from"] == {"tests/tool/test_big.py": "recorded"}
        gate = next(g for g in part.patches[2].gates if g.gate == "tests")
        for test_id in gate.details.get("shard_part", {}).get("patched") or {}:
            ran.setdefault(test_id, []).append(i)
        (tmp_path / f"audit-{i}.json").write_text(json.dumps(part.to_dict()))
    assert sorted(t for t in ran if "test_big::" in t) == sorted(BIG_IDS)
    assert all(len(s) == 1 for s in ran.values())  # each test once, the unlisted one too
    assert len({ran[t][0] for t in listed}) == 2  # the file was split over both shards
    home = ran[listed[0]]  # a split file's home: the shard of its first listed test
    assert ran["tests.tool.test_big::test_no_tool_module"] == home
    merged = report.merge([report.load(tmp_path / f"audit-{i}.json") for i in (1, 2)])
    expected = json.loads(json.dumps(whole.to_dict()))
    differences = list(_diff(_normal(json.loads(json.dumps(merged.to_dict()))), _normal(expected)))
    assert not differences, "\n".join(differences[:20])


def test_a_records_slow_files_list_their_tests_for_the_next_plan():
    from patchkit.audit.gates.tests import LISTED_FILE, file_tests
    from patchkit.testrun.testplan import TESTS_KEY, tests_from
    from patchkit.testrun.testselect import Outcome

    side = {"tests.a::test_2": Outcome("passed", seconds=LISTED_FILE), "tests.a::test_1": Outcome("failed"),
            "tests.b::test_1": Outcome("passed", seconds=LISTED_FILE - 1)}  # fmt: skip
    assert file_tests(side) == {"tests/a.py": ["tests.a::test_1", "tests.a::test_2"]}  # b is too fast
    record = {"patches": [
        {"gates": [{"gate": "tests", "details": {"file_tests": {"tests/a.py": ["tests.a::test_2"]}}}]},
        {"gates": [{"gate": "tests", "details": {"file_tests": {"tests/a.py": ["tests.a::test_1"],
                                                                "tests/c.py": ["tests.c::x"]}}},
                   {"gate": "lint", "details": {"file_tests": {"tests/z.py": ["nope"]}}}]},
    ]}  # fmt: skip
    assert tests_from(record) == {"tests/a.py": ["tests.a::test_1", "tests.a::test_2"],
                                  "tests/c.py": ["tests.c::x"]}  # fmt: skip
    assert TESTS_KEY not in durations_from(record) and not any("/" not in k for k in durations_from(record))
