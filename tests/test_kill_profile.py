"""The long fault profile (bench/kill_profile.py) in CI size: kill -9 in apply, reverse and
recovery on the hand-made fixture, checkout and site-packages, plus editor races; every run ends
exactly base or exactly patched and no edit is lost. The long run's figures: docs/guarantees.md."""

from __future__ import annotations

import json
from pathlib import Path

from bench.kill_profile import main


def test_short_kill_profile_ends_base_or_patched_and_keeps_edits(tmp_path: Path) -> None:
    figures = tmp_path / "kp.json"
    code = main(["--kills", "4", "--races", "2", "--work", str(tmp_path / "work"), "--json", str(figures)])
    assert code == 0
    result = json.loads(figures.read_text())["targets"]
    for kind in ("checkout", "site-packages"):
        assert result[kind]["kills_total"] >= 2
        assert sum(result[kind]["ended"].values()) >= 1
        assert "LOST" not in result[kind]["races"]


def test_short_kill_profile_covers_rebase_too(tmp_path: Path) -> None:
    """kill -9 in rebase (stop, --continue, --abort, a second --abort): one command restores --out
    exactly or completes (long run on a real series: docs/guarantees.md)."""
    figures = tmp_path / "kp.json"
    code = main(["--kills", "2", "--races", "0", "--targets", "checkout", "--rebase-kills", "3",
                 "--work", str(tmp_path / "work"), "--json", str(figures)])  # fmt: skip
    assert code == 0
    rebase = json.loads(figures.read_text())["rebase"]
    assert rebase["kills_total"] >= 3 and rebase["problems"] == []
    assert sum(n for end, n in rebase["ends"].items() if end.endswith(("restored", "completed"))) >= 1
