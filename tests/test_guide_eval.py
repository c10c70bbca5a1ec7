"""The guide against hand-labelled real findings (tests/guide_eval/): precision and recall.

In-sample sets (opt21-25, own series, omni-infer's 0.9.0 series): the detectors were tuned on them.
Each holds what the guide found (patch, kind, file, line — never the series' code), each finding
labelled true or false by hand after reading its diff lines, and the known issues, written in the
guide's own kind names. Recall there: a known issue matched by a true finding of the same patch and
kind (and file, when the issue names one), no line numbers.

Held-out sets (every ``guide_eval/heldout-*.json``: 1Cat-vLLM PR #239, then vLLM #36518 kernel,
vLLM #40537 serving, 1Cat-vLLM #256 config, 1Cat-vLLM #249 scheduler; none used to tune a
detector): the labels are reviewer issues in our own words, each with patch, file and line range
(and, from the second round on, a ``kind`` of our vocabulary), committed before the guide ever ran
on the input; a finding matches a label by patch, file and line range, and by meaning (decided by
hand, recorded as the finding's ``matches``; this test re-checks patch, file and line of every
match). Their figures are reported per set and pooled, apart from the in-sample ones, and each set
is held to its own floor (see HELDOUT_FLOORS).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVAL = Path(__file__).parent / "guide_eval"
SETS = ("opt21-25", "own-series", "fork-series")
PRECISION_BAR, RECALL_BAR = 0.90, 0.80
HELDOUT_SETS = tuple(sorted(p.stem for p in EVAL.glob("heldout-*.json")))
# Each held-out set's floor is its first recorded run; it is not chosen to pass (the in-sample bar,
# 90 % / 80 %, is missed by far and the README says so). The guide must not do worse on a change it
# never saw; a detector change that moves these figures re-runs the audit on the set, labels the new
# findings and updates "recorded" (the labels never change). Tuning a detector on a set makes it
# in-sample. PR #239: 2026-12-01, detectors of main e93f54a, 15 of 19 findings true, 5 of 48 labels.
# Second round (2026-12-06, detectors of main 41aacb3, labels committed in 4c3d9f5): kernel 7 of 11
# findings true, 1 of 24 labels; serving no finding, 0 of 21 (no precision floor: precision is
# undefined without findings); config 1 of 1, 1 of 18; scheduler 10 of 10, 3 of 32.
HELDOUT_FLOORS: dict[str, tuple[float | None, float]] = {
    "heldout-pr239": (15 / 19, 5 / 48),
    "heldout-kernel-36518": (7 / 11, 1 / 24),
    "heldout-serving-40537": (None, 0 / 21),
    "heldout-config-pr256": (1 / 1, 1 / 18),
    "heldout-sched-pr249": (10 / 10, 3 / 32),
}
# The number of patches of each set's series (the PR's own commits).
HELDOUT_PATCHES = {
    "heldout-pr239": 2,
    "heldout-kernel-36518": 1,
    "heldout-serving-40537": 1,
    "heldout-config-pr256": 1,
    "heldout-sched-pr249": 3,
}
# Label kinds: our vocabulary, documented in guide_eval/README.md. PR #239's labels predate it.
LABEL_KINDS = {
    "contract-change",
    "api-schema",
    "default-changed",
    "new-env",
    "new-option",
    "unwired",
    "platform-gate",
    "fallback-weakened",
    "error-handling",
    "config-constraint",
    "logic-risk",
    "numerics",
    "hot-path",
    "perf-evidence",
    "resource-cost",
    "untested",
    "test-quality",
    "tests-both-paths",
    "lifecycle",
    "duplicated-logic",
    "layering",
    "global-state",
    "info-exposure",
    "misleading-comment",
    "docs-missing",
    "commit-meta",
}
KINDLESS = {"heldout-pr239"}
LABEL_KEYS = {"id", "patch", "file", "lines", "old_lines", "kind", "priority", "issue"}
FINDING_KEYS = {"patch", "kind", "file", "line", "severity", "subject", "label", "note"}


def load(name: str) -> dict:
    return json.loads((EVAL / f"{name}.json").read_text("utf-8"))


def scores(findings: list[dict], known: list[dict]) -> tuple[float, float, list[dict]]:
    true = [f for f in findings if f["label"] is True]
    missed = [
        k
        for k in known
        if not any(
            f["patch"] == k["patch"] and f["kind"] == k["kind"] and (not k["file"] or f["file"] == k["file"])
            for f in true
        )
    ]
    precision = len(true) / len(findings) if findings else 1.0
    recall = (len(known) - len(missed)) / len(known) if known else 1.0
    return precision, recall, missed


def in_range(line: int, span: list[int] | None) -> bool:
    return span is not None and span[0] <= line <= span[1]


def may_match(finding: dict, label: dict) -> bool:
    """Rules 1-3 of the held-out set's ``matching``: same patch; same file (a label on '' takes any
    file of its patch); the line in ``lines`` or ``old_lines``, or a file-wide label (lines null)."""
    if finding["patch"] != label["patch"]:
        return False
    if label["file"] and finding["file"] != label["file"]:
        return False
    if label["lines"] is None:
        return True
    return in_range(finding["line"], label["lines"]) or in_range(finding["line"], label.get("old_lines"))


def heldout_scores(data: dict) -> tuple[float, float, list[dict]]:
    """Precision over the findings; recall over the labels a true finding matches (rules 1-4)."""
    findings, labels = data["findings"], {lab["id"]: lab for lab in data["labels"]}
    found = {i for f in findings if f["label"] is True for i in f["matches"] if may_match(f, labels[i])}
    precision = sum(f["label"] is True for f in findings) / len(findings) if findings else 1.0
    missed = [lab for i, lab in labels.items() if i not in found]
    return precision, (len(labels) - len(missed)) / len(labels), missed


def kind_names() -> set[str]:
    catalogue = json.loads((ROOT / "patchkit/report/i18n/en.json").read_text("utf-8"))
    return {key.split(".", 1)[1] for key in catalogue if key.startswith("finding.") and key.count(".") == 1}


def test_every_finding_is_labelled_and_no_code_is_stored():
    for name in SETS:
        data = load(name)
        assert data["findings"] and data["known_issues"], name
        assert all(f["label"] in (True, False) for f in data["findings"]), f"{name}: unlabelled finding"
        assert all(set(f) <= FINDING_KEYS for f in data["findings"]), name
    assert len(HELDOUT_SETS) >= 5 and set(HELDOUT_PATCHES) == set(HELDOUT_SETS)
    for name in HELDOUT_SETS:
        data = load(name)
        assert all(f["label"] in (True, False) for f in data["findings"]), f"{name}: unlabelled finding"
        assert all(set(f) <= FINDING_KEYS | {"matches"} for f in data["findings"]), name
        assert all(set(lab) <= LABEL_KEYS for lab in data["labels"]), name


@pytest.mark.parametrize("name", HELDOUT_SETS)
def test_the_held_out_labels_are_ours(name):
    """Enough of them, in our words (no guide kind name), each placed on a patch, a file and lines,
    each with a kind of our vocabulary (PR #239's labels predate it)."""
    data = load(name)
    labels, kinds = data["labels"], kind_names()
    patches = {f["patch"] for f in data["findings"]} | {lab["patch"] for lab in labels}
    assert len(labels) >= (40 if name == "heldout-pr239" else 15)
    assert len({lab["id"] for lab in labels}) == len(labels)
    assert len(patches) == HELDOUT_PATCHES[name]  # the PR's own commits, each labelled
    assert sorted(int(p[:4]) for p in patches) == list(range(1, len(patches) + 1))
    for lab in labels:
        assert lab["priority"] in ("high", "medium", "low") and len(lab["issue"]) > 20, lab["id"]
        assert not any(kind in lab["issue"] for kind in kinds), f"{lab['id']} uses a guide kind name"
        for span in (lab["lines"], lab.get("old_lines")):
            assert span is None or (len(span) == 2 and 1 <= span[0] <= span[1]), lab["id"]
        assert lab["file"] or lab["lines"] is None, f"{lab['id']}: lines without a file"
        if name in KINDLESS:
            assert "kind" not in lab, lab["id"]
        else:
            assert lab.get("kind") in LABEL_KINDS, f"{name} {lab['id']}: kind {lab.get('kind')!r}"


def test_every_label_kind_is_used_and_documented():
    """The vocabulary is derived from the labels (no unused kind) and each kind is in the README."""
    used = {lab["kind"] for n in HELDOUT_SETS if n not in KINDLESS for lab in load(n)["labels"]}
    assert used == LABEL_KINDS
    readme = (EVAL / "README.md").read_text("utf-8")
    assert all(f"`{kind}`" in readme for kind in LABEL_KINDS)


@pytest.mark.parametrize("name", HELDOUT_SETS)
def test_every_held_out_match_obeys_the_rules(name):
    data = load(name)
    labels = {lab["id"]: lab for lab in data["labels"]}
    for f in data["findings"]:
        where = f"{f['patch']} {f['kind']} {f['file']}:{f['line']}"
        assert f["label"] is True or not f["matches"], f"false finding matches a label: {where}"
        for i in f["matches"]:
            assert i in labels and may_match(f, labels[i]), f"{where} cannot match {i}"


def held_out_rows(name: str, data: dict, held: tuple[float, float, list[dict]]) -> list[str]:
    found = len(data["labels"]) - len(held[2])
    precision = f"{held[0]:6.1%}" if data["findings"] else "   n/a"
    rows = [
        f"  {name:22} findings {len(data['findings']):3}  precision {precision}  recall {held[1]:6.1%}"
        f"  ({found} of {len(data['labels'])} labels)"
    ]
    for level in ("high", "medium", "low"):
        of = [lab for lab in data["labels"] if lab["priority"] == level]
        left = [lab for lab in held[2] if lab["priority"] == level]
        rows.append(f"      {level:6} labels found {len(of) - len(left):2} of {len(of):2}")
    return rows


def pooled(names: list[str]) -> tuple[int, int, int, int]:
    """(findings, true findings, labels, labels found) over the held-out sets named."""
    counts = [0, 0, 0, 0]
    for name in names:
        data = load(name)
        missed = heldout_scores(data)[2]
        counts[0] += len(data["findings"])
        counts[1] += sum(f["label"] is True for f in data["findings"])
        counts[2] += len(data["labels"])
        counts[3] += len(data["labels"]) - len(missed)
    return counts[0], counts[1], counts[2], counts[3]


def table() -> tuple[list[str], tuple[float, float], dict[str, tuple[float, float, list[dict]]]]:
    rows = ["", "guide evaluation: in-sample (detectors tuned on these; matched by patch and kind)"]
    everything, known = [], []
    for name in SETS:
        data = load(name)
        p, r, missed = scores(data["findings"], data["known_issues"])
        rows.append(f"  {name:13} findings {len(data['findings']):3}  precision {p:6.1%}  recall {r:6.1%}")
        rows += [f"      missed: {m['patch']} {m['kind']} {m['file']}" for m in missed]
        everything += [dict(f, patch=f"{name}/{f['patch']}") for f in data["findings"]]
        known += [dict(k, patch=f"{name}/{k['patch']}") for k in data["known_issues"]]
    precision, recall, _ = scores(everything, known)
    rows.append(
        f"  {'all':13} findings {len(everything):3}  precision {precision:6.1%}  recall {recall:6.1%}"
    )
    rows.append(
        "guide evaluation: held-out (never tuned on; labels first, matched by file, line and meaning)"
    )
    held, run = {}, []
    for name in HELDOUT_SETS:
        data = load(name)
        if "recorded" not in data:
            rows.append(f"  {name:22} labels {len(data['labels'])}, the guide has not run on it yet")
            continue
        held[name] = heldout_scores(data)
        rows += held_out_rows(name, data, held[name])
        run.append(name)
    for title, names in (
        ("pooled, all held-out", run),
        ("pooled, second round", [n for n in run if n != "heldout-pr239"]),
    ):
        if names:
            f, t, n, found = pooled(names)
            rows.append(
                f"  {title:22} findings {f:3}  precision {t / f if f else 1.0:6.1%}"
                f"  recall {found / n:6.1%}  ({found} of {n} labels, {len(names)} sets)"
            )
    kinds: dict[str, list[int]] = {}
    for name in run:
        if name in KINDLESS:
            continue
        missed = {lab["id"] for lab in held[name][2]}
        for lab in load(name)["labels"]:
            kinds.setdefault(lab["kind"], [0, 0])[0] += 1
            kinds[lab["kind"]][1] += lab["id"] in missed
    if kinds:
        rows.append("  second-round labels missed by kind (missed of labelled):")
        rows += [
            f"      {k:20} {m:2} of {n:2}" for k, (n, m) in sorted(kinds.items(), key=lambda x: -x[1][1])
        ]
    return rows, (precision, recall), held


def test_in_sample_precision_and_recall_meet_the_bar():
    rows, (precision, recall), _ = table()
    assert precision >= PRECISION_BAR, rows
    assert recall >= RECALL_BAR, rows


def test_held_out_figures_are_the_recorded_ones_and_hold_their_floor(capsys):
    """Prints both tables (run with -s, or read them in a failure)."""
    rows, _, held = table()
    with capsys.disabled():
        print("\n".join(rows))
    for name in HELDOUT_SETS:
        data = load(name)
        if "recorded" not in data:  # labelled, not yet audited: nothing may be recorded either
            assert data["findings"] == [] and name not in HELDOUT_FLOORS, name
            continue
        precision, recall, missed = held[name]
        rec = data["recorded"]
        assert (len(data["findings"]), sum(f["label"] for f in data["findings"])) == (
            rec["findings"],
            rec["true"],
        ), name
        assert (len(data["labels"]), len(data["labels"]) - len(missed)) == (
            rec["labels"],
            rec["labels_found"],
        ), name
        floor = HELDOUT_FLOORS[name]
        assert floor[0] is None or precision >= floor[0] - 1e-9, rows
        assert recall >= floor[1] - 1e-9, rows


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("name", HELDOUT_SETS)
def test_the_held_out_labels_were_committed_before_the_guide_ran(name):
    """The git history is the proof of order: the file's first commit holds every label as it is
    now and no finding; labels never change afterwards."""
    try:
        shallow = git("rev-parse", "--is-shallow-repository").strip() == "true"
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the proof of order is the repository's history")
    if shallow:
        pytest.skip("shallow clone: the labels' first commit is not in this history")
    path = f"tests/guide_eval/{name}.json"
    commits = git("log", "--format=%H", "--follow", "--", path).split()
    assert commits, f"{path} is not committed"
    first = json.loads(git("show", f"{commits[-1]}:{path}"))
    assert first["findings"] == [] and "recorded" not in first
    assert first["labels"] == load(name)["labels"]


def test_scores_count_false_findings_and_misses():
    findings = [
        {"patch": "a", "kind": "x", "file": "f", "label": True},
        {"patch": "a", "kind": "y", "file": "f", "label": False},
    ]
    known = [{"patch": "a", "kind": "x", "file": ""}, {"patch": "a", "kind": "y", "file": "f"}]
    assert scores(findings, known)[:2] == (0.5, 0.5)


def test_held_out_matching_needs_the_same_file_and_a_line_in_range():
    label = {"id": "L1", "patch": "p", "file": "f.py", "lines": [10, 20], "old_lines": [5, 6]}
    finding = {"patch": "p", "file": "f.py", "line": 15, "label": True, "matches": ["L1"]}
    assert may_match(finding, label)
    assert may_match(dict(finding, line=5), label)  # removed code, pre-image numbers
    assert not may_match(dict(finding, line=21), label)
    assert not may_match(dict(finding, file="g.py"), label)
    assert not may_match(dict(finding, patch="q"), label)
    assert may_match(dict(finding, file="g.py", line=0), dict(label, file="", lines=None))
    data = {"findings": [finding, dict(finding, line=30), dict(finding, label=False)], "labels": [label]}
    assert heldout_scores(data)[:2] == (2 / 3, 1.0)
    data = {"findings": [dict(finding, line=30)], "labels": [label, dict(label, id="L2")]}
    assert heldout_scores(data)[:2] == (1.0, 0.0)  # a recorded match out of range does not count


@pytest.mark.slow
def test_the_live_guide_on_the_own_series_matches_its_labels(tmp_path):
    """The labels stay current: a fresh audit of patches/ finds exactly the labelled findings."""
    record = tmp_path / "audit.json"
    cmd = [sys.executable, "-m", "patchkit", "audit", "patches", "--gates", "apply", "--json", str(record)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert record.exists(), proc.stderr
    live = {
        (p["patch"], f["kind"], f["file"], f["line"])
        for p in json.loads(record.read_text("utf-8"))["patches"]
        for f in p["guide"]["findings"]
    }
    labelled = {(f["patch"], f["kind"], f["file"], f["line"]) for f in load("own-series")["findings"]}
    assert live == labelled
