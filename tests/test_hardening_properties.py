"""Property: for random small series (contents and modes), apply then reverse is the identity, on a
checkout and on a site-packages tree (dist-info + RECORD), and the applied tree is exactly base +
series; a symlink in a series is refused with nothing changed; after a crash at any step and
random user edits, recovery keeps every edit and restores the rest to base."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from patchkit.apply import sitepackages
from patchkit.cli import app

FILES = ["vllm/f0.py", "vllm/f1.py", "vllm/sub/f2.py", "vllm/new/n.py"]
line = st.sampled_from(["x = 1", "y = 2", "# note", "", "def f():", "    return 0", "pass"])
content = st.one_of(st.none(), st.lists(line, min_size=1, max_size=8))  # None: the file is absent
EXEC = "#!exec\n"  # a file whose content starts so is written 0755: modes change with the series


@st.composite
def states(draw) -> list[dict[str, bytes]]:
    """Base and 1–3 successive states; files may appear (in new dirs), change and disappear."""

    def render(lines):  # noqa: E306
        if lines is None:
            return None
        return ((EXEC if draw(st.booleans()) else "") + "\n".join(lines) + "\n").encode()

    out = [{p: render(draw(content)) for p in FILES[:3]} | {FILES[3]: None}]
    for _ in range(draw(st.integers(1, 3))):
        nxt = dict(out[-1])
        for path in draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=3, unique=True)):
            nxt[path] = render(draw(content))
        out.append(nxt)
    return [{p: d for p, d in s.items() if d is not None} for s in out]


def _write(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        (root / path).chmod(0o755 if data.startswith(EXEC.encode()) else 0o644)


def _diff(work: Path, old: dict[str, bytes], new: dict[str, bytes]) -> str:
    for side, files in (("a", old), ("b", new)):
        subprocess.run(["rm", "-rf", str(work / side)], check=True)
        (work / side).mkdir()
        _write(work / side, files)
    args = ["git", "diff", "--no-index", "--no-color", "--no-renames", "--no-prefix", "a", "b"]
    proc = subprocess.run(args, cwd=work, capture_output=True)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.decode()


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".patchkit" not in p.parts and "__pycache__" not in p.parts
    }


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist_info(root: Path) -> None:
    info = root / "vllm-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    (info / "top_level.txt").write_text("vllm\n")
    rows = [f"{p},{_record_hash(d)},{len(d)}" for p, (d, _) in _snapshot(root).items()]
    (info / "RECORD").write_text("\n".join([*rows, "vllm-0.0.1.dist-info/RECORD,,"]) + "\n")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("kind", ["checkout", "site-packages"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=states())
def test_apply_then_reverse_is_identity(kind: str, case: list[dict[str, bytes]]) -> None:
    # in a scratch dir: no patchkit.toml (version pin, overlays) from the repo around us
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        work = Path(tmp)
        root, series = work / "root", work / "series"
        root.mkdir()
        series.mkdir()
        _write(root, {**case[0], "vllm/__init__.py": b""})
        names = []
        for k in range(1, len(case)):
            if text := _diff(work, case[k - 1], case[k]):
                names.append(f"{k:04d}-step.patch")
                header = f"From: Dev <dev@example.com>\nSubject: [PATCH] step {k}\n\n"
                (series / names[-1]).write_text(header + text)
        if not names:
            return
        (series / "series").write_text("".join(f"{n}\n" for n in names))
        target = [
            "--target",
            kind,
            *(["--path", str(root)] if kind == "checkout" else ["--site-packages", str(root)]),
        ]
        if kind == "site-packages":
            _dist_info(root)
        base = _snapshot(root)

        code, out = invoke("apply", str(series), *target)
        if case[-1] == case[0]:
            assert code in (0, 1), out
        else:
            assert code == 0, out
            applied = {p: d for p, (d, _) in _snapshot(root).items() if "dist-info" not in p}
            assert applied == {**case[-1], "vllm/__init__.py": b""}
            modes = {p: m & 0o7777 for p, (_, m) in _snapshot(root).items() if p in case[-1]}
            assert modes == {p: 0o755 if d.startswith(EXEC.encode()) else 0o644 for p, d in case[-1].items()}
            if kind == "site-packages":
                (info,) = root.glob("vllm-*.dist-info")
                assert sitepackages.record_problems(info, root) == []
        code, out = invoke("apply", *target, "--reverse")
        assert code == 0, out
        assert _snapshot(root) == base


def _series(work: Path, case: list[dict[str, bytes]]) -> Path:
    series = work / "series"
    series.mkdir()
    names = []
    for k in range(1, len(case)):
        if text := _diff(work, case[k - 1], case[k]):
            names.append(f"{k:04d}-step.patch")
            (series / names[-1]).write_text(
                f"From: Dev <dev@example.com>\nSubject: [PATCH] step {k}\n\n{text}"
            )
    (series / "series").write_text("".join(f"{n}\n" for n in names))
    return series


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=states(), where=st.sampled_from(["vllm/f0.py", "vllm/sub/link.py"]))
def test_a_symlink_in_a_series_is_refused_and_nothing_changes(
    case: list[dict[str, bytes]], where: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        _write(root, case[0])
        series = _series(work, case)
        link = (f"diff --git a/{where} b/{where}\nnew file mode 120000\n--- /dev/null\n+++ b/{where}\n"
                "@@ -0,0 +1 @@\n+../../etc/passwd\n\\ No newline at end of file\n")  # fmt: skip
        if where in case[-1]:  # the series ends with the file present: a type change instead
            link = f"diff --git a/{where} b/{where}\nold mode 100644\nnew mode 120000\n"
        (series / "0099-link.patch").write_text(
            f"From: Dev <dev@example.com>\nSubject: [PATCH] link\n\n{link}"
        )
        with (series / "series").open("a") as handle:
            handle.write("0099-link.patch\n")
        before = _snapshot(root)
        code, out = invoke("apply", str(series), "--target", "checkout", "--path", str(root))
        assert code == 2 and "symlink" in out, out
        assert _snapshot(root) == before and not any(p.is_symlink() for p in root.rglob("*"))


class _Crash(Exception):
    pass


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=states(), data=st.data())
def test_edits_after_a_crash_survive_recovery(case: list[dict[str, bytes]], data) -> None:
    from patchkit.txn import journal

    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        work = Path(tmp)
        root = work / "root"
        root.mkdir()
        _write(root, case[0])
        series = _series(work, case)
        if not (series / "series").read_text():
            return
        base = _snapshot(root)
        touched = sorted(set().union(*case))  # any file of any state (first and last may both be empty)
        step = data.draw(st.sampled_from(["journal", "replace:1", "replace:2", "replace:3", "before-commit"]))

        def hook(name: str) -> None:
            if name == step:
                raise _Crash(name)

        journal.fault_hook = hook
        try:
            try:
                invoke("apply", str(series), "--target", "checkout", "--path", str(root))
            except _Crash:
                pass
        finally:
            journal.fault_hook = None
        edited = data.draw(st.lists(st.sampled_from(touched), max_size=3, unique=True))
        for rel in edited:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(f"user edit of {rel}\n".encode())
        code, out = invoke("status", "--target", "checkout", "--path", str(root))
        assert code in (0, 1), out
        now = _snapshot(root)
        for rel in edited:
            assert now[rel][0] == f"user edit of {rel}\n".encode(), out
        if not (root / ".patchkit/state.json").exists():  # rolled back: everything else is base
            assert {p: v for p, v in now.items() if p not in edited} == {
                p: v for p, v in base.items() if p not in edited
            }
