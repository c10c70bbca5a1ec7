from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit import cli


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["patchkit", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
    return info.value.code


def test_split_explain_and_json(fixtures: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    out, js = tmp_path / "out", tmp_path / "record.json"
    replay = fixtures / "replays" / "tangled.mbox"
    args = [
        "split",
        str(replay),
        "--base",
        str(fixtures / "base"),
        "--out",
        str(out),
        "--explain",
        "--json",
        str(js),
    ]
    assert run_cli(args, monkeypatch) == 0
    stdout = capsys.readouterr().out
    assert "0003-spec-decode.patch" in stdout and "tool-parser" in stdout
    assert "hunk -> domain -> why" in stdout
    explained = [ln for ln in stdout.splitlines() if "vllm/envs.py:9" in ln]
    assert len(explained) == 2 and all("mixed" in ln for ln in explained)
    assert "-> tool-parser" in explained[0] and "-> spec-decode" in explained[1]
    assert "proof holds" in stdout
    assert js.read_bytes() == (out / "split.json").read_bytes()
    record = json.loads(js.read_text())
    assert record["proof"]["ok"] is True
    assert record["proof"]["expected_tree_sha256"] == record["proof"]["series_tree_sha256"]


def test_help_works() -> None:
    proc = subprocess.run([sys.executable, "-m", "patchkit", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "split" in proc.stdout


def test_bad_replay_is_one_line_exit_2_in_a_real_process(tmp_path: Path, fixtures: Path) -> None:
    bad = tmp_path / "bad.diff"
    bad.write_text("--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n a\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "patchkit",
            "split",
            str(bad),
            "--base",
            str(fixtures / "base"),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"patchkit: error: {bad}:4: " + proc.stderr.split(": ", 3)[3].rstrip("\n")
    ]
    assert "ends early" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()
