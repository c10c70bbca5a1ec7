"""The guide against hand-labelled real findings (tests/guide_eval/): precision and recall.

Each set holds what the guide found on a real patch series (patch, kind, file, line — never the
series' code), each finding labelled true or false by hand after reading its diff lines, and the
known issues a reviewer should be told about. Precision: true findings / all findings. Recall: known
issues matched by a true finding of the same patch and kind (and file, when the issue names one).
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


def test_every_finding_is_labelled_and_no_code_is_stored():
    for name in SETS:
        data = load(name)
        assert data["findings"] and data["known_issues"], name
        assert all(f["label"] in (True, False) for f in data["findings"]), f"{name}: unlabelled finding"
        allowed = {"patch", "kind", "file", "line", "severity", "subject", "label", "note"}
        assert all(set(f) <= allowed for f in data["findings"]), name


def test_precision_and_recall_meet_the_bar(capsys):
    everything, known = [], []
    rows = []
    for name in SETS:
        data = load(name)
        p, r, missed = scores(data["findings"], data["known_issues"])
        rows.append(f"{name:12} findings {len(data['findings']):3}  precision {p:6.1%}  recall {r:6.1%}")
        rows += [f"    missed: {m['patch']} {m['kind']} {m['file']}" for m in missed]
        everything += [dict(f, patch=f"{name}/{f['patch']}") for f in data["findings"]]
        known += [dict(k, patch=f"{name}/{k['patch']}") for k in data["known_issues"]]
    precision, recall, _ = scores(everything, known)
    rows.append(f"{'all':12} findings {len(everything):3}  precision {precision:6.1%}  recall {recall:6.1%}")
    with capsys.disabled():
        print("\nguide evaluation\n" + "\n".join(rows))
    assert precision >= PRECISION_BAR, rows
    assert recall >= RECALL_BAR, rows


def test_scores_count_false_findings_and_misses():
    findings = [
        {"patch": "a", "kind": "x", "file": "f", "label": True},
        {"patch": "a", "kind": "y", "file": "f", "label": False},
    ]
    known = [{"patch": "a", "kind": "x", "file": ""}, {"patch": "a", "kind": "y", "file": "f"}]
    assert scores(findings, known)[:2] == (0.5, 0.5)


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
