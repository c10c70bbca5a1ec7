"""bench.wheel at CI size: the manual baseline script and ``patchkit wheel`` on our tiny wheel, one
interleaved run each, medians and a ratio; the baseline's patch holds only the package's part."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from wheel_fixtures import make_project

from bench.wheel import package_part, timing


def test_the_baseline_and_patchkit_both_build_and_are_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, monkeypatch)
    cut = package_part(project.series / "0001-calc.patch", tmp_path / "cut.patch")
    assert "a/vllm/calc.py" in cut.read_text() and "tests/test_calc.py" not in cut.read_text()
    work = tmp_path / "work"
    work.mkdir()
    result = timing(project.series, project.pin, 1, work, warm=False)
    assert result["patchkit"]["median_s"] > 0 and result["manual"]["median_s"] > 0 and result["ratio"] > 0
    (manual,) = (work / "manual" / "out").glob("*.whl")
    (ours,) = (work / "patchkit-out").glob("*.whl")
    assert manual.name == "vllm-0.0.1+local-py3-none-any.whl" and ours.name.startswith("vllm-0.0.1+pk.")
    with zipfile.ZipFile(manual) as a, zipfile.ZipFile(ours) as b:
        assert a.read("vllm/calc.py") == b.read("vllm/calc.py")  # both applied the same change
