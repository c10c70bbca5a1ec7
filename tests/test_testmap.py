import pytest

from patchkit.diff.model import FilePatch
from patchkit.report.i18n import message_text
from patchkit.testrun.testselect import (
    Outcome,
    classify_environment,
    compare,
    expand_template,
    module_of,
    parse_junit,
    select_tests,
    summary_message,
)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("RuntimeError: Cannot access accelerator device when none is available.", "no-accelerator"),
        ("RuntimeError: No CUDA GPUs are available", "no-accelerator"),
        ("AssertionError: Torch not compiled with CUDA enabled", "no-accelerator"),
        ("RuntimeError: Unsupported platform: cpu", "unsupported-platform"),
        ("OSError: We couldn't connect to 'https://huggingface.co'", "model-hub-unreachable"),
        ("huggingface_hub.errors.OfflineModeIsEnabled: offline", "model-hub-unreachable"),
        ("huggingface_hub.errors.LocalEntryNotFoundError: no file", "model-hub-unreachable"),
        ("requests.exceptions.ConnectionError: boom", "model-hub-unreachable"),
        ("ModuleNotFoundError: No module named 'flash_attn'", "missing-package"),
        ("ImportError: No module named 'triton.language'", "missing-package"),
        ("Failed: Timeout >60.0s", "timeout"),
        ("collection failure\nSyntaxError in conftest", "collection-error"),
    ],
)
def test_each_environment_rule_matches_its_cause(text, rule):
    assert classify_environment(text) == rule


@pytest.mark.parametrize(
    "text",
    [
        "AssertionError: assert 3 == 4",
        "ModuleNotFoundError: No module named 'vllm.v1.missing'",  # our own package: a code error
        "ModuleNotFoundError: No module named 'tests.utils'",
        "ValueError: unsupported platform-independent value",  # case and words differ
        "TypeError: connect() missing 1 required positional argument",
        "KeyError: 'cudagraph'",
    ],
)
def test_code_errors_are_not_environment(text):
    assert classify_environment(text) is None


def test_expand_template_placeholders():
    assert expand_template("tests/tool_parsers/test_{stem}.py", "vllm/tool_parsers/qwen.py") == (
        "tests/tool_parsers/test_qwen.py"
    )
    assert expand_template("tests/{dir}/test_{name}", "vllm/v1/core/block_pool.py") == (
        "tests/v1/core/test_block_pool.py"
    )
    assert expand_template("tests/test_config.py", "vllm/config/model.py") == "tests/test_config.py"
    assert expand_template("tests/test_{stem}.py", "docs/readme.md") is None


def test_select_keeps_existing_and_adds_patch_tests():
    files = [FilePatch("vllm/a.py", "vllm/a.py"), FilePatch(None, "tests/test_new.py")]
    exists = {"tests/test_a.py", "tests/always.py"}.__contains__
    chosen = select_tests(["tests/test_{stem}.py", "tests/always.py", "tests/gone.py"], files, exists)
    assert chosen == ["tests/test_a.py", "tests/always.py", "tests/test_new.py"]


JUNIT = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.test_a" name="test_ok"/>
<testcase classname="tests.test_a" name="test_bad"><failure message="assert 1 == 2">tb</failure></testcase>
<testcase classname="tests.test_a" name="test_gpu">
<error message="setup">Cannot access accelerator device</error></testcase>
<testcase classname="tests.test_a" name="test_skip"><skipped message="no"/></testcase>
<testcase classname="" name="tests.test_b">
<error message="collection failure">Unsupported platform</error></testcase>
</testsuite></testsuites>"""


def test_parse_junit_outcomes_and_causes():
    out = parse_junit(JUNIT)
    assert out["tests.test_a::test_ok"].status == "passed"
    assert out["tests.test_a::test_bad"].status == "failed" and out["tests.test_a::test_bad"].cause is None
    assert out["tests.test_a::test_gpu"].cause == "no-accelerator"
    assert out["tests.test_a::test_skip"].status == "skipped"
    assert out["tests.test_b"].cause == "unsupported-platform"


def test_module_of():
    assert module_of("tests.v1.core.test_x::test_a[1]") == "tests.v1.core.test_x"
    assert module_of("tests/v1/core/test_x.py") == "tests.v1.core.test_x"


def _o(status, cause=None):
    return Outcome(status, "", cause)


def test_compare_categories():
    base = {"p": _o("passed"), "r": _o("passed"), "f": _o("failed"), "s": _o("failed"),
            "env": _o("error", "no-accelerator"), "half": _o("error", "no-accelerator")}  # fmt: skip
    patched = {"p": _o("passed"), "r": _o("failed"), "f": _o("passed"), "s": _o("failed"),
               "env": _o("error", "no-accelerator"), "half": _o("failed"), "n": _o("passed")}  # fmt: skip
    cmp = compare(base, patched)
    assert cmp.rows["passed"] == ["p"] and cmp.rows["regressed"] == ["r"]
    assert cmp.rows["fixed"] == ["f"] and cmp.rows["still-failing"] == ["half", "s"]
    assert cmp.rows["could-not-run"] == ["env"] and cmp.rows["new-passed"] == ["n"]
    assert message_text(summary_message(cmp)) == (
        "1 passed on both; 1 fixed; 2 still-failing; 1 new-passed; "
        "1 of 7 could-not-run (no-accelerator); 1 regressed"
    )


def test_collection_error_with_patch_regresses_the_module_tests():
    base = {"tests.t::a": _o("passed"), "tests.t::b": _o("passed")}
    patched = {"tests.t": Outcome("error", "collection failure ImportError: cannot import name 'x'")}
    patched["tests.t"].cause = None  # an import error of our own code
    cmp = compare(base, patched)
    assert cmp.rows["regressed"] == ["tests.t::a", "tests.t::b"]


def test_nothing_ran_when_everything_is_environment():
    both = {"a": _o("error", "model-hub-unreachable")}
    cmp = compare(both, dict(both))
    assert cmp.passed_with_patch == 0 and cmp.count("could-not-run") == 1


def test_a_new_test_that_passes_is_a_test_that_passed_with_the_patch():
    cmp = compare({}, {"n": _o("passed")})
    assert cmp.rows == {"new-passed": ["n"]} and cmp.passed_with_patch == 1


TEARDOWN_JUNIT = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="tests.v1.core.test_prefix_caching" name="test_hit"/>
<testcase classname="tests.v1.core.test_prefix_caching" name="test_hit">
  <error message="failed on teardown with &quot;RuntimeError: Cannot access accelerator device&quot;"
    >trace</error>
</testcase>
<testcase classname="tests.v1.core.test_prefix_caching" name="test_bug">
  <error message="failed on teardown with &quot;AssertionError: leaked blocks&quot;">trace</error>
</testcase>
<testcase classname="tests.v1.core.test_prefix_caching" name="test_setup">
  <error message="failed on setup with &quot;RuntimeError: Cannot access accelerator device&quot;"
    >trace</error>
</testcase>
</testsuite></testsuites>"""


def test_teardown_environment_error_keeps_the_body_verdict():
    out = parse_junit(TEARDOWN_JUNIT)
    hit = out["tests.v1.core.test_prefix_caching::test_hit"]
    assert (hit.status, hit.teardown_cause) == ("passed", "no-accelerator")
    # a teardown error that is not the environment stays an error
    assert out["tests.v1.core.test_prefix_caching::test_bug"].status == "error"
    # an environment error before the body ran is not a pass
    setup = out["tests.v1.core.test_prefix_caching::test_setup"]
    assert (setup.status, setup.cause) == ("error", "no-accelerator")
    cmp = compare(out, out)
    assert cmp.count("passed") == 1 and cmp.teardown["no-accelerator"] == 1
    expected = "1 passed on both (teardown then hit the environment: no-accelerator 1)"
    assert message_text(summary_message(cmp)).startswith(expected)
