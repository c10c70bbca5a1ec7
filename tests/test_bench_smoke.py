"""CI-sized smoke run of the benchmark harness (bench/): table + JSON with medians and ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import synth
from bench.cases import patchkit_command
from bench.measure import growth_exponent
from bench.run import main


def test_synthetic_replay_is_deterministic_and_shaped_like_opt21_25(tmp_path: Path) -> None:
    first = synth.generate(tmp_path / "a", scale=1)
    second = synth.generate(tmp_path / "b", scale=1)
    assert first.mbox.read_bytes() == second.mbox.read_bytes()
    assert (first.commits, first.files) == (9, 22)
    assert 70 <= first.hunks <= 110 and 1800 <= first.added <= 3000
    mbox = first.mbox.read_text("utf-8")
    assert mbox.count("\nSigned-off-by: ") == 9 and "new file mode 100644" in mbox
    assert "fallback = true" in first.rules.read_text("utf-8")


def test_synthetic_replay_splits_with_proof(tmp_path: Path) -> None:
    replay = synth.generate(tmp_path / "s", scale=1)
    out = tmp_path / "out"
    proc = subprocess.run(
        [*patchkit_command(), "split", str(replay.mbox), "--base", str(replay.base),
         "--rules", str(replay.rules), "--out", str(out), "--json", str(tmp_path / "split.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "split.json").read_text("utf-8"))
    assert record["proof"]["ok"] is True
    domains = {p["domain"] for p in record["patches"]}
    assert {"alpha", "beta"} <= domains  # several domains, from path and pattern rules
    assert any(a["mixed"] for a in record["assignments"])  # a hunk holding two domains' lines


def test_harness_prints_table_and_writes_medians_and_ratios(tmp_path: Path, capsys) -> None:
    out = tmp_path / "bench.json"
    code = main(["--sizes", "1", "--runs", "2", "--cases", "split", "--json", str(out),
                 "--work", str(tmp_path / "work")])  # fmt: skip
    assert code == 0
    table = capsys.readouterr().out
    assert "median s" in table and "ratio" in table and "split+proof synthetic 1x" in table
    data = json.loads(out.read_text("utf-8"))
    assert data["runs"] == 2
    # measured as users run it: a regular install in a new venv, not this editable checkout
    assert data["install"].startswith("regular `pip install`") and "regular `pip install`" in table
    split = next(c for c in data["cases"] if c["name"] == "split+proof synthetic 1x")
    assert split["available"], split["reason"]
    assert len(split["samples_s"]) == 2 and split["median_s"] > 0 and split["peak_rss_mb"] > 0
    assert split["baseline"].startswith("git apply") and split["baseline_median_s"] > 0
    assert split["ratio"] == pytest.approx(split["median_s"] / split["baseline_median_s"], rel=0.01)


def test_growth_exponent_is_the_log_log_slope() -> None:
    assert growth_exponent([1, 10, 100], [0.5, 5.0, 50.0]) == pytest.approx(1.0)
    assert growth_exponent([1, 10], [1.0, 100.0]) == pytest.approx(2.0)
    assert growth_exponent([1], [1.0]) is None


def test_module_entry_point_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench", "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1])  # fmt: skip
    assert proc.returncode == 0 and "--replay" in proc.stdout


def test_hot_paths_load_only_what_they_use(tmp_path: Path) -> None:
    from bench.hotpath import import_profile

    series = tmp_path / "series"
    replay = synth.generate(tmp_path / "s", scale=1)
    split = [*patchkit_command(), "split", str(replay.mbox), "--base", str(replay.base),
             "--rules", str(replay.rules), "--out", str(series)]  # fmt: skip
    assert subprocess.run(split, capture_output=True).returncode == 0
    heavy = ("patchkit.audit", "patchkit.report", "patchkit.split", "patchkit.base.pin", "rich", "jinja2")
    help_ = import_profile(["--help"], 1, tmp_path)
    assert "patchkit.cli" in help_["patchkit_modules"] and help_["total_ms"] > 0
    # the wiring only: the CLI and what every command does alike (-q/-v, --json -, --config)
    wiring = [
        "patchkit",
        "patchkit.cli",
        "patchkit.cli.root",  # the Typer app, the verb -> module table, main
        "patchkit.cli.options",  # the options verbs share, and invoke (a verb imports its command when run)
        "patchkit.cli.conventions",
        "patchkit.cli.crash",  # the one crash handler
        *(f"patchkit.cli.{m}" for m in ("series", "target", "setup", "audit", "edit", "ci")),  # --help: all
        "patchkit.choices",  # the names the CLI and patchkit.toml accept alike (no imports of its own)
        "patchkit.commands",
        "patchkit.entry",  # the console script
        "patchkit.commands.outcome",  # how a command's result becomes an exit code
        "patchkit.project",  # EDIT_DIR, the edit verbs' default (nothing else of it runs)
        "patchkit.ui",
        "patchkit.ui.console",  # -q/-v and --color
        "patchkit.errors",
    ]
    assert sorted(help_["patchkit_modules"]) == sorted(wiring)
    status = import_profile(["status", "--target", "checkout", "--path", str(replay.base)], 1, tmp_path)
    assert "patchkit.commands.status" in status["patchkit_modules"]
    assert "patchkit.diff.parse" not in status["patchkit_modules"]  # no series to read, no parser
    check = ["apply", str(series), "--target", "checkout", "--path", str(replay.base), "--check"]
    loaded = import_profile(check, 1, tmp_path)
    assert "patchkit.apply.plan" in loaded["patchkit_modules"]
    assert not [m for m in loaded["patchkit_modules"] if m.startswith(heavy)], loaded["patchkit_modules"]
    trace = [sys.executable, "-X", "importtime", "-m", "patchkit", *check]
    traced = subprocess.run(trace, capture_output=True, text=True, cwd=tmp_path)
    assert " patchkit.apply.plan\n" in traced.stderr
    assert "tomllib" not in traced.stderr  # patchkit.toml is only looked for, not read
    # only the named command is built; the CLI still reads as a whole
    one = subprocess.run([*patchkit_command(), "apply", "--help"], capture_output=True, text=True)
    assert one.returncode == 0 and "Usage: patchkit apply [OPTIONS] [SERIES_DIR]" in one.stdout
    typo = subprocess.run([*patchkit_command(), "aply"], capture_output=True, text=True)
    assert typo.returncode == 2 and "Did you mean 'apply'" in typo.stderr


def test_main_builds_one_command_and_leaves_the_app_whole(monkeypatch) -> None:
    from patchkit import cli

    before = list(cli.app.registered_commands)
    monkeypatch.setattr(sys, "argv", ["patchkit", "status", "--help"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 0
    assert cli.app.registered_commands == before and len(before) > 1  # in-process callers see every command


def test_table_prints_a_one_sample_case_without_baseline() -> None:
    """The cold main job is one run with no baseline: the table shows it, '-' for the baseline."""
    from bench.cases import CaseResult
    from bench.measure import Samples
    from bench.run import render_table

    cold = CaseResult("5", "main job (cold)", Samples(["x"], wall=[1268.1], cpu=[0.0], max_rss_kb=[0]))
    cold.target, cold.verdict = "one run <= 300 s", "MISS"
    table = render_table([cold], {}, 5)
    row = next(line for line in table.splitlines() if line.startswith("5 "))
    assert "1268.100" in row and "MISS" in row and " - " in row


def test_floor_plugin_counts_the_tests_that_run_the_root_cleanup(tmp_path: Path) -> None:
    """The testfloor case's collect-only plugin, on a small project shaped like vLLM's tests/: the
    root conftest's autouse cleanup, a marker that skips it, a subdirectory that overrides it."""
    from bench.testfloor import collect, in_selection

    tests = tmp_path / "tree" / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.fixture()\n"
        "def should_do_global_cleanup_after_test(request):\n"
        "    return not request.node.get_closest_marker('skip_global_cleanup')\n"
        "@pytest.fixture(autouse=True)\n"
        "def cleanup_fixture(should_do_global_cleanup_after_test):\n"
        "    yield\n"
    )
    (tests / "test_a.py").write_text(
        "import pytest\n"
        "def test_pays(): pass\n"
        "@pytest.mark.skip_global_cleanup\n"
        "def test_marked(): pass\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_param(n): pass\n"
    )
    (tests / "sub" / "conftest.py").write_text(
        "import pytest\n@pytest.fixture()\ndef should_do_global_cleanup_after_test():\n    return False\n"
    )
    (tests / "sub" / "test_b.py").write_text("def test_overridden(): pass\n")
    (tests / "test_c.py").write_text("def test_elsewhere(): pass\n")
    (tmp_path / "tree" / "pytest.ini").write_text("[pytest]\nmarkers =\n    skip_global_cleanup: none\n")
    items = collect(sys.executable, tmp_path / "tree", ["tests/test_a.py", "tests/sub"], tmp_path / "work")
    assert items == {
        "tests/test_a.py::test_pays": True,
        "tests/test_a.py::test_marked": False,
        "tests/test_a.py::test_param[1]": True,
        "tests/test_a.py::test_param[2]": True,
        "tests/sub/test_b.py::test_overridden": None,
    }
    assert in_selection("tests/test_a.py::test_pays", ["tests/test_a.py"])
    assert in_selection("tests/sub/test_b.py::test_overridden", ["tests/sub"])
    assert not in_selection("tests/sub_other/test_x.py::t", ["tests/sub"])
    assert not in_selection("tests/test_a.py_old::t", ["tests/test_a.py"])


def test_floor_case_reports_a_failed_step_as_a_row(tmp_path: Path) -> None:
    """An audit JSON whose tests interpreter cannot run: the case prints "failed: ...", not a crash."""
    from bench.testfloor import testfloor_cases

    audit = tmp_path / "audit.json"
    base = tmp_path / "base"
    base.mkdir()
    (base / "README.md").write_text("a base of ours\n")
    audit.write_text(json.dumps({
        "base": {"source": "path", "path": str(base)},
        "environment": {"tests": {"interpreter": str(tmp_path / "no-such-python")}},
        "patches": [],
    }))  # fmt: skip
    [row] = testfloor_cases(1, tmp_path / "work", audit)
    assert row.candidate is None and row.unavailable.startswith("failed: ")
    no_tests = tmp_path / "no-tests.json"
    no_tests.write_text(json.dumps({"environment": {}, "patches": []}))
    [row] = testfloor_cases(1, tmp_path / "work", no_tests)
    assert row.unavailable == "not available: the audit ran no tests gate"


def test_reaudit_edits_exactly_one_added_line_and_reads_the_record() -> None:
    from bench.reaudit import edit, summarise

    patch = "@@ -1,2 +1,3 @@\n ctx\n+    return x * 2\n+    y = 1\n"
    assert edit(patch, "    return x * 2", "    return x * 3") == patch.replace("x * 2", "x * 3")
    with pytest.raises(SystemExit, match="exactly one added line"):
        edit(patch, "ctx", "other")  # a context line is not an added line
    record = {"patches": [{"patch": "0001-a.patch", "gates": [
        {"gate": "tests", "status": "passed", "cached": False, "duration": 12.34,
         "details": {"groups": {"first": 3, "rest": 0, "carried": 40, "left_out": 2},
                     "base_on_demand": {"run": 1, "cached": 5, "carried": 2},
                     "counts": {"passed": 43}}}]}]}  # fmt: skip
    got = summarise(record)["0001-a.patch"]
    assert (got["patched_ran"], got["patched_carried"], got["left_out"]) == (3, 40, 2)
    assert (got["base_run"], got["base_cached"], got["base_carried"], got["seconds"]) == (1, 5, 2, 12.3)
    record["patches"][0]["gates"][0]["details"]["groups"] = {"first": 3, "rest": 7}  # upstream, grouped
    assert summarise(record)["0001-a.patch"]["patched_ran"] == 10
