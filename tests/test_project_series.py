"""The project's own series is the output of splitting replays/ on the pinned vLLM (a lockfile check).

Needs the pinned vLLM 0.33.0 sdist: downloaded from the package index once, hash-checked, cached.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.testrun.testplan import DURATIONS_FILE

ROOT = Path(__file__).resolve().parents[1]
REPLAY = "replays/vllm-0.33.0-own.mbox"

pytestmark = pytest.mark.slow


def _split(out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "patchkit", "split", REPLAY, "--pin", "patchkit.toml", "--out", str(out)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_patches_dir_is_what_split_of_the_replay_writes(tmp_path: Path) -> None:
    out = tmp_path / "patches"
    proc = _split(out)
    assert proc.returncode == 0, proc.stderr
    assert "proof holds" in proc.stdout
    # test-durations.json is `patchkit ci durations`' (the audit's job order), not split's
    committed = sorted(p.name for p in (ROOT / "patches").iterdir()
                       if p.is_file() and p.name[0] != "." and p.name != DURATIONS_FILE)  # fmt: skip
    # split's manifest (.patchkit-split.json, what it wrote there) is bookkeeping, not the series
    fresh = sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith("."))
    assert fresh == committed, "re-run `patchkit split` to refresh patches/ (see README)"
    _, mismatch, errors = filecmp.cmpfiles(ROOT / "patches", out, committed, shallow=False)
    assert not mismatch and not errors, f"patches/ is stale: {mismatch or errors}; re-run the split"


def test_project_series_has_the_domains_and_tangle_it_promises() -> None:
    series = (ROOT / "patches" / "series").read_text().split()
    domains = [name.split("-", 1)[1].removesuffix(".patch") for name in series]
    assert {"tool-parser", "prefix-caching", "spec-decode", "serving"} <= set(domains)
    envs_patches = [n for n in series if "a/vllm/envs.py" in (ROOT / "patches" / n).read_text()]
    assert len(envs_patches) >= 2, "vllm/envs.py must be shared by two domains"
    for name in series:
        text = (ROOT / "patches" / name).read_text()
        assert "Signed-off-by: patchkit developers <dev@patchkit.invalid>" in text
