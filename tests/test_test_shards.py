"""Test-level shards (issue 28): ``--shard I/N`` splits the test files of the whole audit, balanced
by recorded durations; ``patchkit report`` merges the shards into the unsharded record."""

from __future__ import annotations

import json
import sys

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.testplan import durations_from, expand, owner, plan
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.commands import report
from patchkit.errors import UserError
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
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


def _audit(project, shard=None):
    root, series, rules = project
    pin = Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    settings = TestSettings(python=sys.executable, base_root=root, base_hash=pin.tree_hash, test_timeout=120,
                            use_cache=False)  # fmt: skip
    options = AuditOptions(gates=["apply", "dco", "tests"], jobs=1, use_cache=False, shard=shard,
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
            gate["details"].pop("path_seconds", None)  # JUnit's times
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
