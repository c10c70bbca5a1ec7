"""The site-packages target: locator (fake dir and a real venv), RECORD, byte-compile, version pin."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.apply import sitepackages
from patchkit.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "apply"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no patchkit.toml (pin version, overlays) from the repo around us


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def dist_files(version: str) -> dict[str, bytes]:
    files = {f"vllm/{p.name}": p.read_bytes() for p in (FIXTURES / "base/vllm").iterdir()}
    files["vllm/__init__.py"] = b""
    info = f"vllm-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/top_level.txt"] = b"vllm\n"
    rows = [[name, _hash(data), str(len(data))] for name, data in files.items()]
    files[f"{info}/RECORD"] = "".join(
        ",".join(r) + "\n" for r in rows + [[f"{info}/RECORD", "", ""]]
    ).encode()
    return files


def fake_site_packages(root: Path, version: str = "0.0.1") -> Path:
    for name, data in dist_files(version).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def series_dir(tmp_path: Path, pinned: str | None = None) -> Path:
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series", series)
    if pinned:
        record = {
            "base": {"name": "vllm", "source": "index", "version": pinned},
            "patches": [],
            "commits": [],
        }
        (series / "split.json").write_text(json.dumps(record))
    return series


def record_ok(site: Path) -> list[str]:
    (info,) = site.glob("vllm-*.dist-info")
    return sitepackages.record_problems(info, site)


def test_updated_record_rows() -> None:
    record = b"vllm/a.py,sha256=x,1\nvllm/__pycache__/a.cpython-311.pyc,,\nvllm/gone.py,sha256=y,2\n"
    new = sitepackages.updated_record(record, "", {"vllm/a.py": b"A", "vllm/gone.py": None,
                                                   "vllm/new.py": b"NN"}, "cpython-312")  # fmt: skip
    rows = list(csv.reader(new.decode().splitlines()))
    assert rows == [
        ["vllm/a.py", _hash(b"A"), "1"],
        ["vllm/new.py", _hash(b"NN"), "2"],
        ["vllm/__pycache__/a.cpython-312.pyc", "", ""],
        ["vllm/__pycache__/new.cpython-312.pyc", "", ""],
    ]


def test_apply_site_packages_dir_record_and_reverse(tmp_path: Path) -> None:
    site = fake_site_packages(tmp_path / "site")
    original = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    series = series_dir(tmp_path)
    code, out = invoke("apply", str(series), "--target", "site-packages", "--site-packages", str(site))
    assert code == 0, out
    assert "vllm 0.0.1" in out
    assert "skipped (not part of the installed package): 0002-envs.patch: tests/test_pool.py" in out
    assert not (site / "tests").exists()
    assert "max(n, 0)" in (site / "vllm/pool.py").read_text()
    assert record_ok(site) == []
    assert list((site / "vllm/__pycache__").glob(f"pool.{sys.implementation.cache_tag}.pyc"))
    record = (site / "vllm-0.0.1.dist-info/RECORD").read_text()
    assert "vllm/helpers.py,sha256=" in record

    code, out = invoke("status", str(series), "--target", "site-packages", "--site-packages", str(site))
    assert code == 0 and "consistent" in out

    code, out = invoke("apply", "--target", "site-packages", "--site-packages", str(site), "--reverse")
    assert code == 0, out
    restored = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                and ".patchkit" not in p.parts}  # fmt: skip
    assert restored == original
    assert record_ok(site) == []


def test_version_pin_refuses_unless_forced(tmp_path: Path) -> None:
    site = fake_site_packages(tmp_path / "site")
    series = series_dir(tmp_path, pinned="0.0.2")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    code, out = invoke("apply", str(series), "--target", "site-packages", "--site-packages", str(site))
    assert code == 1 and "installed vllm 0.0.1 is not the pinned 0.0.2" in out
    assert {
        p: p.read_bytes() for p in site.rglob("*") if p.is_file() and ".patchkit" not in p.parts
    } == before
    code, out = invoke(
        "apply", str(series), "--target", "site-packages", "--site-packages", str(site), "--force"
    )
    assert code == 0 and "applying anyway" in out


def test_no_vllm_in_dir(tmp_path: Path) -> None:
    code, out = invoke("apply", "--target", "site-packages", "--site-packages", str(tmp_path))
    assert code == 2 and "no installed 'vllm' distribution" in out


def build_wheel(out: Path) -> Path:
    wheel = out / "vllm-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in dist_files("0.0.1").items():
            archive.writestr(name, data)
    return wheel


def test_locator_in_a_real_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True)  # fmt: skip
    python = str(venv / "bin" / "python")
    wheel = build_wheel(tmp_path)
    target = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    "--target", target, str(wheel)], check=True)  # fmt: skip
    dist = sitepackages.locate(python)
    assert (dist.name, dist.version) == ("vllm", "0.0.1")
    assert dist.location == Path(target).resolve()
    assert dist.dist_info.name == "vllm-0.0.1.dist-info"

    series = series_dir(tmp_path)
    code, out = invoke("apply", str(series), "--target", "site-packages", "--python", python)
    assert code == 0, out
    assert record_ok(Path(target)) == []
    check = subprocess.run([python, "-c", "import vllm.pool, vllm.helpers; print(vllm.pool.allocate(-1))"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.stdout.strip() == "[]", check.stderr
    code, out = invoke("apply", "--target", "site-packages", "--python", python, "--reverse")
    assert code == 0, out
    assert record_ok(Path(target)) == []
    assert not (Path(target) / "vllm/helpers.py").exists()
