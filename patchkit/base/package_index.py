"""The package index: pip's index settings, PEP 691/503 project pages, verified sdist download.

The sdist's sha256 is checked against the pin (and against the hash the index lists) while it
downloads; a mismatching file is never kept, and a cached sdist is re-hashed when it is reused.
Re-exported by ``patchkit.base.pin``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urldefrag, urljoin, urlparse
from urllib.request import url2pathname

from patchkit import cache, pipconf, versions
from patchkit.base.archive import CHUNK, sha256_file
from patchkit.errors import CheckFailed, UserError
from patchkit.ui.console import progress_enabled, rich_console, verbosity

PYPI_SIMPLE = "https://pypi.org/simple/"
_ACCEPT = ", ".join(
    [
        "application/vnd.pypi.simple.v1+json",
        "application/vnd.pypi.simple.v1+html;q=0.2",
        "text/html;q=0.1",
    ]
)


# --------------------------------------------------------------------------- index settings


# what patchkit fetches is what `pip download` / `pip install` would: both sections apply, as
# ``[install]`` does for the test venv (testrun/testenv), so the two never go to different indexes
COMMANDS = ("download", "install")


def pip_settings() -> dict[str, str]:
    """pip's settings for patchkit's downloads (``patchkit.pipconf``: pip's own precedence)."""
    return pipconf.settings(COMMANDS)


def normalize_name(name: str) -> str:
    """PEP 503 project name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def index_url() -> str:
    """The primary package index: pip's ``index-url`` (env over files, [install] over [global]), else PyPI."""
    return pip_settings().get("index-url") or PYPI_SIMPLE


def index_urls() -> list[str]:
    """The primary index followed by pip's extra indexes (env or config), without duplicates.

    Safe to search them all: the pin's sha256 decides what is accepted, not the index.
    UserError when pip is told to use no index (PIP_NO_INDEX or ``no-index`` in pip.conf).
    """
    values = pip_settings()
    if pipconf.is_on(values, "no-index"):
        raise UserError("the package index is off (PIP_NO_INDEX / pip's no-index)")
    urls = [values.get("index-url") or PYPI_SIMPLE, *pipconf.words(values, "extra-index-url")]
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


_credentials: dict[str, str] = {}  # host[:port] -> "user:password" seen in an index URL


def _urlopen(url: str, headers: dict[str, str], timeout: float):  # noqa: ANN202
    """urlopen with HTTP basic auth taken from ``user:password@`` in the URL (or in an earlier
    index URL of the same host, as pip does, so files the index links to get it too)."""
    parts = urlparse(url)
    host = parts.netloc.rpartition("@")[2]
    if parts.username is not None:
        _credentials[host] = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        url = parts._replace(netloc=host).geturl()
    if userinfo := _credentials.get(host):
        basic = base64.b64encode(userinfo.encode()).decode()
        headers = {**headers, "Authorization": f"Basic {basic}"}
    request = urllib.request.Request(url, headers=headers)
    if urlparse(url).scheme != "https":
        return urllib.request.urlopen(request, timeout=timeout)
    return urllib.request.urlopen(request, timeout=timeout, context=_ssl_context(pip_settings().get("cert")))


def _ssl_context(cert: str | None):  # noqa: ANN202
    """TLS that trusts pip's ``cert`` bundle when one is set (pip's ``--cert``), else the system's."""
    import ssl

    if cert and not Path(cert).exists():
        raise UserError(f"pip's cert setting names {cert}, which does not exist")
    return ssl.create_default_context(cafile=cert or None)


def find_links() -> list[str]:
    """pip's ``find-links`` locations (directories or pages of links), as URLs."""
    located = []
    for item in pipconf.words(pip_settings(), "find-links"):
        located.append(item if "://" in item else Path(item).expanduser().resolve().as_uri())
    return located


def _linked_files(location: str) -> list[tuple[str, str, str | None]]:
    """(filename, url, listed sha256) of the files a ``find-links`` location offers."""
    parts = urlparse(location)
    if parts.scheme == "file":
        folder = Path(url2pathname(parts.path))
        if folder.is_dir() and not (folder / "index.html").is_file():
            return [(f.name, f.as_uri(), None) for f in sorted(folder.iterdir()) if f.is_file()]
    return _project_files(location) or []


def candidates(name: str) -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    """(where, files) from pip's find-links, then each index's project page, in pip's order of search."""
    for location in find_links():
        yield _redact(location), _linked_files(location)
    for index in index_urls():
        page_url = f"{index}{normalize_name(name)}/"
        yield _redact(page_url), _project_files(page_url) or []


def _redact(url: str) -> str:
    """``url`` without the password an index URL may carry."""
    return re.sub(r"//[^/@]*@", "//***@", url)


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
        try:
            with _urlopen(page_url, {"Accept": _ACCEPT}, timeout=60) as response:
                body, ctype = response.read(), response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise UserError(f"{_redact(page_url)}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise UserError(f"{_redact(page_url)}: cannot reach the index ({exc})") from None
    if ctype.endswith("json"):
        try:
            return [
                (f["filename"], urljoin(page_url, f["url"]), f.get("hashes", {}).get("sha256"))
                for f in json.loads(body)["files"]
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"{_redact(page_url)}: not a PEP 691 project page ({exc})") from None
    parser = _Links()
    parser.feed(body.decode("utf-8", errors="replace"))
    found = []
    for href, text in parser.links:
        url, fragment = urldefrag(urljoin(page_url, href))
        listed = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        found.append((text.strip() or PurePosixPath(urlparse(url).path).name, url, listed))
    return found


def _is_sdist_of(filename: str, name: str, version: str) -> bool:
    return versions.sdist_of(filename, name, version)


def _find_sdist(name: str, version: str) -> tuple[str, str, str | None]:
    """(filename, url, listed sha256) of the sdist, from the first index that has it."""

    searched = []
    for where, listed in candidates(name):
        searched.append(where)
        files = [f for f in listed if _is_sdist_of(f[0], name, version)]
        if files:
            return min(files, key=lambda f: not f[0].endswith(".tar.gz"))
    raise UserError(f"no sdist {name}-{version} on {', '.join(searched)}")


def _is_wheel_of(filename: str, name: str, version: str) -> bool:
    return versions.wheel_of(filename, name, version)


def project_files(name: str, version: str) -> list[tuple[str, str, str | None]]:
    """(filename, url, listed sha256) of every sdist and wheel of ``name==version``, from the first
    index that has any (UserError when an index cannot be reached)."""
    for _, files in candidates(name):
        found = [f for f in files if _is_sdist_of(f[0], name, version) or _is_wheel_of(f[0], name, version)]
        if found:
            return found
    return []


def wheel_rank(filename: str) -> int | None:
    """The wheel's place in this interpreter's tag order (lower is better); None if it cannot run here."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None
    return next((rank for rank, tag in enumerate(sys_tags()) if tag in tags), None)


def platform_wheel(name: str, version: str) -> tuple[str, str, str]:
    """(filename, url, listed sha256) of the ``name==version`` wheel that suits this interpreter best;
    UserError when there is none or the index lists no sha256 for it (it could not be checked)."""
    ranked = [(rank, f) for f in project_files(name, version) if (rank := wheel_rank(f[0])) is not None]
    if not ranked:
        indexes = ", ".join(map(_redact, index_urls()))
        raise UserError(f"no {name} {version} wheel for this platform on {indexes}")
    filename, url, listed = min(ranked)[1]
    if not listed:
        raise UserError(f"{filename}: the index lists no sha256, so it cannot be checked")
    return filename, url, listed.lower()


# --------------------------------------------------------------------------- download


def _chunks(response, total: int | None, label: str) -> Iterator[bytes]:
    """Read ``response`` in chunks, with a rich progress bar when stderr is a terminal."""
    if not progress_enabled(sys.stderr):  # a log, a pipe, or -q
        size = f" ({total / 1e6:.1f} MB)" if total else ""
        if verbosity() >= 0:
            print(f"patchkit: downloading {label}{size}", file=sys.stderr, flush=True)
        while chunk := response.read(CHUNK):
            yield chunk
        return
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    columns = (*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=rich_console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        while chunk := response.read(CHUNK):
            progress.advance(task, len(chunk))
            yield chunk


def _download(url: str, dest: Path, expected: str) -> None:
    """Stream ``url`` to ``dest``; CheckFailed (and no file left) unless its sha256 matches."""
    digest = hashlib.sha256()
    try:
        with _urlopen(url, {}, timeout=120) as response, open(dest, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            for chunk in _chunks(response, total, dest.name):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        dest.unlink(missing_ok=True)
        raise UserError(f"{_redact(url)}: download failed ({exc})") from None
    if digest.hexdigest() != expected:
        dest.unlink()
        raise CheckFailed(f"{dest.name}: sha256 mismatch: expected {expected}, got {digest.hexdigest()}")


def sdist_sha256(name: str, version: str) -> tuple[str, str]:
    """(filename, sha256) of the sdist ``name-version`` as the index lists it (PEP 691 / 503 hash);
    an index that lists no hash has the file downloaded and hashed, as ``pip hash`` does."""
    filename, url, listed = _find_sdist(name, version)
    if listed:
        return filename, listed.lower()
    digest = hashlib.sha256()
    try:
        with _urlopen(url, {}, timeout=120) as response:
            for chunk in _chunks(
                response, int(response.headers.get("Content-Length") or 0) or None, filename
            ):
                digest.update(chunk)
    except (urllib.error.URLError, OSError) as exc:
        raise UserError(f"{_redact(url)}: download failed ({exc})") from None
    return filename, digest.hexdigest()


def download(url: str, dest: Path, sha256: str) -> None:
    """Download ``url`` to ``dest``, keeping it only when its sha256 is ``sha256``."""
    _download(url, dest, sha256.lower())


def download_sdist(name: str, version: str, sha256: str) -> Path:
    """The verified sdist ``name-version``, from the cache or downloaded into it (by sha256)."""
    expected = sha256.lower()
    entry = cache.store_dir("sdist", expected)
    cached = sorted(entry.glob("*")) if entry.is_dir() else []
    if cached and sha256_file(cached[0]) == expected:
        return cached[0]
    if entry.is_dir():
        cache.remove_entry("sdist", expected)  # corrupt: never keep a mismatching file

    def build(tmp: Path) -> None:
        filename, url, listed = _find_sdist(name, version)
        if listed and listed.lower() != expected:
            raise CheckFailed(
                f"{filename}: sha256 mismatch: the pin expects {expected}, the index lists {listed}"
            )
        _download(url, tmp / filename, expected)

    return next(cache.build_entry("sdist", expected, build).iterdir())
