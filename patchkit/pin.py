"""Target pin -> cached, verified base tree (an index sdist, a git rev, or a local path).

What is verified, and when:
- index: the sdist's sha256 against the pin (and against the hash the index lists) while it
  downloads; a mismatching file is never kept. A cached sdist is re-hashed when it is reused.
- every cached base (index, git, path copy): at build time its git tree id and ``tree_hash`` are
  recorded in ``base.json`` beside it; on each reuse ``HEAD^{tree}`` must still equal the recorded
  id and ``git status --porcelain`` must be empty, else CheckFailed naming the directory.
- ``pin.tree_hash``, when the pin already carries one, must equal the prepared tree's.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import urldefrag, urljoin, urlparse
from urllib.request import url2pathname

from patchkit import git, store
from patchkit.errors import CheckFailed, UserError
from patchkit.model import Pin

PYPI_SIMPLE = "https://pypi.org/simple/"
SOURCES = ("index", "git", "path")
# What a git base keeps when the repository cannot archive its whole tree (missing large blobs).
GIT_FALLBACK_PATHS = ("vllm", "tests", "pyproject.toml", "setup.py", "requirements", "csrc")
_SKIP_DIRS = {".git", "__pycache__"}
_CHUNK = 1 << 20
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


# --------------------------------------------------------------------------- pin


def pin_problem(pin: Pin) -> tuple[str, str] | None:
    """(key, reason) of the first thing wrong with ``pin``, or None when it is complete."""
    need = {"index": ("version", "sha256"), "git": ("url", "rev"), "path": ("path",)}
    if pin.source not in need:
        return "source", f"pin source must be one of {', '.join(SOURCES)}, not {pin.source!r}"
    for key in need[pin.source]:
        if not getattr(pin, key):
            return key, f"a pin with source = {pin.source!r} needs '{key}'"
    if pin.source == "index" and not re.fullmatch(r"[0-9a-fA-F]{64}", pin.sha256 or ""):
        return "sha256", f"pin sha256 must be 64 hex digits, not {pin.sha256!r}"
    if pin.source == "git" and not re.fullmatch(r"[0-9a-fA-F]{40}", pin.rev or ""):
        return "rev", f"pin rev must be a full 40-hex commit id, not {pin.rev!r}"
    return None


def validate_pin(pin: Pin) -> None:
    """Raise UserError unless ``pin`` names everything its source needs."""
    if problem := pin_problem(pin):
        raise UserError(problem[1])


def normalize_name(name: str) -> str:
    """PEP 503 project name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------- index settings


def _pip_config_files() -> list[Path]:
    """pip's configuration files, lowest precedence first (as pip loads them)."""
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(os.pathsep) if d]
    files.append(Path("/etc/pip.conf"))
    if not (env_file and Path(env_file).exists()):
        config_home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
        files += [Path.home() / ".pip" / "pip.conf", Path(config_home) / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def _pip_config() -> dict[str, str]:
    parser = configparser.RawConfigParser(strict=False)
    for path in _pip_config_files():
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            continue  # pip would complain; for finding an index we just skip the file
    values: dict[str, str] = {}
    for section in ("global", "download"):
        if parser.has_section(section):
            values.update({k.replace("_", "-"): v for k, v in parser.items(section)})
    return values


def index_url() -> str:
    """The primary package index: PIP_INDEX_URL, else pip's config ``index-url``, else PyPI."""
    return os.environ.get("PIP_INDEX_URL") or _pip_config().get("index-url") or PYPI_SIMPLE


def index_urls() -> list[str]:
    """The primary index followed by pip's extra indexes (env or config), without duplicates.

    Safe to search them all: the pin's sha256 decides what is accepted, not the index.
    """
    extra = os.environ.get("PIP_EXTRA_INDEX_URL") or _pip_config().get("extra-index-url", "")
    urls = [index_url(), *extra.split()]
    return list(dict.fromkeys(u.rstrip("/") + "/" for u in urls))


# --------------------------------------------------------------------------- index lookup


class _Links(HTMLParser):
    """The ``<a href>`` links of a PEP 503 HTML project page as (href, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self.links.append((self._href, ""))

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._href = None


def _project_files(page_url: str) -> list[tuple[str, str, str | None]] | None:
    """(filename, absolute url, listed sha256) of a project page; None when it does not exist."""
    if urlparse(page_url).scheme == "file":
        page = Path(url2pathname(urlparse(page_url).path))
        if page.is_dir():
            page = page / "index.html"
        if not page.is_file():
            return None
        body, ctype = page.read_bytes(), "text/html"
    else:
        request = urllib.request.Request(page_url, headers={"Accept": _ACCEPT})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body, ctype = response.read(), response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise UserError(f"{page_url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise UserError(f"{page_url}: cannot reach the index ({exc})") from None
    if ctype.endswith("json"):
        files = json.loads(body)["files"]
        return [
            (f["filename"], urljoin(page_url, f["url"]), f.get("hashes", {}).get("sha256")) for f in files
        ]
    parser = _Links()
    parser.feed(body.decode("utf-8", errors="replace"))
    found = []
    for href, text in parser.links:
        url, fragment = urldefrag(urljoin(page_url, href))
        listed = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        found.append((text.strip() or PurePosixPath(urlparse(url).path).name, url, listed))
    return found


def _is_sdist_of(filename: str, name: str, version: str) -> bool:
    for ext in (".tar.gz", ".zip"):
        if filename.lower().endswith(ext):
            project, _, file_version = filename[: -len(ext)].rpartition("-")
            return normalize_name(project) == normalize_name(name) and file_version == version
    return False


def _find_sdist(name: str, version: str) -> tuple[str, str, str | None]:
    """(filename, url, listed sha256) of the sdist, from the first index that has it."""
    searched = []
    for index in index_urls():
        page_url = f"{index}{normalize_name(name)}/"
        searched.append(page_url)
        files = [f for f in _project_files(page_url) or [] if _is_sdist_of(f[0], name, version)]
        if files:
            return min(files, key=lambda f: not f[0].endswith(".tar.gz"))
    raise UserError(f"no sdist {name}-{version} on {', '.join(searched)}")


# --------------------------------------------------------------------------- download


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _chunks(response, total: int | None, label: str) -> Iterator[bytes]:
    """Read ``response`` in chunks, with a rich progress bar when stderr is a terminal."""
    if not sys.stderr.isatty():
        while chunk := response.read(_CHUNK):
            yield chunk
        return
    from rich.console import Console
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    columns = (*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        while chunk := response.read(_CHUNK):
            progress.advance(task, len(chunk))
            yield chunk


def _download(url: str, dest: Path, expected: str) -> None:
    """Stream ``url`` to ``dest``; CheckFailed (and no file left) unless its sha256 matches."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=120) as response, open(dest, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            for chunk in _chunks(response, total, dest.name):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        dest.unlink(missing_ok=True)
        raise UserError(f"{url}: download failed ({exc})") from None
    if digest.hexdigest() != expected:
        dest.unlink()
        raise CheckFailed(f"{dest.name}: sha256 mismatch: expected {expected}, got {digest.hexdigest()}")


def download_sdist(name: str, version: str, sha256: str) -> Path:
    """The verified sdist ``name-version``, from the cache or downloaded into it (by sha256)."""
    expected = sha256.lower()
    entry = store.store_dir("sdist", expected)
    cached = sorted(entry.glob("*")) if entry.is_dir() else []
    if cached and _sha256_file(cached[0]) == expected:
        return cached[0]
    if entry.is_dir():
        store.remove_entry("sdist", expected)  # corrupt: never keep a mismatching file

    def build(tmp: Path) -> None:
        filename, url, listed = _find_sdist(name, version)
        if listed and listed.lower() != expected:
            raise CheckFailed(
                f"{filename}: sha256 mismatch: the pin expects {expected}, the index lists {listed}"
            )
        _download(url, tmp / filename, expected)

    return next(store.build_entry("sdist", expected, build).iterdir())


# --------------------------------------------------------------------------- safe extraction


def _unsafe_reason(name: str, kind: str, linkname: str = "") -> str | None:
    """Why an archive member may not be extracted, or None when it is safe.

    ``kind`` is file | dir | symlink | hardlink | other; hard-link targets are archive paths.
    """
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "absolute path"
    if ".." in parts:
        return "path with '..'"
    if kind == "other":
        return "device, fifo or other special file"
    if kind in ("symlink", "hardlink"):
        if linkname.startswith(("/", "\\")):
            return f"link to absolute path {linkname!r}"
        base = parts[:-1] if kind == "symlink" else []
        depth = 0
        for part in [*base, *linkname.replace("\\", "/").split("/")]:
            depth += -1 if part == ".." else 0 if part in ("", ".") else 1
            if depth < 0:
                return f"link outside the archive to {linkname!r}"
    return None


def _top_dir(names: list[str], archive: Path) -> str:
    tops = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts}
    if len(tops) != 1:
        raise CheckFailed(f"{archive.name}: expected one top-level directory, found {len(tops)}")
    return tops.pop()


def _strip(name: str, top: str) -> str:
    return "/".join(PurePosixPath(name).parts[1:]) if PurePosixPath(name).parts[0] == top else ""


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    return "file" if member.isfile() else "other"


def extract_archive(archive: Path, dest: Path) -> None:
    """Extract a tar(.gz) or zip into ``dest`` without its single top-level directory.

    Every member is checked before anything is written (CheckFailed naming the member); tar
    extraction also goes through tarfile's ``data`` filter.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, dest)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            if reason := _unsafe_reason(member.name, _tar_kind(member), member.linkname):
                raise CheckFailed(f"{archive.name}: refusing member {member.name!r}: {reason}")
        top = _top_dir([m.name for m in members], archive)
        kept = []
        for member in members:
            stripped = _strip(member.name, top)
            if not stripped:
                continue
            link = _strip(member.linkname, top) if member.islnk() else member.linkname
            kept.append(member.replace(name=stripped, linkname=link, deep=False))
        tar.extractall(dest, members=kept, filter="data")


def _extract_zip(archive: Path, dest: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in infos:
            mode = info.external_attr >> 16
            kind = "symlink" if stat.S_ISLNK(mode) else "dir" if info.is_dir() else "file"
            reason = "symlink (not supported in zip)" if kind == "symlink" else None
            if reason := reason or _unsafe_reason(info.filename, kind):
                raise CheckFailed(f"{archive.name}: refusing member {info.filename!r}: {reason}")
        top = _top_dir([i.filename for i in infos], archive)
        for info in infos:
            stripped = _strip(info.filename, top)
            if not stripped or info.is_dir():
                continue
            target = dest / stripped
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            if (info.external_attr >> 16) & 0o111:
                target.chmod(0o755)


# --------------------------------------------------------------------------- tree hash


def tree_hash(root: Path) -> str:
    """sha256 over sorted (relative path, git-style mode, content sha256) of the files under
    ``root``, skipping ``.git`` and ``__pycache__`` directories. Symlinks hash their target text.
    """
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in [
            *filenames,
            *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d))),
        ]:
            path = Path(dirpath, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                mode, digest = "120000", hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
            elif stat.S_ISREG(info.st_mode):
                mode = "100755" if info.st_mode & 0o111 else "100644"
                digest = _sha256_file(path)
            else:
                continue
            entries.append((path.relative_to(root).as_posix(), mode, digest))
    outer = hashlib.sha256()
    for rel, mode, digest in sorted(entries):
        outer.update(f"{mode} {digest} {rel}\0".encode())
    return outer.hexdigest()


# --------------------------------------------------------------------------- bases


def _record_base(entry: Path, pin: Pin, **extra: object) -> None:
    """Commit the tree under ``entry/tree`` and write ``entry/base.json`` describing it."""
    tree = entry / "tree"
    label = pin.version or pin.rev or pin.path
    commit = git.init_with_commit(tree, f"base: {pin.name} {label} ({pin.source})")
    marker = {
        "pin": {k: v for k, v in pin.to_dict().items() if k != "tree_hash"},
        "commit": commit,
        "tree_id": git.output(["rev-parse", "HEAD^{tree}"], tree).strip(),
        "tree_hash": tree_hash(tree),
        **extra,
    }
    (entry / "base.json").write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _verified_base(entry: Path) -> tuple[Path, dict]:
    """The cached tree of ``entry`` after checking it is still exactly what was recorded."""
    tree = entry / "tree"
    marker = json.loads((entry / "base.json").read_text(encoding="utf-8"))
    tree_id = git.run(["rev-parse", "HEAD^{tree}"], tree, check=False).stdout.decode().strip()
    status = git.run(["status", "--porcelain"], tree, check=False)
    if tree_id != marker["tree_id"] or status.returncode != 0 or status.stdout.strip():
        raise CheckFailed(
            f"{tree}: cached base was modified (tree {tree_id or '?'} != {marker['tree_id']} "
            "or working tree not clean); delete that cache entry to rebuild it"
        )
    return tree, marker


def _build_index_base(pin: Pin, entry: Path) -> None:
    sdist = download_sdist(pin.name, pin.version or "", pin.sha256 or "")
    extract_archive(sdist, entry / "tree")
    _record_base(entry, pin, sdist=sdist.name, sdist_sha256=(pin.sha256 or "").lower())


def _is_local(url: str) -> bool:
    return urlparse(url).scheme in ("", "file") and not re.match(r"[^/]+@[^/]+:", url)


def _git_repo(url: str, rev: str) -> Path:
    """A repository holding ``rev``: the local one itself, or a cached fetch of a remote one."""
    if _is_local(url):
        repo = Path(url2pathname(urlparse(url).path) if url.startswith("file:") else url)
        repo = repo.expanduser()
        if not repo.is_dir():
            raise UserError(f"git url {url}: no such directory")
    else:
        repo = store.store_dir("git-mirror", hashlib.sha256(url.encode()).hexdigest()[:24])
        with store.entry_lock("git-mirror", repo.name):
            if not repo.is_dir():
                repo.mkdir(parents=True)
                git.run(["init", "-q", "--bare"], repo)
            if git.run(["cat-file", "-e", f"{rev}^{{commit}}"], repo, check=False).returncode:
                fetched = git.run(["fetch", "-q", "--depth=1", url, rev], repo, check=False)
                if fetched.returncode:
                    git.run(["fetch", "-q", url], repo, check=False)
    if git.run(["cat-file", "-e", f"{rev}^{{commit}}"], repo, check=False).returncode:
        raise UserError(f"git url {url}: commit {rev} not found")
    return repo


def _build_git_base(pin: Pin, entry: Path) -> None:
    """``git archive`` the rev into the tree; if the repository lacks some blobs, archive only
    the GIT_FALLBACK_PATHS that exist (recorded in base.json as ``paths``)."""
    repo, rev, tar = _git_repo(pin.url or "", pin.rev or ""), pin.rev or "", entry / "src.tar"
    archive = ["archive", "--format=tar", "--prefix=src/", "-o", str(tar), rev]
    paths: list[str] = []
    if git.run(archive, repo, check=False).returncode:
        names = git.output(["ls-tree", "--name-only", rev], repo).split("\n")
        paths = [p for p in GIT_FALLBACK_PATHS if p in names]
        proc = git.run([*archive, "--", *paths], repo, check=False) if paths else None
        if proc is None or proc.returncode:
            detail = proc.stderr.decode(errors="replace").strip() if proc else "nothing to take"
            raise UserError(f"git url {pin.url}: cannot archive {rev}: {detail}")
    extract_archive(tar, entry / "tree")
    tar.unlink()
    _record_base(entry, pin, paths=paths or ["*"])


def _build_path_copy(pin: Pin, root: Path, entry: Path) -> None:
    shutil.copytree(root, entry / "tree", symlinks=True, ignore=shutil.ignore_patterns(*_SKIP_DIRS))
    _record_base(entry, pin)


def _prepare_path(pin: Pin) -> tuple[Path, str]:
    """A path pin is used in place when it is a git work tree; otherwise a cached copy is."""
    root = Path(pin.path or "").expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"pin path {pin.path}: no such directory")
    digest = tree_hash(root)
    if (root / ".git").exists():
        return root, digest
    key = f"path-{digest}"
    entry = store.build_entry("base", key, lambda tmp: _build_path_copy(pin, root, tmp))
    return _verified_base(entry)[0], digest


def prepare_base(pin: Pin) -> Path:
    """The root of a prepared, verified source tree for ``pin`` (a git repository with a base
    commit), built into the cache on first use. Sets ``pin.tree_hash``."""
    validate_pin(pin)
    if pin.source == "path":
        tree, digest = _prepare_path(pin)
    else:
        key = f"index-{(pin.sha256 or '').lower()}" if pin.source == "index" else f"git-{pin.rev}"
        build = _build_index_base if pin.source == "index" else _build_git_base
        entry = store.build_entry("base", key, lambda tmp: build(pin, tmp))
        tree, marker = _verified_base(entry)
        digest = marker["tree_hash"]
    if pin.tree_hash and pin.tree_hash != digest:
        raise CheckFailed(f"{tree}: tree hash {digest} differs from the pinned {pin.tree_hash}")
    pin.tree_hash = digest
    return tree


def checkout(pin: Pin, dest: Path | None = None) -> Path:
    """Prepare the base; with ``dest``, copy it there (a git repository of its own, no hard
    links, so it can be edited) and return that path. ``dest`` must be absent or empty."""
    base = prepare_base(pin)
    if dest is None:
        return base
    dest = dest.expanduser().resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest}: already exists and is not an empty directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        shutil.copytree(base, tmp / "tree", symlinks=True)
        if dest.exists():
            dest.rmdir()
        os.rename(tmp / "tree", dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
