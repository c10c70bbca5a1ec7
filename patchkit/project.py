"""One invocation's project, resolved once from the command line and handed to every command.

    project = Project.resolve(config="patchkit.toml" or a pin, base=Path | None)   # cli/ does this
    project.series_dir          # [series] dir of the config, else <root>/patches: every command's default
    project.base(series_dir)    # (BaseTree, Pin): --base DIR, else the pin that speaks for the series
    project.state_dir           # <root>/.patchkit/ (not created until ensure_state_dir())

Nothing is read until asked: ``apply --check`` of a series that is not the project's reads no
patchkit.toml (an invalid one in the cwd, unrelated to that series, does not stop it). The pin
grammar — a patchkit.toml (or a pin file of its form), ``NAME==VERSION``, a git URL at a revision
(``git+URL@REV`` as pip and uv write it, or ``URL@REV``), a directory — is parsed here only
(``parse_pin``), for every option that names a pin.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.errors import UserError

if TYPE_CHECKING:
    from patchkit.base.tree import BaseTree
    from patchkit.config import ProjectConfig
    from patchkit.values import Pin

CONFIG_NAME = "patchkit.toml"  # the project's file, found from the cwd up
STATE_DIR = ".patchkit"  # <project root>/.patchkit/: the project's own state (replaced series, op log)
REPLACED_DIR = "replaced"  # state_dir/replaced/<stamp>-<name>/: a series split --replace took the place of
REPORTS_DIR = Path("reports")  # audit's and runtime's default reports, as from the cwd
EDIT_DIR = Path("patchkit-edit")  # the edit work tree the edit verbs use unless --path names one

# patterns as strings: re compiles them on first use (apply and --help never parse a pin)
_INDEX = r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9A-Za-z.+!_-]+)\s*"
_SCHEMES = ("http", "https", "ssh", "git", "file")
_SCP = r"[\w.-]+@[\w.-]+:[^@]+@[^@/:]+"  # git@host:org/repo.git@REV
PIN_FORMS = (
    "NAME==VERSION (vllm==0.33.0), a patchkit.toml, a git URL at a revision (git+URL@REV), or a directory"
)


# --------------------------------------------------------------------------- the pin grammar


class PinSpec:
    """A pin as named on the command line; ``pin()`` turns it into a ``Pin`` (the index and git forms
    ask the network, once, only then). ``kind``: config | index | git | path."""

    def __init__(self, kind: str, text: str, path: Path | None = None, name: str = "vllm",
                 version: str | None = None, url: str | None = None,
                 rev: str | None = None) -> None:  # fmt: skip
        self.kind, self.text, self.path, self.name = kind, text, path, name  # path: the toml or the dir
        self.version, self.url, self.rev = version, url, rev

    def __repr__(self) -> str:
        return f"PinSpec({self.kind}: {self.text})"

    def pin(self) -> Pin:
        from patchkit.values import Pin

        if self.kind == "config":
            from patchkit.config import load_pin

            return load_pin(self.path)
        if self.kind == "path":
            return Pin(name=self.name, source="path", path=str(self.path.resolve()))
        if self.kind == "git":
            return Pin(name=self.name, source="git", url=self.url, rev=full_rev(self.url, self.rev))
        from patchkit.base.package_index import sdist_sha256

        _, sha256 = sdist_sha256(self.name, self.version)
        return Pin(name=self.name, source="index", version=self.version, sha256=sha256)


def parse_pin(text: str, option: str = "--pin") -> PinSpec:
    """The one reader of a pin named on the command line; a UserError naming ``option`` otherwise."""
    text = str(text)
    if match := re.fullmatch(_INDEX, text):
        return PinSpec("index", text, name=match.group(1), version=match.group(2))
    path = Path(text).expanduser()
    if path.is_file():
        return PinSpec("config", text, path=path)
    if path.is_dir():
        return PinSpec("path", text, path=path)
    if git := _git_at_rev(text):
        return PinSpec("git", text, url=git[0], rev=git[1])
    if path.suffix == ".toml" or os.sep in text:
        raise UserError(f"{option} {text}: no such file or directory")
    raise UserError(f"{option} {text!r}: not a pin; expected {PIN_FORMS}")


def _git_at_rev(text: str) -> tuple[str, str] | None:
    """(url, rev) of ``git+URL@REV``, ``URL@REV`` (a URL with a scheme, ``user@host:path@REV``, or
    an existing local repository before the ``@``); None when the text is none of those."""
    url = text.removeprefix("git+").split("#", 1)[0]
    scheme = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*)://[^/]*", url)
    if scheme and scheme.group(1) in _SCHEMES:
        head, at, rev = url[scheme.end() :].rpartition("@")
        return (url[: scheme.end()] + head, rev) if at and head and rev else None
    if re.fullmatch(_SCP, url):
        head, _, rev = url.rpartition("@")
        return head, rev
    head, at, rev = url.rpartition("@")
    if at and head and rev and Path(head).expanduser().is_dir():
        return str(Path(head).expanduser().resolve()), rev
    return None


def full_rev(url: str, rev: str) -> str:
    """``rev`` as a full commit id: given as one, else what the repository's branch or tag names."""
    if re.fullmatch(r"[0-9a-fA-F]{40}", rev):
        return rev.lower()
    from patchkit import git

    found = git.ls_remote(url, rev)
    if found is None:
        raise UserError(f"git {url} {rev}: no such branch or tag (give a 40-hex commit id)")
    return found


# --------------------------------------------------------------------------- the project


class Project:
    """What a command needs to know about where it runs; every part is resolved on first use.

    ``config_option``: --config FILE (or --pin FILE, its older name); ``pin_option``: a pin named in
    another form (vllm==X, URL@REV, DIR); ``base_dir``: --base DIR."""

    def __init__(self, cwd: Path, config_option: Path | None = None, pin_option: PinSpec | None = None,
                 base_dir: Path | None = None) -> None:  # fmt: skip
        self.cwd, self.config_option, self.pin_option, self.base_dir = (
            cwd,
            config_option,
            pin_option,
            base_dir,
        )
        self._cache: dict = {}

    def __repr__(self) -> str:
        return f"Project(root={self.root}, config={self.config_file}, base={self.base_dir})"

    @classmethod
    def resolve(cls, config: str | Path | None = None, base: Path | None = None, pin: str | None = None,
                cwd: Path | None = None) -> Project:  # fmt: skip
        """The project of this command line: ``config`` is what ``--config`` named (a patchkit.toml,
        or — its older meaning — a pin in another form), ``pin`` a pin in any form (its [target],
        for a toml), ``base`` --base DIR."""
        named = parse_pin(str(config), "--config") if config is not None else None
        spec = parse_pin(str(pin), "--pin") if pin is not None else None
        if named is not None and named.kind != "config":
            named, spec = None, spec or named
        return cls(cwd or Path.cwd(), named.path if named else None, spec, base)

    def _once(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # -- the config file and what it says

    @property
    def config_file(self) -> Path | None:
        """--config's file, else the nearest patchkit.toml at or above the cwd (only looked for)."""
        if self.config_option is not None:
            return self.config_option.resolve()

        return self._once("file", lambda: find_config(self.cwd))

    @property
    def root(self) -> Path:
        """The directory of the config file, else the cwd."""
        return self.config_file.parent if self.config_file else self.cwd.resolve()

    @property
    def config(self) -> ProjectConfig:
        """The config, read and checked on first use (defaults when there is no file)."""

        def load() -> ProjectConfig:
            from patchkit.config import default_config, load_config

            return (
                load_config(self.config_file) if self.config_file is not None else default_config(self.root)
            )

        return self._once("config", load)

    @property
    def series_dir(self) -> Path:
        """Where every command reads and writes the project's series: [series] dir, else patches/."""
        return self.config.series.dir

    def series(self, given: Path | None) -> Path:
        return given if given is not None else self.series_dir

    def owns(self, series_dir: Path) -> bool:
        """Whether ``series_dir`` is the project's own series: only then do its pin and overlays
        apply to it; any other series carries its own (split.json, its dir)."""
        return self.config_file is not None and series_dir.resolve() == self.series_dir.resolve()

    def overlay_root(self, series_dir: Path) -> Path | None:
        """The project root (its overlays/) for the project's own series; None for any other, and
        without reading the config when the root has no overlays/ at all."""
        from patchkit.series.files import OVERLAY_DIR

        if self.config_file is None or not (self.root / OVERLAY_DIR).is_dir():
            return None
        return self.root if self.owns(series_dir) else None

    # -- where patchkit keeps and writes things

    @property
    def state_dir(self) -> Path:
        """``<root>/.patchkit/``: the project's own state (the series a ``split --replace`` replaced;
        the operation log and locks). Not created until ``ensure_state_dir``."""
        return self.root / STATE_DIR

    def ensure_state_dir(self) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        return self.state_dir

    @property
    def cache_root(self) -> Path:
        from patchkit.cache import cache_root

        return cache_root()

    reports_dir = REPORTS_DIR
    edit_dir = EDIT_DIR

    # -- the pin and the base

    def pin(self, series_dir: Path | None = None) -> Pin | None:
        """The pin that speaks for ``series_dir`` (None: the project's own work, e.g. a split): a pin
        named on the command line, else --config's [target], else — for a series that is not the
        project's own — its split.json pin, else the project's [target]. None when none does."""
        key = ("pin", None if series_dir is None else str(series_dir.resolve()))
        return self._once(key, lambda: self._pin(series_dir))

    def _pin(self, series_dir: Path | None) -> Pin | None:
        if self.pin_option is not None:
            return self.pin_option.pin()
        if self.config_option is not None:
            return self._target()
        if series_dir is not None and not self.owns(series_dir):
            return series_pin(series_dir)
        return self.config.target if self.config_file is not None else None

    def require_pin(self, series_dir: Path | None = None) -> Pin:
        """``pin(series_dir)``, or a UserError saying how to name one."""
        pin = self.pin(series_dir)
        if pin is None:
            raise UserError(self._missing("pin", series_dir))
        return pin

    def _target(self) -> Pin:
        if self.config.target is None:
            raise UserError(f"no [target] table in {self.config_file} (patchkit pin vllm==X writes one)",
                            str(self.config_file))  # fmt: skip
        return self.config.target

    def base(self, series_dir: Path | None = None) -> tuple[BaseTree, Pin]:
        """The base tree and its pin: --base DIR (recorded with its tree hash, the same in every
        command), else the prepared tree of ``pin(series_dir)``. Cached for the invocation."""
        key = ("base", None if series_dir is None else str(series_dir.resolve()))
        return self._once(key, lambda: self._base(series_dir))

    def _base(self, series_dir: Path | None) -> tuple[BaseTree, Pin]:
        if self.base_dir is not None:
            return base_from_dir(self.base_dir)
        pin = self.pin(series_dir)
        if pin is None:
            raise UserError(self._missing("base", series_dir))
        from patchkit.base.pin import prepare_base
        from patchkit.base.tree import BaseTree

        return BaseTree(prepare_base(pin)), pin

    def _missing(self, what: str, series_dir: Path | None) -> str:
        if series_dir is not None and self.config_file is not None and not self.owns(series_dir):
            why = "the series is not this project's own [series].dir, and its split.json names no usable base"
        elif self.config_file is None:
            why = "none found from here up" + (", and the series' split.json names no usable base"
                                               if series_dir is not None else "")  # fmt: skip
        else:
            why = f"no [target] in {self.config_file}; `patchkit pin vllm==X` writes one"
        how = (
            "--base DIR or --config patchkit.toml"
            if what == "base"
            else "--config patchkit.toml (or vllm==X)"
        )
        return f"no {what}: pass {how} ({why})"

    def tree(self, base: Path | None, pin: str | None, option: str) -> tuple[BaseTree, Pin]:
        """Another base named on the command line (rebase's --to/--from): a directory, else a pin in
        any form; the same record as the project's own base."""
        if base is not None and pin is not None:
            raise UserError(f"give {option} or {option}-base, not both")
        if base is not None:
            return base_from_dir(base)
        from patchkit.base.pin import prepare_base
        from patchkit.base.tree import BaseTree

        resolved = parse_pin(pin, option).pin()
        return BaseTree(prepare_base(resolved)), resolved


def find_config(start: Path) -> Path | None:
    """The nearest ``patchkit.toml`` in ``start`` or one of its parents (only looked for)."""
    here = start.resolve()
    for directory in (here, *here.parents):
        if (directory / CONFIG_NAME).is_file():
            return directory / CONFIG_NAME
    return None


def base_from_dir(directory: Path) -> tuple[BaseTree, Pin]:
    """``--base DIR``: the tree used in place, recorded as a path pin with its tree hash."""
    from patchkit.base.tree import BaseTree
    from patchkit.base.treehash import cached_tree_hash
    from patchkit.values import Pin

    tree = BaseTree(directory)
    return tree, Pin(source="path", path=str(tree.root), tree_hash=cached_tree_hash(tree.root))


def series_pin(series_dir: Path) -> Pin | None:
    """The base a series was split or rebased against (its split.json), when it can be prepared."""
    from patchkit.series.files import load_split_json

    series = load_split_json(series_dir)
    if series is None:
        return None
    pin = series.base
    if pin.source == "path" and not (pin.path and Path(pin.path).is_dir()):
        return None
    return pin
