"""``patchkit wheel`` on a tiny wheel written by the test: the series applied as ``git apply`` applies
it, the site-packages rules, versions and names, RECORD (checked by the ``wheel`` package's own
reader), provenance, byte-reproducible builds, ``--verify`` and its first mismatch, a failed apply
or a crash that leaves ``--out`` untouched, an audit verdict in the provenance."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_apply import run
from wheel_fixtures import CALC, MEMBERS, PATCH, Project, make_project, members_of, record_hash, rewrite

from patchkit.wheels import naming, provenance

BUILT = "vllm-0.0.1+pk.{}-py3-none-any.whl"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return make_project(tmp_path, monkeypatch)


def build(project: Project, *args: str, out: Path | None = None) -> tuple[int, str, Path | None]:
    code, text = run(
        "wheel", str(project.series), "--pin", str(project.pin), "--out", str(out or project.out), *args
    )
    found = sorted((out or project.out).glob("*.whl")) if (out or project.out).is_dir() else []
    return code, text, found[0] if found else None


def series_hash(project: Project) -> str:
    text = (project.series / "0001-calc.patch").read_text()
    identity = [{"name": "0001-calc.patch", "sha256": hashlib.sha256(text.encode()).hexdigest()}]
    return provenance.series_hash(identity)


def git_applied(tmp_path: Path, git_apply) -> dict[str, bytes]:  # noqa: ANN001
    """The witness: the source wheel's package files with the series ``git apply``-ed."""
    tree = tmp_path / "witness"
    for name, (data, _) in MEMBERS.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)
    git_apply(tree, PATCH.encode())
    return {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*") if p.is_file()}


def test_the_series_is_applied_with_the_site_packages_rules_and_the_wheel_reader_accepts_it(
    project: Project, tmp_path: Path, git_apply
) -> None:
    code, out, wheel = build(project)
    assert code == 0, out
    digest = series_hash(project)
    assert wheel is not None and wheel.name == BUILT.format(digest[:8])
    assert "skipped (not part of the installed package): 0001-calc.patch: tests/test_calc.py" in out
    members = members_of(wheel)
    witness = git_applied(tmp_path, git_apply)
    for rel in ("vllm/calc.py", "vllm/added.py", "vllm/entry.py", "vllm/run.sh"):
        assert members[rel] == witness[rel], rel
    assert "tests/test_calc.py" not in members  # outside the package: skipped, never written
    version = f"0.0.1+pk.{digest[:8]}"
    dist_info = f"vllm-{version}.dist-info"
    assert f"Version: {version}\n" in members[f"{dist_info}/METADATA"].decode()
    assert not any(n.startswith("vllm-0.0.1.dist-info/") for n in members)
    version_py = members["vllm/_version.py"].decode()
    assert f"__version__ = version = '{version}'" in version_py
    assert f"__version_tuple__ = version_tuple = (0, 0, 1, 'pk.{digest[:8]}')" in version_py
    assert (
        version_py.replace(version, "0.0.1").replace(f", 'pk.{digest[:8]}'", "")
        == MEMBERS["vllm/_version.py"][0].decode()
    )  # nothing else in it changed
    # RECORD: every member but RECORD itself, with its sha256 and size; checked here and by `wheel unpack`
    rows = [line.split(",") for line in members[f"{dist_info}/RECORD"].decode().splitlines()]
    assert {r[0] for r in rows} == set(members)
    for name, digest_row, size in rows:
        if name != f"{dist_info}/RECORD":
            assert (digest_row, size) == (record_hash(members[name]), str(len(members[name]))), name
    unpacked = subprocess.run(
        [sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "u"), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert unpacked.returncode == 0, unpacked.stderr
    record = json.loads(members[f"{dist_info}/{provenance.FILENAME}"])
    assert record["series"]["hash"] == digest and record["series"]["dir"] == "series"
    assert record["series"]["patches"] == [
        {
            "name": "0001-calc.patch",
            "sha256": record["series"]["patches"][0]["sha256"],
            "status": "partly-applied",
            "skipped": ["tests/test_calc.py"],
        }
    ]
    assert record["source_wheel"] == {
        "filename": project.wheel.name,
        "sha256": hashlib.sha256(project.wheel.read_bytes()).hexdigest(),
    }
    assert record["pin"]["version"] == "0.0.1" and record["patchkit"]["version"]
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    assert record["files"] == {
        "vllm/_version.py": {
            "base": sha(MEMBERS["vllm/_version.py"][0]),
            "sha256": sha(members["vllm/_version.py"]),
            "cause": "version",
        },
        "vllm/added.py": {"base": None, "sha256": sha(witness["vllm/added.py"]), "cause": "series"},
        "vllm/calc.py": {
            "base": sha(CALC.encode()),
            "sha256": sha(witness["vllm/calc.py"]),
            "cause": "series",
        },
    }


def test_two_builds_are_byte_identical_with_fixed_order_modes_and_times(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build(project, out=project.root / "a")[2]
    second = build(project, out=project.root / "b")[2]
    assert first is not None and second is not None and first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    package = [n for n in names if not n.startswith("vllm-")]
    assert package == sorted(package) and names[-1].endswith(".dist-info/RECORD")
    assert {i.date_time for i in infos} == {(2024, 5, 6, 7, 8, 10)}  # the source's newest member
    modes = {i.filename: i.external_attr >> 16 for i in infos}
    assert modes["vllm/run.sh"] == 0o100755 and set(modes.values()) == {0o100644, 0o100755}
    assert {i.create_system for i in infos} == {3} and all(not i.extra for i in infos)

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # 2023-11-14T22:13:20Z
    dated = build(project, out=project.root / "c")[2]
    again = build(project, out=project.root / "d")[2]
    assert dated is not None and again is not None and dated.read_bytes() == again.read_bytes()
    assert dated.read_bytes() != first.read_bytes()
    with zipfile.ZipFile(dated) as archive:
        assert {i.date_time for i in archive.infolist()} == {(2023, 11, 14, 22, 13, 20)}
        record = json.loads(
            next(archive.read(n) for n in archive.namelist() if n.endswith(provenance.FILENAME))
        )
    assert record["source_date_epoch"] == 1700000000
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    code, out, _ = build(project, out=project.root / "e")
    assert code == 2 and "SOURCE_DATE_EPOCH='yesterday' is not an integer" in out


def test_verify_passes_and_names_the_first_mismatch(project: Project, tmp_path: Path) -> None:
    wheel = build(project)[2]
    assert wheel is not None
    code, out = run("wheel", "--verify", str(wheel))
    assert code == 0 and "verified" in out and "RECORD matches all 12 member(s)" in out, out
    members = members_of(wheel)
    dist_info = next(n.split("/")[0] for n in members if n.endswith(".dist-info/RECORD"))

    # one byte of a member's compressed data changed
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("vllm/calc.py")
    at = info.header_offset + 30 + len(info.filename) + 3
    data[at] ^= 0x01
    flipped = tmp_path / "flipped.whl"
    flipped.write_bytes(bytes(data))
    code, out = run("wheel", "--verify", str(flipped))
    assert code == 1 and "first mismatch: vllm/calc.py:" in out, out

    cases = {
        "a member RECORD no longer matches": (
            {"vllm/entry.py": b"def main():\n    return 1\n"},
            "vllm/entry.py: RECORD says",
        ),
        "a member dropped": ({"vllm/run.sh": None}, "vllm/run.sh: listed in RECORD but not in the wheel"),
    }
    for why, (change, expected) in cases.items():
        broken = tmp_path / f"{why}.whl"
        rewrite(wheel, broken, change)
        code, out = run("wheel", "--verify", str(broken))
        assert code == 1 and expected in out, (why, out)

    code, out = run("wheel", "--verify", str(project.wheel))  # the source: a true RECORD, no provenance
    assert (
        code == 1 and f"no vllm-0.0.1.dist-info/{provenance.FILENAME}: not a wheel patchkit built" in out
    ), out

    # RECORD and provenance made consistent again by hand, but the file is not base + series
    forged = b"def main():\n    return 2\n"
    rows = (
        members[f"{dist_info}/RECORD"]
        .decode()
        .replace(
            f"vllm/entry.py,{record_hash(members['vllm/entry.py'])},{len(members['vllm/entry.py'])}",
            f"vllm/entry.py,{record_hash(forged)},{len(forged)}",
        )
    )
    (tmp_path / "forged").mkdir()
    rewrite(
        wheel,
        tmp_path / "forged" / wheel.name,
        {"vllm/entry.py": forged, f"{dist_info}/RECORD": rows.encode()},
    )
    code, out = run("wheel", "--verify", str(tmp_path / "forged" / wheel.name))
    assert code == 1 and "vllm/entry.py: the source wheel has" in out, out

    # the series it names changed since
    (project.series / "0001-calc.patch").write_text(PATCH.replace("2 * x + 3", "3 * x + 3"))
    code, out = run("wheel", "--verify", str(wheel))
    assert code == 1 and "patch 1: the provenance names 0001-calc.patch" in out, out


def test_a_patch_that_does_not_apply_is_the_apply_gates_message_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, monkeypatch, PATCH.replace("-    return x + 3", "-    return x + 33"))
    code, out, _ = build(project)
    assert code == 1
    assert "does not apply at its place in the series: 0001-calc.patch: vllm/calc.py: hunk #1" in out, out
    assert "expected '    return x + 33', found '    return x + 3'" in out
    assert not project.out.exists()  # not even --out is created
    project.out.mkdir()
    (project.out / "keep.txt").write_text("mine")
    assert build(project)[0] == 1 and sorted(p.name for p in project.out.iterdir()) == ["keep.txt"]


def test_a_crash_while_writing_leaves_nothing_in_out(project: Project) -> None:
    """SIGKILL just before the central directory is written: no wheel, no temporary file."""
    project.out.mkdir()
    code = (
        "import os, signal, sys\n"
        "from patchkit.wheels import zipio\n"
        "zipio.ZipWriter.close = lambda self: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from patchkit.cli import main\n"
        "sys.argv = ['patchkit', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["wheel", str(project.series), "--pin", str(project.pin), "--out", str(project.out)]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=os.environ.copy())
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert list(project.out.iterdir()) == []


def test_a_renamed_distribution_is_consistent_and_verifies(project: Project, tmp_path: Path) -> None:
    code, out, wheel = build(project, "--name", "vllm-acme", "--version", "1.2.3")
    assert code == 0, out
    assert wheel is not None and wheel.name == "vllm_acme-1.2.3-py3-none-any.whl"
    members = members_of(wheel)
    assert {n.split("/")[0] for n in members} == {"vllm", "vllm_acme-1.2.3.dist-info"}
    metadata = members["vllm_acme-1.2.3.dist-info/METADATA"].decode()
    assert "Name: vllm-acme\nVersion: 1.2.3\n" in metadata and metadata.endswith("A tiny wheel for tests.\n")
    assert (
        members["vllm_acme-1.2.3.dist-info/entry_points.txt"]
        == MEMBERS["vllm-0.0.1.dist-info/entry_points.txt"][0]
    )
    assert "__version__ = version = '1.2.3'" in members["vllm/_version.py"].decode()
    assert run("wheel", "--verify", str(wheel))[0] == 0
    unpacked = subprocess.run(
        [sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "u"), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert unpacked.returncode == 0, unpacked.stderr
    for bad, expected in (
        (("--version", "not a version"), "is not a PEP 440 version"),
        (("--name", "-bad"), "is not a valid distribution name"),
    ):
        code, out, _ = build(project, *bad, out=tmp_path / "bad")
        assert code == 2 and expected in out and not (tmp_path / "bad").exists()


def test_the_audit_verdict_goes_into_the_provenance(project: Project, tmp_path: Path) -> None:
    from patchkit.audit.model import AuditResult, Evidence, GateResult, PatchAudit
    from patchkit.diff.hunks import render_diff
    from patchkit.series.files import load_entries
    from patchkit.values import Pin

    (entry,) = load_entries(project.series)
    witness = [Evidence("patchkit apply engine", outcome="applied in series")]  # a passed needs one
    gate = GateResult("apply", "passed", "applies alone on the base and in series", evidence=witness)
    patch = PatchAudit(
        "0001-calc.patch",
        "calc",
        {"en": "calc"},
        [gate],
        "ready",
        [],
        diff=render_diff(entry.patches[0].files),
    )
    audit = AuditResult(
        str(project.series),
        Pin(name="vllm", source="index", version="0.0.1", sha256="ab" * 32),
        [patch],
        "ready",
        created="2024-01-01T00:00:00Z",
    )
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(audit.to_dict()))
    code, out, wheel = build(project, "--audit", str(path))
    assert code == 0, out
    assert wheel is not None
    record = json.loads(next(v for k, v in members_of(wheel).items() if k.endswith(provenance.FILENAME)))
    assert record["audit"] == {
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "created": "2024-01-01T00:00:00Z",
        "verdict": "ready",
        "gates": ["apply"],
        "patches": [{"name": "0001-calc.patch", "verdict": "ready"}],
    }

    patch.diff = patch.diff.replace("2 * x", "4 * x")  # the audit of another version of the patch
    path.write_text(json.dumps(audit.to_dict()))
    code, out, _ = build(project, "--audit", str(path), out=tmp_path / "other")
    assert code == 2 and f"{path}: the audit's 0001-calc.patch is not this series' 0001-calc.patch" in out
    path.write_text('{"series_dir": 1}')
    code, out, _ = build(project, "--audit", str(path), out=tmp_path / "other")
    assert code == 2 and "not a patchkit audit result" in out and not (tmp_path / "other").exists()


def test_status_reads_the_provenance_of_an_installed_wheel(project: Project, tmp_path: Path) -> None:
    wheel = build(project)[2]
    assert wheel is not None
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)  # what an installer lays down (our tiny wheel has no scripts)
    status = ("status", str(project.series), "--target", "site-packages", "--site-packages", str(site))
    code, out = run(*status, "--json", str(tmp_path / "s.json"))
    assert code == 0, out
    digest = series_hash(project)
    assert (
        f"installed from a patchkit wheel: vllm 0.0.1+pk.{digest[:8]}, series series ({digest[:12]})" in out
    )
    assert (
        "0001-calc.patch: applied; skipped in part; not part of the installed package: tests/test_calc.py"
        in out
    )
    assert "same patches, same sha256" in out and "all 3 file(s) patchkit changed as recorded" in out
    assert json.loads((tmp_path / "s.json").read_text())["wheel"]["series"]["hash"] == digest

    (site / "vllm/calc.py").write_text("edited\n")
    code, out = run(*status)
    assert code == 1 and "vllm/calc.py: the wheel's provenance records sha256" in out
    assert re.search(r"RECORD: vllm/calc.py: RECORD says sha256=\S+, file has", out)
    (site / "vllm/calc.py").unlink()
    code, out = run(*status)
    assert (
        code == 1
        and "vllm/calc.py: the wheel's provenance records sha256" in out
        and ", installed is absent" in out
    )


def test_names_and_versions() -> None:
    assert naming.local_version("0.33.0", "f182bf79f24f") == "0.33.0+pk.f182bf79"
    assert naming.local_version("0.33.0+cu129", "f182bf79") == "0.33.0+cu129.pk.f182bf79"
    assert naming.version_tuple("1.2.0rc1.post2.dev3+pk.ab") == (1, 2, 0, "rc1", "post2", "dev3", "pk.ab")
    assert (
        naming.wheel_filename("Vllm.Acme", "1.0+pk.ab", "py3-none-any")
        == "vllm_acme-1.0+pk.ab-py3-none-any.whl"
    )
    assert (
        naming.rewrite_version_module("__version__ = '0.1'\n", "0.1", "0.2") is None
    )  # not setuptools-scm's
    assert naming.rewrite_version_module(MEMBERS["vllm/_version.py"][0].decode(), "9.9", "1.0") is None
    older = "version = __version__ = '0.8.3'\nversion_tuple = __version_tuple__ = (0, 8, 3)\n"
    assert naming.rewrite_version_module(older, "0.8.3", "0.8.3+pk.ab") == (
        "version = __version__ = '0.8.3+pk.ab'\nversion_tuple = __version_tuple__ = (0, 8, 3, 'pk.ab')\n"
    )


def test_status_of_a_patchkit_wheel_with_a_series_applied_over_it(project: Project, tmp_path: Path) -> None:
    """A hotfix applied with ``patchkit apply`` over the installed wheel: both are shown; the wheel's
    files are checked as the wheel left them (the apply's state records that), the rest as they are."""
    wheel = build(project)[2]
    assert wheel is not None
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    hotfix = tmp_path / "hotfix"
    hotfix.mkdir()
    (hotfix / "series").write_text("0001-f4.patch\n")
    lines = [
        "diff --git a/vllm/calc.py b/vllm/calc.py",
        "--- a/vllm/calc.py",
        "+++ b/vllm/calc.py",
        "@@ -15,7 +15,7 @@ def f3(x):",
        " ",
        " ",
        " def f4(x):",
        "-    return x + 4",
        "+    return x - 4",
        " ",
        " ",
        " def f5(x):",
    ]
    (hotfix / "0001-f4.patch").write_text("\n".join(lines) + "\n")
    target = ("--target", "site-packages", "--site-packages", str(site))
    code, out = run("apply", str(hotfix), *target)
    assert code == 0, out
    code, out = run("status", *target)
    assert code == 0, out
    assert "applied: 1 patch(es)" in out and "installed from a patchkit wheel" in out
    assert "all 3 file(s) patchkit changed as recorded" in out
    (site / "vllm/added.py").write_text("changed\n")  # a wheel file the hotfix did not touch
    code, out = run("status", *target)
    assert code == 1 and "vllm/added.py: the wheel's provenance records sha256" in out
