"""``patchkit runtime``: a plugin's monkeypatch sites of every shape, resolved in a pin, compared with
an older pin, checked by a real import, and written as the audit's record and reports.

The plugin and both vLLM trees are ours (tests/fixtures/runtime/README.md says what differs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.audit.model import AuditResult
from patchkit.cli import app
from patchkit.report.html import render_html
from patchkit.report.junit import render_junit
from patchkit.report.markdown import render_markdown
from patchkit.report.validate import problems
from patchkit.report.words import fill_words
from patchkit.runtime.engine import RuntimeOptions, run_runtime
from patchkit.runtime.sites import scan_module
from patchkit.values import Pin

FIXTURE = Path(__file__).parent / "fixtures" / "runtime"
PLUGIN = FIXTURE / "plugin" / "myplugin" / "patch"
OLD, NEW = FIXTURE / "old", FIXTURE / "new"
runner = CliRunner()


def _pin(tree: Path, version: str) -> Pin:
    return Pin(source="path", path=str(tree), version=version)


def _run(tree: Path = NEW, old: Path | None = OLD, python: str | None = None) -> AuditResult:
    options = RuntimeOptions(_pin(tree, "0.2" if tree == NEW else "0.1"), tree,
                             _pin(old, "0.1") if old else None, old, python, timeout=120)  # fmt: skip
    return fill_words(run_runtime(PLUGIN, options))


def _targets(result: AuditResult) -> dict[str, object]:
    return {t.target: t for pa in result.patches for t in pa.targets}


def _one_module(tmp_path: Path, text: str, tree: Path = NEW, version: str = "0.2"):
    """The row of a one-module plugin of ours, against ``tree`` (no older pin)."""
    plugin = tmp_path / "plug"
    plugin.mkdir()
    (plugin / "patch_one.py").write_text(text)
    (row,) = fill_words(run_runtime(plugin, RuntimeOptions(_pin(tree, version), tree))).patches
    return row


def _row(result: AuditResult, name: str):
    return next(pa for pa in result.patches if pa.patch == name)


# --------------------------------------------------------------------------- every site shape


def _scan(name: str):
    path = PLUGIN / name
    return scan_module(name, f"myplugin.patch.{path.stem}", path.read_text())


def test_attribute_assignment_and_its_captured_original_are_found():
    scan = _scan("patch_assign.py")
    assert [(s.target, s.kind, s.line) for s in scan.sites] == [
        ("vllm.core.cache.allocate", "assign", 15),  # vllm.core.cache.allocate = allocate
        ("vllm.core.cache.BlockPool.free", "assign", 16),  # from ... import BlockPool; BlockPool.free = free
    ]
    assert scan.captures == {"vllm.core.cache.allocate": [4]}  # _orig_allocate = vllm.core.cache.allocate


def test_setattr_with_a_string_constant_name_is_found():
    scan = _scan("patch_setattr.py")
    assert [(s.target, s.kind) for s in scan.sites] == [("vllm.core.sched.Scheduler.schedule", "setattr")]


def test_a_class_swap_is_a_class_swap_against_the_base():
    assert [s.target for s in _scan("patch_swap.py").sites] == ["vllm.core.sched.Scheduler"]
    swap = _targets(_run())["vllm.core.sched.Scheduler"]
    assert swap.kind == "class-swap" and swap.status == "unchanged"
    assert swap.replacement == "OurScheduler" and swap.replacement_signature == "(self, config)"  # inherited


def test_registry_decorators_name_a_target_or_hand_over_a_module():
    targets = _targets(_run())
    init = targets[
        "vllm.core.cache.BlockPool.__init__"
    ]  # @register_patch("vllm.core.cache.BlockPool.__init__")
    assert init.kind == "decorator" and init.replacement == "pool_init" and init.status == "unchanged"
    policy = targets[
        "vllm.core.sched.DEFAULT_POLICY"
    ]  # @ImportPatch.register("vllm.core.sched"): module.X = ...
    assert policy.kind == "assign" and policy.guard == ["in patch_sched()"]
    assert "vllm.core.sched" not in targets  # the module itself is not a target
    assert not any(".__init__.num_blocks" in name for name in targets)  # pool_init's own self is not vLLM's


def test_a_target_that_moved_is_missing_and_says_where_it_went():
    moved = _targets(_run())["vllm.engine.utils.get_device_ids"]
    assert moved.status == "missing" and moved.old_defined_in == "vllm/engine/utils.py:4"
    assert moved.moved_to == ["vllm.platforms.devices.get_device_ids (vllm/platforms/devices.py:8)"]
    row = _row(_run(), "patch_moved.py")
    assert {g.gate: g.status for g in row.gates}["targets"] == "failed" and row.verdict == "needs-work"
    assert (
        "vllm/platforms/devices.py:8" in row.guide["lead"]["en"]
        and "vllm/platforms/devices.py:8" in row.guide["lead"]["zh"]
    )
    imported = {g.gate: g for g in row.gates}["targets"].details["imported_when"]
    assert imported == ["if VERSION != '0.1'"]  # the plugin's own __init__ imports it only then


# --------------------------------------------------------------------------- against the pins


def test_against_the_old_pin_every_target_is_present_and_the_plugin_is_ready():
    result = _run(OLD, None)
    assert {t.status for t in _targets(result).values()} == {"present"}
    assert result.verdict == "ready" and [g.gate for g in result.patches[0].gates] == [
        "targets",
        "signature",
        "uses",
    ]
    assert result.environment["modules_without_sites"] == ["__init__.py", "helpers.py"]


def test_since_an_older_pin_each_target_says_what_changed_with_the_upstream_diff():
    result = _run()
    targets = _targets(result)
    assert {name: t.status for name, t in targets.items()} == {
        "vllm.core.cache.allocate": "body-changed",
        "vllm.core.cache.BlockPool.free": "signature-changed",
        "vllm.engine.utils.get_device_ids": "missing",
        "vllm.core.cache.BlockPool.__init__": "unchanged",
        "vllm.core.sched.DEFAULT_POLICY": "unchanged",
        "vllm.core.sched.Scheduler.schedule": "unchanged",
        "vllm.core.sched.Scheduler": "unchanged",
    }
    allocate = targets["vllm.core.cache.allocate"]
    assert allocate.upstream_diff.splitlines() == [
        "diff --git a/vllm/core/cache.py b/vllm/core/cache.py",
        "--- a/vllm/core/cache.py",
        "+++ b/vllm/core/cache.py",
        "@@ -4,2 +4,3 @@ allocate",
        " def allocate(num_blocks, block_size=16):",
        "-    return [block_size] * num_blocks",
        "+    blocks = [block_size] * num_blocks",
        "+    return blocks[:num_blocks]",
    ]
    free = targets["vllm.core.cache.BlockPool.free"]
    assert free.old_signature == "(self, block)" and free.signature == "(self, block, *, force=False)"
    assert [p["en"] for p in free.signature_problems] == [
        "keyword `force` is not accepted by the replacement"
    ]
    assert free.signature_problems[0]["zh"] == "替换函数不接受关键字参数 `force`"
    assign = _row(result, "patch_assign.py")
    assert {g.gate: g.status for g in assign.gates} == {"targets": "passed", "signature": "failed",
                                                        "upstream": "failed", "uses": "passed"}  # fmt: skip
    assert "read this diff" in assign.guide["lead"]["en"] or "fit" in assign.guide["lead"]["en"]
    assert "@@ -4,2 +4,3 @@ allocate" in assign.diff  # the HTML shows it as a diff
    assert result.environment["counts"] == {
        "body-changed": 1,
        "missing": 1,
        "signature-changed": 1,
        "unchanged": 4,
    }


def test_the_plugins_registry_note_is_shown_beside_its_module():
    row = _row(_run(), "patch_assign.py")
    (item,) = row.registry["items"]
    assert item["targets"] == ["vllm.core.cache.allocate"]
    assert (
        item["why"] == "blocks must be aligned on our device."
        and item["pr"] == "https://example.invalid/pull/1"
    )
    assert item["how"] == "wrap allocate and round the block size."  # after a full-width colon
    assert _targets(_run())["vllm.core.cache.allocate"].registry == [item]


def test_a_replacement_that_uses_a_name_the_pin_lacks_fails_the_uses_gate(tmp_path):
    row = _one_module(
        tmp_path,
        "from vllm.engine.utils import get_device_ids\nimport vllm.core.cache\n\n\n"
        "def allocate(num_blocks, block_size=16):\n    return get_device_ids(num_blocks)\n\n\n"
        "vllm.core.cache.allocate = allocate\n",
    )
    assert {g.gate: g.status for g in row.gates}["uses"] == "failed"
    assert row.targets[0].uses == [
        {"name": "vllm.engine.utils.get_device_ids", "line": 6, "status": "absent"}
    ]
    assert "vllm.engine.utils.get_device_ids" in row.guide["lead"]["en"]


def test_a_setattr_whose_name_reading_cannot_evaluate_is_listed_not_settled(tmp_path):
    row = _one_module(
        tmp_path,
        "from vllm.core import sched\n\n\ndef name():\n    return 'schedule'\n\n\n"
        "setattr(sched.Scheduler, name(), lambda self: [])\n",
    )
    (target,) = row.targets
    assert (target.target, target.status, target.lines) == ("vllm.core.sched.Scheduler.?", "unknown", [8])
    assert {g.gate: g.status for g in row.gates}["targets"] == "could-not-run" and row.verdict == "incomplete"


def test_an_attribute_set_only_if_vllm_lacks_it_is_added_and_module_dunders_resolve(tmp_path):
    row = _one_module(
        tmp_path,
        "from vllm.core import cache\nfrom vllm.core.cache import BlockPool\n\n"
        "if not hasattr(BlockPool, 'grow'):\n    BlockPool.grow = lambda self, n: None\n"
        "NAME = cache.__name__\n",
    )
    (grow,) = row.targets
    assert (grow.target, grow.status, grow.guard) == (
        "vllm.core.cache.BlockPool.grow",
        "added",
        ["if not hasattr(BlockPool, 'grow')"],
    )
    assert {u["name"]: u["status"] for u in row.gates[-1].details["uses"]}["vllm.core.cache.__name__"] == "ok"
    assert row.verdict == "ready"


# --------------------------------------------------------------------------- the real witness


def test_the_real_import_agrees_with_the_static_answer(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(NEW))  # the interpreter's vllm is the pinned fake
    result = _run(python=sys.executable)
    found = [t for t in _targets(result).values() if t.status != "missing"]
    assert found and all(t.real["ran"] and t.real["agrees"] for t in found), [t.real for t in found]
    assert all(t.witness == "static+interpreter" for t in found)
    assert _targets(result)["vllm.engine.utils.get_device_ids"].real["exists"] is False
    assert {g.gate: g.status for g in _row(result, "patch_swap.py").gates}["witness"] == "passed"
    compared = _targets(result)["vllm.core.cache.allocate"].real["compared"]
    assert compared == ["exists", "kind", "signature", "source", "place"]


def test_what_reading_cannot_settle_the_real_import_settles_and_claims_no_agreement(tmp_path, monkeypatch):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(NEW, tree)
    lazy = "def __getattr__(name):\n    if name == 'thing':\n        return len\n    raise AttributeError"
    (tree / "vllm" / "lazy.py").write_text(lazy + "\n")
    monkeypatch.setenv("PYTHONPATH", str(tree))
    plugin = tmp_path / "plug"
    plugin.mkdir()
    (plugin / "patch_lazy.py").write_text("import vllm.lazy\n\nvllm.lazy.thing = print\n")
    options = RuntimeOptions(_pin(tree, "0.2"), tree, python=sys.executable, timeout=120)
    (row,) = fill_words(run_runtime(plugin, options)).patches
    (thing,) = row.targets
    assert (thing.status, thing.witness) == ("present", "interpreter")  # static: __getattr__, not settled
    assert thing.real["agrees"] is None and thing.real["compared"] == []
    witness = {g.gate: g for g in row.gates}["witness"]
    assert witness.status == "passed" and witness.message.params == {
        "count": 0,
        "settled": 1,
        "version": "None",
    }


def test_a_real_import_of_another_vllm_disagrees_and_says_where(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(OLD))  # static reads 0.2, the interpreter has 0.1
    result = _run(python=sys.executable)
    free = _targets(result)["vllm.core.cache.BlockPool.free"]
    assert free.real["agrees"] is False
    assert {
        "en": "signature: the static and the real parameters differ",
        "zh": "签名：静态与实际的参数不同",
    } in free.real["differences"]
    assert {g.gate: g.status for g in _row(result, "patch_assign.py").gates}["witness"] == "failed"


def test_an_interpreter_that_cannot_answer_makes_the_witness_could_not_run(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho no vllm here >&2\nexit 3\n")
    broken.chmod(0o755)
    result = _run(python=str(broken))
    gate = {g.gate: g for g in result.patches[0].gates}["witness"]
    assert gate.status == "could-not-run" and "exited 3: no vllm here" in gate.details["reason"]
    assert result.patches[0].verdict != "ready"


# --------------------------------------------------------------------------- record and reports


def test_the_record_round_trips_and_every_report_renders_in_both_languages():
    result = _run()
    record = json.loads(json.dumps(result.to_dict()))
    again = AuditResult.from_dict(record)
    assert problems(again) == []
    assert again.patches[0].targets[0].target == result.patches[0].targets[0].target
    for lang in ("en", "zh"):
        html = render_html(again, lang)
        assert "vllm.platforms.devices.get_device_ids" in html and "@@ -4,2 +4,3 @@ allocate" in html
        md = render_markdown(again, lang)
        assert "`vllm.engine.utils.get_device_ids`" in md
    assert "缺失" in render_markdown(again, "zh") and "blocks must be aligned" in render_markdown(again, "zh")
    junit = render_junit(again)
    assert 'testsuite name="patch_moved.py"' in junit and 'type="targets-failed"' in junit


def test_the_command_writes_the_reports_and_exits_by_verdict(tmp_path):
    pins = {}
    for name, tree in (("old", OLD), ("new", NEW)):
        pins[name] = tmp_path / f"{name}.toml"
        pins[name].write_text(f'[target]\nname = "vllm"\nsource = "path"\npath = "{tree}"\n')
    out = tmp_path / "rt.json"
    ready = runner.invoke(app, ["runtime", str(PLUGIN), "--pin", str(pins["old"]), "--json", str(out)])
    assert ready.exit_code == 0, ready.output
    args = ["runtime", str(PLUGIN), "--config", str(pins["new"]), "--since", str(pins["old"])]
    bump = runner.invoke(app, [*args, "--json", str(out), "--md", str(tmp_path / "rt.md")])
    assert bump.exit_code == 1, bump.output
    assert "patch_moved.py:8: missing: vllm.engine.utils.get_device_ids" in bump.output
    record = json.loads(out.read_text())
    assert record["environment"]["kind"] == "runtime" and len(record["patches"]) == 5
    assert (tmp_path / "rt.md").read_text().startswith("## Runtime patches of a vLLM plugin")


def test_a_bad_plugin_dir_or_module_is_one_line_exit_2(tmp_path):
    pin = tmp_path / "p.toml"
    pin.write_text(f'[target]\nname = "vllm"\nsource = "path"\npath = "{NEW}"\n')
    result = runner.invoke(app, ["runtime", str(tmp_path / "nowhere"), "--pin", str(pin)])
    assert result.exit_code == 2 and "not a directory" in result.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "patch_x.py").write_text("import vllm\nvllm.x = (\n")
    result = runner.invoke(app, ["runtime", str(tmp_path / "bad"), "--pin", str(pin)])
    assert result.exit_code == 2 and "patch_x.py:2" in result.output and "Traceback" not in result.output


@pytest.mark.skipif(os.name != "posix", reason="probe runs by path")
def test_the_probe_needs_no_patchkit():
    probe = (Path(__file__).parents[1] / "patchkit" / "runtime" / "probe.py").read_text()
    assert "patchkit" not in probe.split('"""', 2)[2]  # it runs in the user's interpreter


def test_targets_in_the_pinned_vllm_sdist(pinned_base, tmp_path):
    """A plugin of ours against the real vLLM 0.33.0 tree (the project's pin; lines checked with grep)."""
    row = _one_module(
        tmp_path,
        "import vllm.v1.core.kv_cache_utils\n"
        "from vllm.model_executor.layers.attention import mla_attention\n"
        "from vllm.v1.core.block_pool import BlockPool\n\n\n"
        "def get_block_hash(key):\n    return key\n\n\n"
        "def free_blocks(self, ordered_blocks, extra):\n    pass\n\n\n"
        "vllm.v1.core.kv_cache_utils.get_block_hash = get_block_hash\n"
        "BlockPool.free_blocks = free_blocks\n"
        "mla_attention.get_mla_prefill_backend = lambda vllm_config: None\n",
        pinned_base,
        "0.33.0",
    )
    found = {t.target: t for t in row.targets}
    assert (
        found["vllm.v1.core.kv_cache_utils.get_block_hash"].defined_in == "vllm/v1/core/kv_cache_utils.py:72"
    )
    free = found["vllm.v1.core.block_pool.BlockPool.free_blocks"]
    assert free.defined_in == "vllm/v1/core/block_pool.py:816"
    assert [p["en"] for p in free.signature_problems] == [
        "the replacement requires `extra`, which the original does not take"
    ]
    backend = found["vllm.model_executor.layers.attention.mla_attention.get_mla_prefill_backend"]
    assert backend.defined_in == "vllm/v1/attention/backends/mla/prefill/selector.py:46"  # two re-exports
    assert backend.via[0].startswith("vllm/model_executor/layers/attention/mla_attention.py:")
    assert {g.gate: g.status for g in row.gates} == {
        "targets": "passed",
        "signature": "failed",
        "uses": "passed",
    }


def test_every_runtime_message_is_in_both_catalogues_with_the_same_placeholders():
    import re
    import string

    from patchkit.report.i18n import catalogue
    from patchkit.runtime.gates import CHANGED
    from patchkit.runtime.guide import SEVERITY

    package = Path(__file__).parents[1] / "patchkit"
    text = "".join(p.read_text() for p in [*package.glob("runtime/*.py"), *package.glob("report/*.py")])
    families = r"gate\.runtime\.|runtime\.|ui\.runtime\.|(?:finding|follow|kind)\.runtime-"
    keys = set(re.findall(rf'"((?:{families})[a-z.+-]*[a-z])"', text))
    keys |= {f"{family}.{kind}" for kind in SEVERITY for family in ("finding", "follow", "kind")}
    keys |= {f"runtime.status.{status}" for status in CHANGED}
    statuses = "present unchanged body-changed signature-changed missing added new-upstream unknown".split()
    keys |= {f"ui.runtime.status.{s}" for s in statuses}
    keys |= {f"ui.runtime.witness.{w}" for w in ("static", "interpreter", "static+interpreter")}
    assert len(keys) > 60, sorted(keys)  # the scan found the literals, not nothing
    en, zh = catalogue("en"), catalogue("zh")
    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for key in sorted(keys):
        assert key in en and key in zh, key
        assert fields(en[key]) == fields(zh[key]), key


def test_since_takes_a_pin_file_or_a_version_on_the_index(tmp_path):
    from patchkit.commands.runtime import _since
    from patchkit.config import load_pin
    from patchkit.errors import UserError

    project = load_pin(Path(__file__).parents[1] / "patchkit.toml")
    assert _since(str(Path(__file__).parents[1] / "patchkit.toml")) == project
    by_version = _since(f"vllm=={project.version}")  # the index's sha256, as `patchkit pin` takes it
    assert (by_version.source, by_version.version, by_version.sha256) == (
        "index",
        project.version,
        project.sha256,
    )
    with pytest.raises(UserError, match="--since .*no-such.toml: no such file or directory"):
        _since(str(tmp_path / "no-such.toml"))
