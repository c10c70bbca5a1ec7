"""Which upstream tests a patch should run, and how to read and compare their outcomes (pure logic).

Outcomes come from pytest's JUnit XML; ``classify`` turns one test's (base, patched) pair into
its category — the table in docs/guarantees.md ("The tests gate's classification"), row by row.
The environment (no accelerator, no model hub, unsupported platform, a missing optional package,
a per-test timeout) is blamed only when the base side hit the same cause.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from patchkit.diff.model import FilePatch
from patchkit.values import Message

OWN_PACKAGES = ("vllm", "tests")  # an ImportError of these is the code's fault, not the environment's


# --------------------------------------------------------------------------- selection


def expand_template(template: str, path: str) -> str | None:
    """``tests/x/test_{stem}.py`` for a changed ``path``; None when the template needs no file."""
    if not re.search(r"\{(stem|name|dir)\}", template):
        return template
    p = PurePosixPath(path)
    if p.suffix != ".py":
        return None
    parent = PurePosixPath(*p.parts[1:-1]) if p.parts[:1] == ("vllm",) else p.parent
    directory = "" if str(parent) == "." else str(parent)
    out = template.replace("{stem}", p.stem).replace("{name}", p.name).replace("{dir}", directory)
    return re.sub(r"/+", "/", out)


def is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return (
        path.startswith("tests/")
        and name.endswith(".py")
        and (name.startswith("test_") or name.endswith("_test.py"))
    )


def select_tests(templates: list[str], files: list[FilePatch], exists: Callable[[str], bool]) -> list[str]:
    """Test paths (files or directories) for a patch: expanded templates that exist in the base or
    the patched tree, plus the test files the patch itself adds, changes or deletes."""
    chosen: list[str] = []
    for fp in files:
        for template in templates:
            target = expand_template(template, fp.path)
            if target and target not in chosen and exists(target):
                chosen.append(target)
    for fp in files:
        if fp.new_path and is_test_file(fp.new_path) and fp.new_path not in chosen:
            chosen.append(fp.new_path)
        elif fp.new_path is None and fp.old_path and is_test_file(fp.old_path) and fp.old_path not in chosen:
            chosen.append(fp.old_path)  # a test file it deletes: the base side runs it (``removed``)
    return chosen


# --------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class EnvRule:
    name: str
    pattern: re.Pattern[str]


ENV_RULES = (
    EnvRule(
        "no-accelerator",
        re.compile(
            r"Cannot access accelerator device|No CUDA GPUs|Torch not compiled with CUDA"
            r"|Found no NVIDIA driver|CUDA driver initialization failed|CUDA is not available"
            r"|no CUDA-capable device"
        ),
    ),
    EnvRule("unsupported-platform", re.compile(r"Unsupported platform")),
    EnvRule(
        "model-hub-unreachable",
        re.compile(
            r"huggingface_hub|We couldn't connect|OfflineModeIsEnabled|requests\.exceptions\.ConnectionError"
            r"|LocalEntryNotFoundError|Max retries exceeded|Temporary failure in name resolution"
        ),
    ),
    EnvRule(
        "missing-package",
        re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '(?!(?:vllm|tests)\b)[\w.]+'"),
    ),
    EnvRule("timeout", re.compile(r"Failed: Timeout >")),
    EnvRule("collection-error", re.compile(r"collection failure|ERROR collecting|Interrupted: \d+ error")),
)


def classify_environment(text: str) -> str | None:
    """The name of the first environment rule whose pattern occurs in ``text``, else None."""
    return next((rule.name for rule in ENV_RULES if rule.pattern.search(text)), None)


# --------------------------------------------------------------------------- outcomes


# Bump when running, parsing or classifying tests changes: cached baselines and results then expire.
OUTCOME_FORMAT = 5  # 5: skip reasons carry their environment cause; the classification table


@dataclass
class Outcome:
    status: str  # passed | failed | error | skipped; in a comparison also timeout | absent | flaky
    text: str = ""  # failure/error/skip message and traceback, trimmed
    cause: str | None = None  # environment rule its text matches (failed, error, skipped)
    teardown_cause: str | None = None  # the body passed; only teardown hit this environment rule
    seconds: float = field(default=0.0, compare=False)  # JUnit's time: shard balance, time saved

    @property
    def broken(self) -> bool:
        return self.status in ("failed", "error", "timeout")


def parse_junit(xml_text: str) -> dict[str, Outcome]:
    """Test id (``classname::name``, or the collected module for a collection error) -> outcome."""
    root = ET.fromstring(xml_text)
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        seconds = _seconds(case.get("time"))
        test_id = f"{classname}::{name}" if classname else name
        status, text = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                status = {"failure": "failed"}.get(tag, tag)
                text = f"{node.get('message', '')}\n{node.text or ''}"
                break
        if status in ("failed", "error") and outcomes.get(test_id, Outcome("passed")).broken:
            continue  # a teardown error after a failure: keep the first
        cause = classify_environment(text) if status in ("failed", "error", "skipped") else None
        if status == "error" and text.startswith("failed on teardown") and cause:
            # pytest ran the body and it passed; the upstream cleanup fixture then needed the
            # environment (e.g. an accelerator). The test's verdict is its body's.
            outcomes[test_id] = Outcome("passed", text[-4000:], None, teardown_cause=cause, seconds=seconds)
            continue
        outcomes[test_id] = Outcome(status, text[-4000:], cause, seconds=seconds)
    return outcomes


# A JUnit id from a pytest node id, as ``parse_junit`` names tests: the source every pytest plugin of
# patchkit's (only, shard filter, coverage contexts) runs inside the test interpreter.
JUNIT_ID_SOURCE = """
def _junit_id(nodeid):
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1] if len(names) > 1 else names[0]
"""


def excerpt(text: str, limit: int = 1500) -> str:
    """A failure's text within ``limit`` characters: its start and its end (pytest puts the error
    line, ``E   ...``, last), never only the start of a long traceback."""
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "\n[...]\n" + text[-(limit - head - 7) :]


def _seconds(text: str | None) -> float:
    try:
        return max(0.0, float(text or 0))
    except ValueError:
        return 0.0


def module_of(test_id: str) -> str:
    """'tests.v1.core.test_x::test_a' and 'tests/v1/core/test_x.py' -> 'tests.v1.core.test_x'."""
    head = test_id.split("::", 1)[0]
    head = head[:-3] if head.endswith(".py") else head
    parts = head.replace("/", ".").split(".")
    tests_at = next(
        (k for k, part in enumerate(parts) if part.startswith("test_") or part.endswith("_test")),
        len(parts) - 1,
    )
    return ".".join(parts[: tests_at + 1])


@dataclass
class Comparison:
    rows: dict[str, list[str]] = field(default_factory=dict)  # category -> test ids
    causes: Counter = field(default_factory=Counter)  # environment rule -> count of could-not-run
    teardown: Counter = field(default_factory=Counter)  # passed, teardown hit the environment
    base_counts: Counter = field(default_factory=Counter)
    patch_counts: Counter = field(default_factory=Counter)

    def add(self, category: str, test_id: str) -> None:
        self.rows.setdefault(category, []).append(test_id)

    def count(self, category: str) -> int:
        return len(self.rows.get(category, []))

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.rows.values())

    @property
    def passed_with_patch(self) -> int:
        """Tests that passed with the patch: a gate without one is never ``passed``."""
        return sum(self.count(c) for c in PASSED_WITH_PATCH)

    @property
    def failing(self) -> int:
        """Tests whose category fails the gate."""
        return sum(self.count(c) for c in FAILING)


# passed-with-patch: passed with the patch and the base was not needed (basedemand)
PASSED_WITH_PATCH = ("passed", "fixed", "unskipped", "new-passed", "passed-with-patch")
FAILING = ("regressed", "new-failed")
FINDINGS = ("removed", "newly-skipped", "flaky")  # shown in the report, never a failure by themselves
FLAKY = "flaky"  # failed with the patch, then passed when run again (``confirm``): status and category


def classify(base: Outcome, patched: Outcome) -> str:
    """One test's category from its (base, patched) outcomes: docs/guarantees.md's table.

    Statuses: passed, skipped, failed, error, timeout (the patched run hung: no report), absent
    (not in that run). ``cause`` is the environment rule an outcome's text matches; for an absent
    base side it is the cause the base run hit in another test, if the patched one names it."""
    b, p = base.status, patched.status
    if p == "absent":
        return "removed" if b == "passed" else "dropped"
    if p == FLAKY:  # failed, then passed when run again: a finding, never a failure nor a pass
        return FLAKY
    if p == "timeout":  # the patched run hung where the base finished
        return "new-failed" if b == "absent" else "regressed"
    same_cause = patched.cause is not None and patched.cause == base.cause
    if p in ("failed", "error"):
        if same_cause:
            return "could-not-run"
        if b == "absent":
            return "new-failed"
        return "still-failing" if base.broken else "regressed"  # passed or skipped on the base
    if p == "skipped":
        if b == "passed" or base.broken:
            return "newly-skipped"
        return "skipped"
    # passed with the patch
    return {"passed": "passed", "skipped": "unskipped", "absent": "new-passed"}.get(b, "fixed")


ABSENT = Outcome("absent")


def compare(base: dict[str, Outcome], patched: dict[str, Outcome] | None) -> Comparison:
    """Every test id of either side through ``classify``. A base test missing with the patch
    whose module did not collect gets that module's error; ``patched`` None: the patched run
    hung (every base test timed out with the patch)."""
    result = Comparison()
    result.base_counts.update(o.status for o in base.values())
    if patched is None:
        patched = {t: Outcome("timeout", "the patched run did not finish") for t in base}
    result.patch_counts.update(o.status for o in patched.values())
    broken: dict[str, Outcome] = {}  # module -> the error that stopped its collection with the patch
    for test_id, outcome in sorted(patched.items()):
        if outcome.status == "error" and ("::" not in test_id or not outcome.cause):
            broken.setdefault(module_of(test_id), outcome)
    base_causes = {o.cause for o in base.values() if o.cause}
    for test_id in sorted(set(base) | set(patched)):
        b, p = base.get(test_id), patched.get(test_id)
        if p is None:
            p = broken.get(module_of(test_id), ABSENT) if b is not None else ABSENT
        if b is None:
            b = Outcome("absent", cause=p.cause if p.cause in base_causes else None)
        category = classify(b, p)
        result.add(category, test_id)
        if category == "could-not-run":
            result.causes[p.cause] += 1
        if category in ("passed", "new-passed") and p.teardown_cause:
            result.teardown[p.teardown_cause] += 1
    return result


SUMMARY_ORDER = ("passed-with-patch", "fixed", "unskipped", "still-failing", "new-passed", "new-failed",
                 "newly-skipped", "removed", FLAKY)  # fmt: skip


def summary_message(cmp: Comparison) -> Message:
    """'202 passed on both; 212 could-not-run (no-accelerator); 0 regressed', as a catalogue message."""
    if cmp.teardown:
        causes = [_cause(name, n, counted=True) for name, n in cmp.teardown.most_common()]
        parts = [Message("tests.part.passed-teardown", {"count": cmp.count("passed"), "causes": causes})]
    elif cmp.count("passed") or not cmp.count("passed-with-patch"):  # base on demand: "passed on both"
        parts = [Message("tests.part.passed", {"count": cmp.count("passed")})]  # only where both ran
    else:
        parts = []
    for category in SUMMARY_ORDER:
        if cmp.count(category):
            parts.append(Message(f"tests.part.{category}", {"count": cmp.count(category)}))
    if cmp.count("could-not-run"):
        causes = [_cause(name, n, counted=len(cmp.causes) > 1) for name, n in cmp.causes.most_common()]
        count = cmp.count("could-not-run")
        share = {"count": count, "total": cmp.total, "causes": causes}
        parts.append(Message("tests.part.could-not-run", share))
    parts.append(Message("tests.part.regressed", {"count": cmp.count("regressed")}))
    return Message("gate.tests.compared", {"parts": [p.to_dict() for p in parts]})


def _cause(name: str, count: int, counted: bool) -> dict:
    cause = Message(f"tests.cause.{name}").to_dict()
    return Message("tests.cause.count", {"cause": cause, "count": count}).to_dict() if counted else cause


def outcomes_by_path(outcomes: dict[str, Outcome], paths: list[str]) -> dict[str, dict[str, Outcome]] | None:
    """Each outcome under the one selected path (file or directory) its test id lies in; None when
    a path names single tests (``::``) or an id lies in none or in several (a directory and a file
    in it), where the outcomes cannot be told apart by path."""
    if any("::" in p for p in paths):
        return None
    modules = {p: (p[:-3] if p.endswith(".py") else p.rstrip("/")).replace("/", ".") for p in paths}
    out: dict[str, dict[str, Outcome]] = {p: {} for p in paths}
    for test_id, outcome in outcomes.items():
        owners = [p for p, m in modules.items() if test_id == m or test_id.startswith((m + ".", m + "::"))]
        if len(owners) != 1:
            return None
        out[owners[0]][test_id] = outcome
    return out
