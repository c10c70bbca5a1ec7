import json
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.audit.engine import in_shard, merge_results, parse_shard
from patchkit.audit.model import AuditResult, Evidence, GateResult, PatchAudit
from patchkit.audit.verdict import exit_code, verdict_reasons, worst
from patchkit.cli import app
from patchkit.errors import UserError
from patchkit.report.i18n import message_text
from patchkit.values import Pin

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"


def patch_verdict(gates):
    """The verdict and its reasons as the JSON record words them (report/ renders them)."""
    verdict, reasons = verdict_reasons(gates)
    return verdict, [message_text(reason) for reason in reasons]


def g(gate, status, summary="s"):
    """A gate result; a passed one carries a witness, as every gate's must (audit/verdict.py)."""
    evidence = [Evidence("tool", outcome="exit 0")] if status == "passed" else []
    return GateResult(gate, status, summary, evidence=evidence)


def test_verdict_ready_needs_work_blocked():
    assert patch_verdict([g("apply", "passed"), g("dco", "passed")]) == (
        "ready", ["all gates passed (apply, dco)"])  # fmt: skip
    verdict, reasons = patch_verdict([g("apply", "passed"), g("ruff", "failed", "1 finding")])
    assert verdict == "needs-work" and reasons == ["ruff failed: 1 finding"]
    verdict, _ = patch_verdict([g("apply", "failed"), g("dco", "failed"), g("ruff", "skipped")])
    assert verdict == "blocked"


def test_a_requested_gate_that_could_not_run_makes_the_patch_incomplete():
    verdict, reasons = patch_verdict([g("apply", "passed"), g("tests", "could-not-run", "no-accelerator")])
    assert verdict == "incomplete"
    assert reasons == ["tests could not run here: no-accelerator (the verdict is incomplete)"]
    # a failure still outranks it, and both reasons are listed
    verdict, reasons = patch_verdict([g("ruff", "could-not-run", "no ruff"), g("dco", "failed", "unsigned")])
    assert verdict == "needs-work" and len(reasons) == 2


def test_an_optional_gate_that_could_not_run_is_accepted_and_says_so():
    gates = [g("apply", "passed"), g("tests", "could-not-run", "no-accelerator")]
    verdict, reasons = verdict_reasons(gates, optional=["tests"])
    assert verdict == "ready"
    assert [message_text(r) for r in reasons] == [
        "tests could not run here: no-accelerator (accepted: the project marks tests optional)"
    ]
    assert verdict_reasons(gates, optional=["ruff"])[0] == "incomplete"


def test_exit_code_is_3_when_only_could_not_run_stands_in_the_way():
    def result(*verdicts):
        patches = [PatchAudit(f"{i:04d}-x.patch", "x", {}, [], v, []) for i, v in enumerate(verdicts)]
        return AuditResult("s", Pin(), patches, worst(list(verdicts)))

    assert exit_code(result("ready", "ready")) == 0
    assert exit_code(result("ready", "incomplete")) == 3
    assert exit_code(result("incomplete", "needs-work")) == 1
    assert worst(["incomplete", "ready"]) == "incomplete" and worst(["incomplete", "blocked"]) == "blocked"


def test_series_verdict_is_the_worst():
    assert worst(["ready", "blocked", "needs-work"]) == "blocked"
    assert worst(["ready", "needs-work"]) == "needs-work"
    assert worst([]) == "ready"


def test_shards_are_deterministic_and_cover_the_series_once():
    shards = [parse_shard(f"{i}/3") for i in (1, 2, 3)]
    owners = [[k for k, s in enumerate(shards) if in_shard(index, s)] for index in range(10)]
    assert all(len(o) == 1 for o in owners)
    assert [k for k in range(10) if in_shard(k, (2, 3))] == [1, 4, 7]
    for bad in ("0/2", "3/2", "x", "1-2"):
        with pytest.raises(UserError):
            parse_shard(bad)


def _result(names, shard, order):
    pin = Pin(tree_hash="h")
    patches = [PatchAudit(n, "d", {"en": n}, [g("dco", "passed" if "ok" in n else "failed")],
                          "ready" if "ok" in n else "needs-work", []) for n in names]  # fmt: skip
    return AuditResult("s", pin, patches, worst([p.verdict for p in patches]),
                       {"series_patches": order}, shard, "t")  # fmt: skip


def test_merge_restores_series_order_and_verdict():
    order = ["a-ok", "b", "c-ok", "d-ok"]
    merged = merge_results([_result(["b", "d-ok"], "2/2", order), _result(["a-ok", "c-ok"], "1/2", order)])
    assert [p.patch for p in merged.patches] == order
    assert merged.verdict == "needs-work" and merged.shard is None
    roundtrip = AuditResult.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert roundtrip.patches[1].patch == "b"


def test_merge_refuses_overlap_and_other_base():
    order = ["a-ok"]
    with pytest.raises(UserError):
        merge_results([_result(["a-ok"], "1/2", order), _result(["a-ok"], "2/2", order)])
    other = _result(["b"], "2/2", order)
    other.base = Pin(tree_hash="other")
    with pytest.raises(UserError):
        merge_results([_result(["a-ok"], "1/2", order), other])


def _cli_series(tmp_path, signed=True):
    base = fake_base(tmp_path / "base")
    trailers = SIGN if signed else ""
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    hub = file_diff("vllm/hub.py", None, "NAME = 1\n")
    patches = {
        "0001-calc.patch": patch_text(calc, trailers=trailers),
        "0002-hub.patch": patch_text(hub, trailers=trailers),
    }
    series = write_series(tmp_path / "series", patches)
    return base, series


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def test_cli_exit_codes_and_json(tmp_path):
    runner = CliRunner()
    base, series = _cli_series(tmp_path)
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "apply,dco", "--json", str(out)]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "ready" and [p["patch"] for p in data["patches"]] == [
        "0001-calc.patch",
        "0002-hub.patch",
    ]
    assert data["patches"][0]["files"] == [{"path": "vllm/calc.py", "added": 1, "removed": 1}]
    stages = {s["name"]: s for s in data["stages"]}  # where the time went
    assert stages["audit.total"]["seconds"] >= stages["audit.gates"]["seconds"] > 0
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "cached" in again.output
    assert "where the time went" not in again.output  # the stage table is for cold runs

    shard = runner.invoke(app, [*args[:-2], "--json", str(tmp_path / "s.json"), "--shard", "2/2"])
    assert shard.exit_code == 0
    assert [p["patch"] for p in json.loads((tmp_path / "s.json").read_text())["patches"]] == [
        "0002-hub.patch"
    ]


def test_cli_unsigned_is_exit_1_and_bad_input_exit_2(tmp_path):
    runner = CliRunner()
    base, series = _cli_series(tmp_path, signed=False)
    out = tmp_path / "a.json"
    failed = runner.invoke(
        app, ["audit", str(series), "--base", str(base), "--gates", "dco", "--json", str(out)]
    )
    assert failed.exit_code == 1
    assert json.loads(out.read_text())["patches"][0]["verdict"] == "needs-work"
    assert runner.invoke(app, ["audit", str(tmp_path), "--base", str(base)]).exit_code == 2
    assert runner.invoke(app, ["audit", str(series), "--base", str(base), "--gates", "frob"]).exit_code == 2
    assert runner.invoke(app, ["audit", str(series), "--base", str(base), "--shard", "3/2"]).exit_code == 2


def test_audit_outside_a_project_uses_the_series_split_json_base(tmp_path, monkeypatch):
    """A series split with --base carries that base in split.json; audit uses it when no
    patchkit.toml is in reach, and says what is missing when neither is there."""
    from typer.testing import CliRunner

    from patchkit.cli import app

    fixtures = Path(__file__).parent / "fixtures"
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    out = tmp_path / "series"
    split = runner.invoke(app, ["split", str(fixtures / "replays" / "tangled.mbox"),
                                "--base", str(fixtures / "base"), "--out", str(out)])  # fmt: skip
    assert split.exit_code == 0, split.output
    audit = runner.invoke(app, ["audit", str(out), "--gates", "apply", "--json", "a.json"])
    assert audit.exit_code == 0, audit.output
    assert json.loads((tmp_path / "a.json").read_text())["base"]["path"] == str(fixtures / "base")
    (out / "split.json").unlink()
    audit = runner.invoke(app, ["audit", str(out), "--gates", "apply", "--json", "b.json"])
    assert audit.exit_code == 2 and "no base" in audit.output


def test_cli_a_requested_gate_that_could_not_run_is_incomplete_exit_3(tmp_path, monkeypatch):
    from patchkit.tools.ruff_binary import RuffTool
    from patchkit.values import Message

    why = Message("ruff.why.none", {"reason": Message("ruff.why.no-pin", {"config": "x"}).to_dict()})
    monkeypatch.setattr("patchkit.audit.gates.ruff.tool_for", lambda trees: RuffTool(None, "", "none", why))
    base, series = _cli_series(tmp_path)
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "apply,ruff", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "incomplete"
    assert "ruff could not run here: no ruff could run" in data["patches"][0]["reasons"][0]
    accepted = CliRunner().invoke(app, [*args, "--optional-gates", "ruff", "--no-cache"])
    assert accepted.exit_code == 0, accepted.output
    data = json.loads(out.read_text())
    assert data["verdict"] == "ready" and data["environment"]["optional_gates"] == ["ruff"]
    assert "accepted: the project marks ruff optional" in data["patches"][0]["reasons"][0]
