"""Refresh one evaluation set from an audit record, keeping the labels already given.

    python tests/guide_eval/collect.py RECORD.json tests/guide_eval/SET.json

Stores only what the guide found (patch, kind, file, line, severity, the finding's subject name) and
our labels; never the patch's code. A finding not labelled before gets ``"label": null``: read the
diff lines and set it to true or false by hand; the evaluation test refuses unlabelled findings. In a
held-out set (one with ``labels``) each finding also keeps ``matches``, the ids of the labels it
matches, decided by hand by the rules in that set's ``matching``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def key(item: dict) -> tuple:
    return (item["patch"], item["kind"], item["file"], item["line"])


def collect(record: Path, eval_file: Path) -> dict:
    data = (
        json.loads(eval_file.read_text("utf-8"))
        if eval_file.exists()
        else {"findings": [], "known_issues": []}
    )
    labels = {key(f): f for f in data.get("findings", [])}
    found = []
    for patch in json.loads(record.read_text("utf-8"))["patches"]:
        for f in patch["guide"]["findings"]:
            text = (f.get("message") or {}).get("en", "")
            subject = text.split("`")[1] if text.count("`") >= 2 else ""
            item = {
                "patch": patch["patch"],
                "kind": f["kind"],
                "file": f["file"],
                "line": f["line"],
                "severity": f["severity"],
                "subject": subject[:80],
            }
            old = labels.get(key(item), {})
            kept = {"label": old.get("label"), "note": old.get("note", "")}
            if "matches" in old or "labels" in data:  # a held-out set: label ids the finding matches
                kept["matches"] = old.get("matches", [])
            found.append({**item, **kept})
    data["findings"] = found
    return data


if __name__ == "__main__":
    out = collect(Path(sys.argv[1]), Path(sys.argv[2]))
    Path(sys.argv[2]).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", "utf-8")
