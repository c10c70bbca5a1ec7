"""``patchkit wheel`` and ``--verify`` against a hostile or careless release engineer, on the tiny
wheel of ``wheel_fixtures``: a wheel forged with a RECORD made consistent again (METADATA, the
provenance, member types, timestamps, bytes outside the members), metadata members that are not
what they say or that inflate to gigabytes, settings out of range, a build from another directory,
a kill between naming and renaming, and ``status`` after a plain install replaced the wheel."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from test_apply import run
from wheel_fixtures import PATCH, Project, make_project, members_of, record_hash

from patchkit.wheels import provenance


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return make_project(tmp_path, monkeypatch)


def build(project: Project, *args: str, out: Path | None = None) -> tuple[int, str, Path | None]:
    out = out or project.out
    code, text = run("wheel", str(project.series), "--pin", str(project.pin), "--out", str(out), *args)
    found = sorted(out.glob("*.whl")) if out.is_dir() else []
    return code, text, found[0] if found else None


def forge(wheel: Path, dest: Path, change: dict[str, bytes], attrs: dict[str, int] | None = None) -> Path:
    """A copy of ``wheel`` with members replaced and RECORD made consistent again; every other
    detail (order, timestamps, modes) as it was."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as source:
        items = [(info, change.get(info.filename, source.read(info))) for info in source.infolist()]
    record = next(info.filename for info, _ in items if info.filename.endswith(".dist-info/RECORD"))
    buffer = io.StringIO()
    rows = [(i.filename, record_hash(d), str(len(d))) for i, d in items if i.filename != record]
    csv.writer(buffer, lineterminator="\n").writerows([*rows, (record, "", "")])
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info, data in items:
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.external_attr = (attrs or {}).get(info.filename, info.external_attr >> 16) << 16
            copy.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(copy, buffer.getvalue().encode() if info.filename == record else data)
    return dest


def dist_info(wheel: Path) -> str:
    return next(n.split("/")[0] for n in members_of(wheel) if n.endswith(".dist-info/RECORD"))


def built(project: Project) -> tuple[Path, str]:
    """The project's wheel, built, and its ``.dist-info`` directory."""
    code, out, wheel = build(project)
    assert code == 0 and wheel is not None, out
    return wheel, dist_info(wheel)


def test_verify_refuses_metadata_and_provenance_forged_with_a_consistent_record(
    project: Project, tmp_path: Path
) -> None:
    wheel, info = built(project)
    members = members_of(wheel)
    assert run("wheel", "--verify", str(forge(wheel, tmp_path / "same" / wheel.name, {})))[0] == 0

    injected = members[f"{info}/METADATA"].replace(
        b"Summary: tiny\n", b"Summary: tiny\nRequires-Dist: evil\n"
    )
    code, out = run(
        "wheel", "--verify", str(forge(wheel, tmp_path / "m" / wheel.name, {f"{info}/METADATA": injected}))
    )
    assert (
        code == 1 and f"{info}/METADATA: not the source wheel's METADATA" in out and "line 5 differs" in out
    ), out

    record = json.loads(members[f"{info}/{provenance.FILENAME}"])
    edits = {
        "series.patches[0].skipped": lambda r: r["series"]["patches"][0].update(status="applied", skipped=[]),
        "source_wheel.filename": lambda r: r["source_wheel"].update(filename="vllm-9.9-py3-none-any.whl"),
        "files.vllm/calc.py.base": lambda r: r["files"]["vllm/calc.py"].update(base="00" * 32),
        "distribution.source.version": lambda r: r["distribution"]["source"].update(version="9.9"),
        "pin.version": lambda r: r["pin"].update(version="0.0.2"),
        "note": lambda r: r.update(note="reviewed by the release team"),
    }
    for field, edit in edits.items():
        forged = json.loads(json.dumps(record))
        edit(forged)
        path = forge(
            wheel, tmp_path / field / wheel.name, {f"{info}/{provenance.FILENAME}": provenance.render(forged)}
        )
        code, out = run("wheel", "--verify", str(path))
        assert code == 1 and f"first mismatch: provenance {field}: the wheel says" in out, (field, out)


def test_an_audit_block_is_the_builders_word_unless_verify_is_given_the_audit(
    project: Project, tmp_path: Path
) -> None:
    from patchkit.audit.model import AuditResult, GateResult, PatchAudit
    from patchkit.diff.hunks import render_diff
    from patchkit.series.files import load_entries
    from patchkit.values import Pin

    (entry,) = load_entries(project.series)
    patch = PatchAudit(
        "0001-calc.patch", "calc", {"en": "calc"}, [GateResult("apply", "failed", "no")], "needs-work", [],
        diff=render_diff(entry.patches[0].files),
    )  # fmt: skip
    pin = Pin(name="vllm", source="index", version="0.0.1", sha256="ab" * 32)
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps(AuditResult(str(project.series), pin, [patch], "needs-work").to_dict()))
    code, out, wheel = build(project, "--audit", str(audit))
    assert code == 0 and wheel is not None, out
    info = dist_info(wheel)
    record = json.loads(members_of(wheel)[f"{info}/{provenance.FILENAME}"])
    record["audit"]["verdict"] = record["audit"]["patches"][0]["verdict"] = "ready"
    forged = forge(
        wheel, tmp_path / "f" / wheel.name, {f"{info}/{provenance.FILENAME}": provenance.render(record)}
    )

    code, out = run("wheel", "--verify", str(forged))
    assert code == 0 and "audit block (verdict ready" in out and "is the builder's word" in out, out
    code, out = run("wheel", "--verify", str(forged), "--audit", str(audit))
    assert (
        code == 1 and 'first mismatch: provenance audit.patches[0].verdict: the wheel says "ready"' in out
    ), out
    code, out = run("wheel", "--verify", str(wheel), "--audit", str(audit))
    assert code == 0 and "builder's word" not in out, out


def recopy(wheel: Path, dest: Path, edit: Callable[[zipfile.ZipInfo, bytes], bytes]) -> Path:
    """A copy of ``wheel`` member by member through ``zipfile``, each member's new ZipInfo and bytes
    passed through ``edit`` first (RECORD left as it is)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(dest, "w") as out:
        for item in source.infolist():
            copy = zipfile.ZipInfo(item.filename, item.date_time)
            copy.external_attr, copy.compress_type = item.external_attr, item.compress_type
            data = edit(copy, source.read(item))
            out.writestr(copy, data)
    return dest


def test_verify_refuses_what_patchkit_never_writes(project: Project, tmp_path: Path) -> None:
    wheel, info = built(project)
    record = f"{info}/RECORD"
    assert (
        run("wheel", "--verify", str(recopy(wheel, tmp_path / "same" / wheel.name, lambda i, d: d)))[0] == 0
    )

    def symlink(info: zipfile.ZipInfo, data: bytes) -> bytes:
        if info.filename == "vllm/entry.py":
            info.external_attr = 0o120644 << 16
        return data

    def self_row(info: zipfile.ZipInfo, data: bytes) -> bytes:
        return data.replace(f"{record},,".encode(), f"{record},sha256=AAAA,4".encode())

    def stamp(info: zipfile.ZipInfo, data: bytes) -> bytes:
        info.date_time = (2030, 1, 1, 0, 0, 0)
        return data

    def extra(info: zipfile.ZipInfo, data: bytes) -> bytes:
        if info.filename == "vllm/calc.py":
            info.extra = struct.pack("<HH", 0xCAFE, 4) + b"EVIL"
        return data

    data = wheel.read_bytes()
    cases: dict[str, tuple[object, str]] = {
        "a symlink member": (symlink, "vllm/entry.py: file type and mode 120644"),
        "RECORD listing itself with a hash": (self_row, f"{record}: RECORD's own row says sha256=AAAA,4"),
        "timestamps changed": (stamp, "vllm/__init__.py: timestamp 2030-01-01T00:00:00, the build gives"),
        "an extra field": (extra, "8 byte(s) at offset"),
        "a prefix": (b"#!/bin/sh\nexit 0\n" + data, "17 byte(s) at offset 0 belong to no member"),
        "a trailer": (data + b"junk", f"4 byte(s) at offset {len(data)} belong to no member"),
    }
    for label, (how, expected) in cases.items():
        path = tmp_path / label / wheel.name
        if isinstance(how, bytes):
            path.parent.mkdir()
            path.write_bytes(how)
        else:
            recopy(wheel, path, how)
        code, out = run("wheel", "--verify", str(path))
        assert code == 1 and f"first mismatch: {expected}" in out, (label, out)


def test_unreadable_or_inflating_metadata_is_one_line_never_a_traceback(
    project: Project, tmp_path: Path
) -> None:
    wheel, info = built(project)
    code, out = run(
        "wheel",
        "--verify",
        str(forge(wheel, tmp_path / "t" / wheel.name, {f"{info}/top_level.txt": b"\xff\n"})),
    )
    assert code == 2 and f"{info}/top_level.txt is not UTF-8" in out, out
    for label, text in (("utf8", b"\xff\xfe\n"), ("ini", b"vllm = vllm.entry:main\n")):
        path = forge(wheel, tmp_path / label / wheel.name, {f"{info}/entry_points.txt": text})
        code, out = run("wheel", "--verify", str(path))
        assert code == 1 and f"{info}/entry_points.txt: cannot be read as entry points" in out, out
    # METADATA of 80 MiB of newlines: 80 KB deflated; read whole it would take the memory
    bomb = tmp_path / "bomb" / wheel.name
    bomb.parent.mkdir()
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        for item in source.infolist():
            copy = zipfile.ZipInfo(item.filename, item.date_time)
            copy.compress_type = zipfile.ZIP_DEFLATED
            with out.open(copy, "w") as member:
                member.write(source.read(item))
                if item.filename == f"{info}/METADATA":
                    for _ in range(80):
                        member.write(b"\n" * (1 << 20))
    assert bomb.stat().st_size < 1 << 20
    code, out = run("wheel", "--verify", str(bomb))
    assert (
        code == 2 and f"member '{info}/METADATA' declares 83,886," in out and "more than the 64 MiB" in out
    ), out


def test_a_series_that_removes_an_entry_points_module_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = (
        PATCH
        + "\n".join(
            [
                "diff --git a/vllm/entry.py b/vllm/entry2.py",
                "similarity index 100%",
                "rename from vllm/entry.py",
                "rename to vllm/entry2.py",
            ]
        )
        + "\n"
    )
    project = make_project(tmp_path, monkeypatch, moved)
    code, out, wheel = build(project)
    assert code == 1 and "entry point vllm = vllm.entry:main: the series removes module vllm.entry" in out, (
        out
    )
    assert wheel is None and not project.out.exists()


def test_settings_out_of_range_are_one_line(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "4354819200")  # 2108: no zip timestamp holds it
    code, out, _ = build(project)
    assert code == 2 and "SOURCE_DATE_EPOCH='4354819200' is after 2107-12-31" in out, out
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    for args, expected in (
        (("--name", ""), "--name '' is not a valid distribution name"),
        (("--version", ""), "--version '' is not a PEP 440 version"),
        (("--name", "a" * 300), "File name too long; nothing was written"),
    ):
        code, out, wheel = build(project, *args)
        assert code == 2 and expected in out and wheel is None, (args, out)
    assert list(project.out.iterdir()) == []


def test_the_same_wheel_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The provenance names the series relative to the project it is in, found from the series."""
    project = make_project(tmp_path, monkeypatch)
    config = tmp_path / "patchkit.toml"
    config.write_text(project.pin.read_text() + '\n[series]\ndir = "series"\n')
    (tmp_path / "sub").mkdir()
    wheels = []
    for cwd in (tmp_path, tmp_path / "sub", tmp_path.parent):
        monkeypatch.chdir(cwd)
        out = tmp_path / f"out-{len(wheels)}"
        code, text = run("wheel", str(project.series), "--pin", str(config), "--out", str(out))
        assert code == 0, text
        (wheel,) = out.glob("*.whl")
        wheels.append(wheel.read_bytes())
    assert wheels[0] == wheels[1] == wheels[2]
    with zipfile.ZipFile(io.BytesIO(wheels[2])) as archive:
        record = json.loads(
            next(archive.read(n) for n in archive.namelist() if n.endswith(provenance.FILENAME))
        )
    assert record["series"]["dir"] == "series"


KILL = (
    "import os, signal, sys\n"
    "from patchkit.wheels import publish\n"
    "where = sys.argv.pop(1)\n"
    "if where == 'link':\n"
    "    real = publish._link_unnamed\n"
    "    def link(*a):\n"
    "        real(*a)\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    publish._link_unnamed = link\n"
    "else:\n"
    "    publish.os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
    "from patchkit.cli import main\n"
    "sys.argv = ['patchkit', *sys.argv[1:]]\n"
    "main()\n"
)


def test_a_kill_once_the_wheel_is_complete_leaves_no_temporary_name(project: Project) -> None:
    """SIGKILL just after the complete file gets a name: in an empty --out that name is the wheel's
    own; over an older wheel, the temporary name left is removed by the next build."""
    args = ["wheel", str(project.series), "--pin", str(project.pin), "--out", str(project.out)]
    proc = subprocess.run(
        [sys.executable, "-c", KILL, "link", *args], capture_output=True, env=os.environ.copy()
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (wheel,) = list(project.out.iterdir())
    assert not wheel.name.startswith(".") and run("wheel", "--verify", str(wheel))[0] == 0
    before = wheel.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-c", KILL, "replace", *args], capture_output=True, env=os.environ.copy()
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert len(list(project.out.iterdir())) == 2 and wheel.read_bytes() == before  # the old one intact
    assert build(project)[0] == 0
    assert [p.name for p in project.out.iterdir()] == [wheel.name]


def test_status_of_a_series_a_plain_install_replaced(project: Project, tmp_path: Path) -> None:
    wheel, _ = built(project)
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    status = ("status", "--target", "site-packages", "--site-packages", str(site))
    assert run(*status, str(project.series))[0] == 0
    shutil.rmtree(site)  # `pip install vllm==0.0.1`: the plain wheel where the patched one was
    with zipfile.ZipFile(project.wheel) as archive:
        archive.extractall(site)
    code, out = run(*status)
    assert code == 0 and "nothing applied" in out and "patchkit wheel" not in out
    code, out = run(*status, str(project.series))
    assert code == 1 and f"the series {project.series} is not applied here" in out, out
    assert "no patchkit wheel installed" in out


def test_quiet_prints_the_result_only(project: Project) -> None:
    """``-q``: errors and the result only — the wheel built (its path and sha256), or verified."""
    assert build(project, out=project.root / "warm")[0] == 0  # the source wheel cached: no download line
    code, out = run("-q", "wheel", str(project.series), "--pin", str(project.pin), "--out", str(project.out))
    (wheel,) = project.out.glob("*.whl")
    assert code == 0 and out.startswith(f"built {wheel}: ") and len(out.splitlines()) == 1, out
    code, out = run("wheel", "--verify", str(wheel), "-q")
    assert code == 0 and out.startswith(f"verified {wheel}: ") and len(out.splitlines()) == 1, out
