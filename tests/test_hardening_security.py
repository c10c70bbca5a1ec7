"""Untrusted input cannot escape: paths, series names, overlays, archives, HTML, shells."""

from __future__ import annotations

import copy
import io
import json
import re
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_apply import make_checkout, run, tree_digest

from patchkit.audit.model import AuditResult
from patchkit.base import pin
from patchkit.errors import CheckFailed, UserError
from patchkit.report.html import render_html
from patchkit.report.markdown import render_markdown
from patchkit.series.files import load_entries

PATCHKIT = Path(__file__).parent.parent / "patchkit"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- paths in patches


def _evil_series(tmp_path: Path, diff: str) -> Path:
    series = tmp_path / "evil"
    series.mkdir()
    (series / "series").write_text("0001-evil.patch\n")
    (series / "0001-evil.patch").write_text(diff)
    return series


@pytest.mark.parametrize(
    "diff",
    [
        "diff --git a//etc/x b//etc/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/x\n"
        "@@ -0,0 +1 @@\n+x\n",
        "--- /dev/null\n+++ //tmp/abs-x\n@@ -0,0 +1 @@\n+x\n",
        "diff --git a/vllm/pool.py b/../x.py\nsimilarity index 100%\n"
        "rename from vllm/pool.py\nrename to ../x.py\n",
        'diff --git "a/vllm/\\056\\056/\\056\\056/x" "b/vllm/\\056\\056/\\056\\056/x"\nnew file mode 100644\n'
        '--- /dev/null\n+++ "b/vllm/\\056\\056/\\056\\056/x"\n@@ -0,0 +1 @@\n+x\n',
        "diff --git a/vllm\\..\\..\\x b/vllm\\..\\..\\x\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/vllm\\..\\..\\x\n@@ -0,0 +1 @@\n+x\n",
    ],
    ids=["absolute-git", "absolute-diff-u", "rename-out", "quoted-dotdot", "backslash"],
)
def test_escaping_patch_paths_are_refused(tmp_path: Path, diff: str) -> None:
    tree, _ = make_checkout(tmp_path)
    before = tree_digest(tree)
    code, out = run("apply", str(_evil_series(tmp_path, diff)), "--target", "checkout", "--path", str(tree))
    assert code == 2, out
    assert tree_digest(tree) == before
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.py").exists()
    assert not Path("/etc/x").exists() and not Path("/tmp/abs-x").exists()


def test_symlink_chain_out_of_the_tree_is_refused(tmp_path: Path) -> None:
    tree, _ = make_checkout(tmp_path)
    (tmp_path / "out").mkdir()
    (tree / "vllm/a").symlink_to("b")  # a -> b -> ../../out: each hop looks local, the chain leaves
    (tree / "vllm/b").symlink_to("../../out")
    diff = "diff --git a/vllm/a/x.py b/vllm/a/x.py\nnew file mode 100644\n--- /dev/null\n+++ b/vllm/a/x.py\n"
    diff += "@@ -0,0 +1 @@\n+x\n"
    code, out = run("apply", str(_evil_series(tmp_path, diff)), "--target", "checkout", "--path", str(tree))
    assert code == 2 and "symlink leading out" in out, out
    assert list((tmp_path / "out").iterdir()) == []


# --------------------------------------------------------------------------- series files


@pytest.mark.parametrize("name", ["../outside.patch", "/etc/passwd", "sub/../../outside.patch", "a\\..\\b"])
def test_series_file_naming_outside_is_refused(tmp_path: Path, name: str) -> None:
    series = tmp_path / "series"
    series.mkdir()
    (tmp_path / "outside.patch").write_text("diff --git a/x b/x\n")
    (series / "series").write_text(f"{name}\n")
    with pytest.raises(UserError, match="leaves the series directory"):
        load_entries(series)


def test_series_entry_symlinked_outside_is_refused(tmp_path: Path) -> None:
    _, series = make_checkout(tmp_path)
    (tmp_path / "secret.patch").write_text((series / "0001-pool.patch").read_text())
    (series / "0001-pool.patch").unlink()
    (series / "0001-pool.patch").symlink_to(tmp_path / "secret.patch")
    with pytest.raises(UserError, match="resolves outside the series directory"):
        load_entries(series)


def test_overlay_content_outside_is_refused(tmp_path: Path) -> None:
    _, series = make_checkout(tmp_path)
    (series / "overlays").mkdir()
    (tmp_path / "secret").write_bytes(b"secret\n")
    (series / "overlays/evil.toml").write_text(
        'target = "vllm/x.py"\nbase_sha256 = "absent"\ncontent = "../../secret"\n'
    )
    from patchkit.series.files import load_overlays

    with pytest.raises(UserError, match="must be a file beside the overlay"):
        load_overlays(series)


# --------------------------------------------------------------------------- archives


def _zip(tmp_path: Path, *entries: tuple[str, bytes, int]) -> Path:
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg-1.0/ok.py", b"")
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (("pkg-1.0/../../slip.py", b"x", 0o100644), "'..'"),
        (("../slip.py", b"x", 0o100644), "'..'"),
        (("/tmp/slip.py", b"x", 0o100644), "absolute path"),
        (("C:/slip.py", b"x", 0o100644), "absolute path"),
        (("pkg-1.0\\..\\..\\slip.py", b"x", 0o100644), "'..'"),
        (("pkg-1.0/link", b"../../etc", 0o120777), "symlink"),
    ],
)
def test_zip_slip_refused(tmp_path: Path, entry: tuple[str, bytes, int], reason: str) -> None:
    dest = tmp_path / "out"
    with pytest.raises(CheckFailed, match=f"refusing member .*{reason}"):
        pin.extract_archive(_zip(tmp_path, entry), dest)
    assert list(dest.iterdir()) == [] and not (tmp_path / "slip.py").exists()


def _tar(tmp_path: Path, *members: tuple[str, bytes, str]) -> Path:
    path = tmp_path / "chain.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, link in members:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            info.size = 1 if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(b"x" * info.size))
    return path


@pytest.mark.parametrize(
    "members",
    [
        # a -> b, b -> .. : every hop one level, the chain leaves the top directory
        [("pkg-1.0/a", tarfile.SYMTYPE, "b"), ("pkg-1.0/b", tarfile.SYMTYPE, "..")],
        # a link into a sub-directory, then a link in it climbing two levels
        [("pkg-1.0/d", tarfile.SYMTYPE, "sub"), ("pkg-1.0/sub/e", tarfile.SYMTYPE, "../../..")],
        # a file written through a symlinked directory that points out
        [("pkg-1.0/out", tarfile.SYMTYPE, "../../x"), ("pkg-1.0/out/evil.py", tarfile.REGTYPE, "")],
        # a hard link to a symlink that points out
        [("pkg-1.0/s", tarfile.SYMTYPE, "/etc/passwd"), ("pkg-1.0/h", tarfile.LNKTYPE, "pkg-1.0/s")],
    ],
    ids=["chain-up", "chain-via-subdir", "file-through-link", "hardlink-to-link"],
)
def test_tar_symlink_chains_refused(tmp_path: Path, members: list) -> None:
    dest = tmp_path / "out"
    with pytest.raises(CheckFailed, match="refusing member"):
        pin.extract_archive(_tar(tmp_path, ("pkg-1.0/ok.py", tarfile.REGTYPE, ""), *members), dest)
    assert not (tmp_path / "x").exists()
    assert all(not p.is_symlink() for p in dest.rglob("*"))


# --------------------------------------------------------------------------- HTML report

FIXTURE = Path(__file__).parent / "fixtures" / "report" / "audit_small.json"


def _payload(field: str) -> str:
    return f'"><script>alert("{field}")</script><img src=x onerror=alert("{field}")>'


def _hostile_result() -> tuple[AuditResult, list[str]]:
    data = json.loads(FIXTURE.read_text("utf-8"))
    patch = data["patches"][0]
    commit = patch["commits"][0]
    commit["subject"], commit["body"], commit["author"] = (
        _payload("subject"),
        _payload("body"),
        _payload("author"),
    )
    commit["email"] = _payload("email")
    commit["trailers"][0]["value"] = _payload("trailer")
    patch["title"] = {"en": _payload("domain-title"), "zh": _payload("domain-title")}
    patch["domain"] = "evil" + _payload("domain")
    patch["patch"] = "0001-" + _payload("patchname")
    patch["reasons"] = [_payload("reason")]
    patch["files"][0]["path"] = "vllm/" + _payload("path")
    patch["diff"] = patch["diff"].replace("num_speculative_tokens: int = Field(default=None, ge=0)",
                                          _payload("diffline"), 1)  # fmt: skip
    patch["guide"]["findings"][0]["message"] = {"en": _payload("finding"), "zh": _payload("finding")}
    patch["guide"]["findings"][0]["evidence"] = [_payload("evidence")]
    patch["guide"]["findings"][0]["file"] = _payload("finding-file")
    for gate in patch["gates"]:
        gate["summary"] = _payload(f"summary-{gate['gate']}")
        if gate["gate"] == "tests":
            gate["details"]["tests"][0]["id"] = _payload("test-id")
            gate["details"]["tests"][0]["reason"] = _payload("test-reason")
            gate["details"]["output"] = _payload("test-output")
            gate["details"]["reason"] = _payload("tests-reason")
        if gate["gate"] == "ruff":
            gate["details"]["findings"][0]["message"] = _payload("ruff-message")
    data["base"]["path"] = _payload("pin-path")
    data["series_dir"] = _payload("series-dir")
    fields = re.findall(r'alert\("([^"]+)"\)', json.dumps(data).replace('\\"', '"'))
    return AuditResult.from_dict(data), sorted(set(fields))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_html_renders_every_field_inert(lang: str) -> None:
    result, fields = _hostile_result()
    assert {"subject", "body", "author", "path", "diffline", "test-id", "test-output", "finding",
            "domain-title"} <= set(fields)  # fmt: skip
    html = render_html(copy.deepcopy(result), lang)
    assert "<script>alert(" not in html and "<img src=x" not in html
    assert "diffline" in result.patches[0].diff  # the payload really sits in a diff line
    # every field was rendered (escaped), so its absence above is not vacuous
    shown = {f for f in fields if re.search(rf"\b{re.escape(f)}\b", html)}
    missing = set(fields) - shown - {"email", "domain", "pin-path", "series-dir", "trailer", "evidence",
                                     "finding-file", "summary-apply", "summary-dco", "summary-ruff",
                                     "summary-tests", "tests-reason", "test-reason", "ruff-message",
                                     "reason", "patchname"}  # fmt: skip
    assert not missing, f"fields not rendered at all: {missing}"


def test_markdown_renders_every_field_inert() -> None:
    result, _ = _hostile_result()
    text = render_markdown(result, "en")
    assert "<script>" not in text and "<img" not in text


# --------------------------------------------------------------------------- subprocesses


def test_no_shell_anywhere_in_patchkit() -> None:
    offenders = []
    for path in PATCHKIT.rglob("*.py"):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(
                r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput\(|subprocess\.getstatusoutput\(",
                code,
            ):
                offenders.append(f"{path.relative_to(PATCHKIT.parent)}:{number}: {line.strip()}")
    assert not offenders, offenders
