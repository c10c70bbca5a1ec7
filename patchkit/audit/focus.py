"""What vLLM's own metadata says about a patch: its labels, its reviewers, and the tests upstream
CI would run for it (pure logic over the readers' records and two file-access callables)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import PurePosixPath

from patchkit.audit.model import CiStepRef, FocusedTest
from patchkit.split.upstream import imported_modules, is_test_path, layout_dir
from patchkit.upstream.buildkite import CiStep
from patchkit.upstream.codeowners import OwnerRule, owners_of
from patchkit.upstream.mergify import LabelRule, labels_of

MAX_FOCUSED = 25  # per patch: a focused run, not the CI step's whole directory


def patch_labels(paths: list[str], rules: list[LabelRule]) -> list[str]:
    """Every label any of the files earns, the most files first."""
    counts = Counter(label for path in paths for label, _ in labels_of(path, rules))
    return [label for label, _ in counts.most_common()]


def patch_reviewers(paths: list[str], rules: list[OwnerRule]) -> list[str]:
    """CODEOWNERS of the files, the owners of the most files first."""
    counts = Counter(owner for path in paths if (rule := owners_of(path, rules)) for owner in rule.owners)
    return [owner for owner, _ in counts.most_common()]


def patch_owner_lines(paths: list[str], rules: list[OwnerRule]) -> list[dict]:
    """The CODEOWNERS lines that decide the files (those that name owners), the most files first."""
    decided = Counter(rule for path in paths if (rule := owners_of(path, rules)) and rule.owners)
    ranked = sorted(decided.items(), key=lambda item: (-item[1], item[0].line))
    return [{"line": rule.line, "pattern": rule.pattern, "owners": list(rule.owners), "files": count}
            for rule, count in ranked]  # fmt: skip


def focused_tests(
    paths: list[str],
    steps: list[CiStep],
    list_tests: Callable[[str], list[str]],
    read: Callable[[str], bytes | None],
    limit: int = MAX_FOCUSED,
    imports: dict[str, list[str]] | None = None,
) -> list[FocusedTest]:
    """Test files of the CI steps covering ``paths`` that exercise them: changed by the patch,
    named after a changed module (``test_<stem>.py``), named by a step that depends on a changed
    file by name (the step's own paths), or importing a changed module. ``imports`` (test file ->
    the modules it imports) may be shared by the calls for one base, so each file is read once."""
    changed = set(paths)
    sources = [p for p in paths if p.endswith(".py") and not is_test_path(p)]
    stems = {(f"test_{PurePosixPath(p).name}", layout_dir(p)): p for p in sources}
    modules = changed - {"vllm/__init__.py"}  # ``from vllm import X``: every test imports the package
    found: dict[str, FocusedTest] = {}
    imports = {} if imports is None else imports
    for step in steps:
        if not step.targets or not any(step.covers(p) for p in paths):
            continue
        ref = CiStepRef(step.label, step.key, step.file, step.device)
        # a step that depends on one of the changed files by name runs exactly the tests it names
        named = next((p for p in paths if p in step.sources), None)
        for target in step.targets:
            listed = list_tests(target.split("::", 1)[0])
            for test in listed:
                if test in found:
                    found[test].steps.append(ref)
                    continue
                if test in changed:
                    why = "changed"
                elif (twin := stems.get((test.rsplit("/", 1)[-1], layout_dir(test)))) is not None:
                    why = f"mirrors {twin}"
                elif named and listed == [target.split("::", 1)[0]]:
                    why = f"named {named}"
                else:
                    if test not in imports:
                        text = (read(test) or b"").decode("utf-8", errors="replace")
                        imports[test] = imported_modules(text)
                    hit = next((m for m in imports[test] if m in modules), None)
                    if hit is None:
                        continue
                    why = f"imports {hit}"
                found[test] = FocusedTest(test, why, [ref])
    for test in found.values():
        on_cpu = any(s.device.startswith("cpu") for s in test.steps)
        test.accelerator = None if on_cpu else test.steps[0].device
    rank = {"changed": 0, "mirrors": 1, "named": 2, "imports": 3}
    ordered = sorted(found.values(), key=lambda t: (rank[t.why.split()[0]], t.path))
    return ordered[:limit]
