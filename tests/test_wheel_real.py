"""``patchkit wheel`` on the REAL pinned vLLM 0.33.0 wheel (336 MB, from the package index at test
time, cached, never committed) with the project's own series: built once per run, then checked by
code that is not patchkit's — ``git apply`` of the series on the source wheel's files, the source's
own RECORD for every other member — and by ``--verify`` (which must fail on one changed byte),
and read back by ``status`` from the installed layout."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from test_apply import run

from patchkit import cache

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PROVENANCE = "patchkit-provenance.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    """(the built wheel, its provenance, the source wheel it names)."""
    out = tmp_path_factory.mktemp("real-wheel")
    code, text = run("wheel", str(ROOT / "patches"), "--pin", str(ROOT / "patchkit.toml"), "--out", str(out))
    assert code == 0, text
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(next(archive.read(n) for n in archive.namelist() if n.endswith(PROVENANCE)))
    source = cache.store_dir("wheel", record["source_wheel"]["sha256"]) / record["source_wheel"]["filename"]
    assert source.is_file()
    return wheel, record, source


def _record(archive: zipfile.ZipFile) -> dict[str, str]:
    name = next(n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
    return {row[0]: row[1] for row in csv.reader(io.StringIO(archive.read(name).decode())) if row}


def test_every_file_is_base_plus_series_by_git_apply_and_the_rest_is_the_source(
    built: tuple[Path, dict, Path], tmp_path: Path
) -> None:
    wheel, record, source = built
    assert re.fullmatch(r"vllm-0\.33\.0\+pk\.[0-9a-f]{8}-cp38-abi3-manylinux_2_28_x86_64\.whl", wheel.name)
    changed = record["files"]
    assert {rel for rel, e in changed.items() if e["cause"] == "series"} >= {"vllm/v1/core/block_pool.py"}
    tree = tmp_path / "base"
    with zipfile.ZipFile(source) as original:
        for rel in changed:
            if rel in original.namelist():
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_bytes(original.read(rel))
        version_py = original.read("vllm/_version.py").decode()
        source_record = _record(original)
    names = (ROOT / "patches" / "series").read_text().split()
    for name in names:  # the package's part of each patch, as git applies it
        proc = subprocess.run(
            ["git", "apply", "--include=vllm/*", str(ROOT / "patches" / name)],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(wheel) as patched:
        members = set(patched.namelist())
        for rel, entry in changed.items():
            if entry["cause"] == "series":
                assert patched.read(rel) == (tree / rel).read_bytes(), rel
        version = record["distribution"]["version"]
        expected = version_py.replace("version = '0.33.0'", f"version = '{version}'").replace(
            "version_tuple = (0, 33, 0)", f"version_tuple = (0, 33, 0, '{version.split('+')[1]}')"
        )
        assert (
            changed["vllm/_version.py"]["cause"] == "version"
            and patched.read("vllm/_version.py") == expected.encode()
        )
        rows = _record(patched)
    dist_info = f"vllm-{version}.dist-info"
    for rel, digest in source_record.items():  # every other member: the source's bytes (its RECORD hash)
        new = rel.replace("vllm-0.33.0.dist-info/", f"{dist_info}/")
        if rel not in changed and not rel.endswith(("/RECORD", "/METADATA")):
            assert rows[new] == digest, rel
    assert members == {r.replace("vllm-0.33.0.dist-info/", f"{dist_info}/") for r in source_record} | {
        f"{dist_info}/{PROVENANCE}",
        *changed,
    }
    assert [p["name"] for p in record["series"]["patches"]] == names


def test_verify_passes_and_fails_on_one_changed_byte(built: tuple[Path, dict, Path], tmp_path: Path) -> None:
    wheel, _, _ = built
    code, out = run("wheel", "--verify", str(wheel), str(ROOT / "patches"))
    assert code == 0 and "RECORD matches all" in out, out
    with zipfile.ZipFile(wheel) as archive:
        first = archive.infolist()[0]
    data = bytearray(wheel.read_bytes())
    data[first.header_offset + 30 + len(first.filename) + first.compress_size // 2] ^= 0x01
    (tmp_path / "x").mkdir()
    changed = tmp_path / "x" / wheel.name
    changed.write_bytes(bytes(data))
    code, out = run("wheel", "--verify", str(changed), str(ROOT / "patches"))
    assert code == 1 and f"first mismatch: {first.filename}: " in out, out


def test_status_reads_the_provenance_where_the_wheel_is_installed(
    built: tuple[Path, dict, Path], tmp_path: Path
) -> None:
    wheel, record, _ = built
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:  # the dist-info and the files patchkit changed, as installed
        archive.extractall(
            site, [n for n in archive.namelist() if ".dist-info/" in n or n in record["files"]]
        )
    code, out = run(
        "status", str(ROOT / "patches"), "--target", "site-packages", "--site-packages", str(site)
    )
    assert code == 0, out
    assert f"installed from a patchkit wheel: vllm {record['distribution']['version']}" in out
    assert out.count(": applied; skipped in part; not part of the installed package: ") == 4
    assert f"all {len(record['files'])} file(s) patchkit changed as recorded" in out
