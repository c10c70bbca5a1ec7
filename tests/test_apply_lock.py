"""Two applies on one target at once: the second waits for the lock, or gives up naming the holder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from test_journal import digest, make_checkout, spawn, wait_for


def test_second_apply_refuses_then_waits(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    marker = tmp_path / "paused"
    first = spawn(tree, series, "replace:1", marker, 3)
    wait_for(marker, first)
    holder = marker.read_text()

    impatient = spawn(tree, series, "never", tmp_path / "x", 0, "--lock-timeout", "0.3")
    out = impatient.communicate(timeout=30)[0].decode()
    assert impatient.returncode == 1, out
    assert f"locked by pid {holder}" in out

    patient = spawn(tree, series, "never", tmp_path / "y", 0, "--lock-timeout", "30")
    assert first.wait(timeout=30) == 0
    out = patient.communicate(timeout=30)[0].decode()
    assert patient.returncode == 0 and "already applied" in out, out

    expected = tmp_path / "expected"
    shutil.copytree(Path(__file__).parent / "fixtures/apply/base", expected)
    for name in ("0001-pool.patch", "0002-envs.patch"):
        subprocess.run(["git", "apply", str(series / name)], cwd=expected, check=True)
    assert digest(tree) == digest(expected)
