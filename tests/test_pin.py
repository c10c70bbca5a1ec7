"""pin: index settings, sdist download and verification, safe extraction, bases. Offline only:
the index is a PEP 691 JSON server on 127.0.0.1 (or a file:// PEP 503 directory)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchkit import cache, git
from patchkit.base import pin
from patchkit.errors import CheckFailed, UserError
from patchkit.values import Pin

NAME, VERSION = "demo-pkg", "1.0"
FILES = {"demo/__init__.py": b"VALUE = 1\n", "tests/test_demo.py": b"def test(): pass\n"}


def make_sdist(path: Path, files: dict[str, bytes], top: str = "demo_pkg-1.0") -> str:
    """Write a tar.gz sdist with ``files`` under ``top/``; return its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


class FakeIndex:
    """A PEP 691 index serving one project page and its files; counts requests by path."""

    def __init__(self, root: Path) -> None:
        self.files: dict[str, bytes] = {}
        self.listed: dict[str, str | None] = {}
        self.requests: list[str] = []
        self.auth: list[str] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.requests.append(self.path)
                if auth := self.headers.get("Authorization"):
                    index.auth.append(auth)
                if self.path == "/simple/demo-pkg/":
                    accept = self.headers.get("Accept", "")
                    assert "application/vnd.pypi.simple.v1+json" in accept
                    body = json.dumps({"meta": {"api-version": "1.0"}, "files": index.entries()})
                    self._send(body.encode(), "application/vnd.pypi.simple.v1+json")
                elif self.path.startswith("/files/") and self.path[7:] in index.files:
                    self._send(index.files[self.path[7:]], "application/octet-stream")
                else:
                    self.send_error(404)

            def _send(self, body: bytes, ctype: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, filename: str, data: bytes, listed: str | None = "auto") -> str:
        sha = hashlib.sha256(data).hexdigest()
        self.files[filename] = data
        self.listed[filename] = sha if listed == "auto" else listed
        return sha

    def entries(self) -> list[dict]:
        return [
            {"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": h} if h else {}}
            for f, h in self.listed.items()
        ]

    def downloads(self) -> int:
        return sum(1 for r in self.requests if r.startswith("/files/"))


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Own cache, no pip config or index settings from the machine."""
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)  # searched too, as pip does
    return tmp_path / "cache"


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeIndex]:
    fake = FakeIndex(tmp_path)
    monkeypatch.setenv("PIP_INDEX_URL", fake.url)
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture
def sdist(tmp_path: Path, index: FakeIndex) -> str:
    path = tmp_path / "demo_pkg-1.0.tar.gz"
    make_sdist(path, FILES)
    return index.add(path.name, path.read_bytes())


def index_pin(sha256: str) -> Pin:
    return Pin(name=NAME, source="index", version=VERSION, sha256=sha256)


# --------------------------------------------------------------------------- index settings


def test_index_url_defaults_to_pypi() -> None:
    assert pin.index_url() == "https://pypi.org/simple/"
    assert pin.index_urls() == ["https://pypi.org/simple/"]


def test_moved_names_are_re_exported_from_pin() -> None:
    from patchkit.base import archive
    from patchkit.base import package_index as index_module

    for name in ("PYPI_SIMPLE", "index_url", "index_urls", "download_sdist"):
        assert getattr(pin, name) is getattr(index_module, name)
    for name in ("extract_archive", "tree_hash"):
        assert getattr(pin, name) is getattr(archive, name)


def test_pip_index_url_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://conf.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert pin.index_url() == "https://conf.example/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    assert pin.index_url() == "https://env.example/simple"


def test_pip_conf_files_and_extra_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex_url = https://user.example/simple\n"
        "extra-index-url =\n    file:///a/simple\n    https://b.example/simple/\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "nowhere"))
    monkeypatch.delenv("PIP_CONFIG_FILE")
    assert pin.index_urls() == [
        "https://user.example/simple/",
        "file:///a/simple/",
        "https://b.example/simple/",
    ]


# --------------------------------------------------------------------------- index pins


def test_prepare_index_base_and_cache_hit(sdist: str, index: FakeIndex) -> None:
    p = index_pin(sdist)
    root = pin.prepare_base(p)
    assert (root / "demo" / "__init__.py").read_bytes() == b"VALUE = 1\n"
    assert (root / "tests" / "test_demo.py").is_file()
    assert git.output(["rev-list", "--count", "HEAD"], root).strip() == "1"
    assert p.tree_hash == pin.tree_hash(root)
    assert index.downloads() == 1

    again = index_pin(sdist)
    assert pin.prepare_base(again) == root
    assert again.tree_hash == p.tree_hash
    assert index.requests.count("/simple/demo-pkg/") == 1  # a cache hit asks nothing
    assert index.downloads() == 1


def test_sha256_mismatch_refused_and_nothing_cached(sdist: str, index: FakeIndex, isolated: Path) -> None:
    index.listed["demo_pkg-1.0.tar.gz"] = None  # the index lists no hash: caught on download
    wrong = "0" * 64
    with pytest.raises(CheckFailed) as err:
        pin.prepare_base(index_pin(wrong))
    assert f"expected {wrong}" in str(err.value) and f"got {sdist}" in str(err.value)
    assert index.downloads() == 1
    assert not cache.store_dir("sdist", wrong).exists()
    assert not cache.store_dir("base", f"index-{wrong}").exists()
    leftovers = [p for p in isolated.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []


def test_index_listed_hash_must_match_pin(sdist: str, index: FakeIndex) -> None:
    index.listed["demo_pkg-1.0.tar.gz"] = "f" * 64
    with pytest.raises(CheckFailed, match="the index lists f{64}"):
        pin.download_sdist(NAME, VERSION, sdist)
    assert index.downloads() == 0


def test_missing_sdist_is_a_user_error(index: FakeIndex) -> None:
    with pytest.raises(UserError, match="no sdist other-1.0 on http://127.0.0.1"):
        pin.download_sdist("other", VERSION, "a" * 64)


def test_index_credentials_sent_and_never_printed(
    sdist: str, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", index.url.replace("http://", "http://user:s3cret@"))
    pin.download_sdist(NAME, VERSION, sdist)
    assert index.auth == ["Basic dXNlcjpzM2NyZXQ="] * 2  # the page and the file it links to
    with pytest.raises(UserError) as err:
        pin.download_sdist("other", VERSION, "a" * 64)
    assert "s3cret" not in str(err.value) and "//***@127.0.0.1" in str(err.value)


def test_corrupt_cached_sdist_is_fetched_again(sdist: str, index: FakeIndex) -> None:
    path = pin.download_sdist(NAME, VERSION, sdist)
    path.write_bytes(b"corrupt")
    assert pin.download_sdist(NAME, VERSION, sdist).read_bytes() == index.files[path.name]
    assert index.downloads() == 2


def test_modified_cached_base_is_refused(sdist: str) -> None:
    root = pin.prepare_base(index_pin(sdist))
    (root / "demo" / "__init__.py").write_text("VALUE = 2\n")
    with pytest.raises(CheckFailed, match="cached base was modified"):
        pin.prepare_base(index_pin(sdist))


def test_pinned_tree_hash_must_match(sdist: str) -> None:
    p = index_pin(sdist)
    p.tree_hash = "0" * 64
    with pytest.raises(CheckFailed, match="differs from the pinned"):
        pin.prepare_base(p)


def test_extra_file_index_pep503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The primary index lacks the project; a file:// PEP 503 extra index has it."""
    simple = tmp_path / "simple"
    (simple / "demo-pkg").mkdir(parents=True)
    (tmp_path / "files").mkdir()
    sha = make_sdist(tmp_path / "files" / "demo_pkg-1.0.tar.gz", FILES)
    (simple / "demo-pkg" / "index.html").write_text(
        '<html><body><a href="../../files/demo_pkg-1.0.tar.gz#sha256=' + sha + '">'
        "demo_pkg-1.0.tar.gz</a></body></html>"
    )
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "empty").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", simple.as_uri())
    root = pin.prepare_base(index_pin(sha))
    assert (root / "demo" / "__init__.py").is_file()


# --------------------------------------------------------------------------- extraction


def _tar_with(tmp_path: Path, *members: tarfile.TarInfo) -> Path:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        ok = tarfile.TarInfo("pkg-1.0/ok.py")
        tar.addfile(ok, io.BytesIO(b""))
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size))
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_member("pkg-1.0/../x"), "'..'"),
        (_member("/abs/x"), "absolute path"),
        (_member("pkg-1.0/etc", tarfile.SYMTYPE, "/etc"), "absolute path '/etc'"),
        (_member("pkg-1.0/up", tarfile.SYMTYPE, "../../x"), "outside the archive"),
        (_member("pkg-1.0/hard", tarfile.LNKTYPE, "../x"), "outside the archive"),
        (_member("pkg-1.0/hard", tarfile.LNKTYPE, "other/x"), "outside the archive"),
        (_member("pkg-1.0/top", tarfile.SYMTYPE, ".."), "outside the archive"),
        (_member("pkg-1.0/d/top", tarfile.SYMTYPE, "../.."), "outside the archive"),
        (_member("pkg-1.0/dev", tarfile.CHRTYPE), "device"),
        (_member("pkg-1.0/fifo", tarfile.FIFOTYPE), "device"),
    ],
)
def test_unsafe_tar_members_refused(tmp_path: Path, member: tarfile.TarInfo, reason: str) -> None:
    dest = tmp_path / "out"
    with pytest.raises(CheckFailed, match=f"refusing member .*{reason}"):
        pin.extract_archive(_tar_with(tmp_path, member), dest)
    assert list(dest.iterdir()) == []  # checked before anything is written
    assert not (tmp_path / "x").exists()


def test_safe_links_and_top_dir_strip(tmp_path: Path) -> None:
    archive = _tar_with(
        tmp_path,
        _member("pkg-1.0/sub/link", tarfile.SYMTYPE, "../ok.py"),
        _member("pkg-1.0/hard", tarfile.LNKTYPE, "pkg-1.0/ok.py"),
    )
    pin.extract_archive(archive, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["hard", "ok.py", "sub"]
    assert os.readlink(tmp_path / "out" / "sub" / "link") == "../ok.py"


def test_more_than_one_top_dir_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match="one top-level directory"):
        pin.extract_archive(_tar_with(tmp_path, _member("other/x")), tmp_path / "out")


def test_zip_extract_and_refusal(tmp_path: Path) -> None:
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("pkg-1.0/a/b.py", "B = 1\n")
    pin.extract_archive(good, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "b.py").read_text() == "B = 1\n"
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("pkg-1.0/a.py", "")
        zf.writestr("pkg-1.0/../../escape.py", "")
    with pytest.raises(CheckFailed, match="'..'"):
        pin.extract_archive(bad, tmp_path / "out2")
    assert not (tmp_path / "escape.py").exists()


# --------------------------------------------------------------------------- git pins


def _repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if not (path / ".git").exists():
        git.run(["init", "-q", "-b", "main"], path)
    git.run(["add", "-A"], path)
    git.run(["commit", "-q", "-m", "c"], path)
    return git.output(["rev-parse", "HEAD"], path).strip()


def test_git_source_at_rev(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = _repo(repo, {"vllm/a.py": "A = 1\n", "tests/test_a.py": "", "README": "r\n"})
    _repo(repo, {"vllm/a.py": "A = 2\n"})
    p = Pin(name="vllm", source="git", url=str(repo), rev=first)
    root = pin.prepare_base(p)
    assert (root / "vllm" / "a.py").read_text() == "A = 1\n"
    assert (root / "README").is_file()
    assert p.tree_hash == pin.tree_hash(root)
    assert pin.prepare_base(Pin(source="git", url=str(repo), rev=first)) == root


def test_git_source_missing_blobs_takes_what_exists(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    rev = _repo(repo, {"vllm/a.py": "A = 1\n", "tests/t.py": "", "docs/big.png": "PNG" * 100})
    blob = git.output(["rev-parse", f"{rev}:docs/big.png"], repo).strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    root = pin.prepare_base(Pin(source="git", url=str(repo), rev=rev))
    assert sorted(p.name for p in root.iterdir()) == [".git", "tests", "vllm"]
    marker = json.loads((root.parent / "base.json").read_text())
    assert marker["paths"] == ["vllm", "tests"]


def test_git_remote_is_fetched_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    rev = _repo(repo, {"vllm/a.py": "A = 1\n"})
    monkeypatch.setattr(pin, "_is_local", lambda url: False)  # treat file:// as a remote
    root = pin.prepare_base(Pin(source="git", url=repo.as_uri(), rev=rev))
    assert (root / "vllm" / "a.py").read_text() == "A = 1\n"
    assert any(cache.cache_root().joinpath("git-mirror").iterdir())


def test_git_unknown_rev(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _repo(repo, {"a": "1"})
    with pytest.raises(UserError, match=f"commit {'1' * 40} not found"):
        pin.prepare_base(Pin(source="git", url=str(repo), rev="1" * 40))


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (Pin(source="svn"), "pin source must be one of"),
        (Pin(source="index", version="1"), "needs 'sha256'"),
        (Pin(source="index", version="1", sha256="abc"), "64 hex"),
        (Pin(source="git", url="x", rev="main"), "40-hex"),
        (Pin(source="path"), "needs 'path'"),
    ],
)
def test_invalid_pins(p: Pin, message: str) -> None:
    with pytest.raises(UserError, match=message):
        pin.prepare_base(p)


# --------------------------------------------------------------------------- path pins


def test_path_source_hash_stable_and_changes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "vllm").mkdir(parents=True)
    (src / "vllm" / "a.py").write_text("A = 1\n")
    p1, p2 = Pin(source="path", path=str(src)), Pin(source="path", path=str(src))
    root = pin.prepare_base(p1)
    assert root != src and (root / ".git").is_dir()  # not a git repo: prepared as a cached copy
    assert pin.prepare_base(p2) == root and p1.tree_hash == p2.tree_hash
    (src / "vllm" / "a.py").write_text("A = 2\n")
    p3 = Pin(source="path", path=str(src))
    assert (pin.prepare_base(p3) / "vllm" / "a.py").read_text() == "A = 2\n"
    assert p3.tree_hash != p1.tree_hash


def test_path_git_repo_used_in_place(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _repo(src, {"vllm/a.py": "A = 1\n"})
    p = Pin(source="path", path=str(src))
    assert pin.prepare_base(p) == src.resolve()
    assert p.tree_hash == pin.tree_hash(src)


def test_tree_hash_content_mode_and_skips(tmp_path: Path) -> None:
    (tmp_path / "t" / "d").mkdir(parents=True)
    (tmp_path / "t" / "d" / "f.py").write_text("x\n")
    first = pin.tree_hash(tmp_path / "t")
    (tmp_path / "t" / ".git").mkdir()
    (tmp_path / "t" / ".git" / "HEAD").write_text("ref\n")
    (tmp_path / "t" / "d" / "__pycache__").mkdir()
    (tmp_path / "t" / "d" / "__pycache__" / "f.pyc").write_bytes(b"\0")
    assert pin.tree_hash(tmp_path / "t") == first
    (tmp_path / "t" / "d" / "f.py").chmod(0o755)
    assert pin.tree_hash(tmp_path / "t") != first
    (tmp_path / "t" / "d" / "f.py").chmod(0o644)
    (tmp_path / "t" / "d" / "f.py").write_text("y\n")
    assert pin.tree_hash(tmp_path / "t") != first


# --------------------------------------------------------------------------- checkout


def test_checkout_copies_an_independent_tree(sdist: str, tmp_path: Path) -> None:
    base = pin.checkout(index_pin(sdist))
    dest = pin.checkout(index_pin(sdist), tmp_path / "work")
    assert dest == (tmp_path / "work").resolve() and dest != base
    assert git.output(["status", "--porcelain"], dest) == ""
    target = dest / "demo" / "__init__.py"
    assert target.stat().st_ino != (base / "demo" / "__init__.py").stat().st_ino
    target.write_text("VALUE = 3\n")
    assert (base / "demo" / "__init__.py").read_text() == "VALUE = 1\n"
    pin.prepare_base(index_pin(sdist))  # the cached base is still clean
    with pytest.raises(UserError, match="not an empty directory"):
        pin.checkout(index_pin(sdist), tmp_path / "work")
