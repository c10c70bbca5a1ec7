"""``patchkit.toml``: the project's target pin, series location and audit settings.

Unknown keys and wrong types are a UserError naming the file, the line and the key. Relative
paths are resolved against the directory holding the toml file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.choices import GATE_NAMES, SELECTIONS
from patchkit.errors import UserError
from patchkit.values import Pin

SERIES_DIR = "patches"  # [series] dir when the config does not name one (or there is no config)
KNOWN_GATES = ("apply", "ruff", "dco", "tests")  # what runs when [audit] gates is not set


@dataclass
class SeriesConfig:
    dir: Path
    rules: Path | None = None
    replays: list[Path] = field(default_factory=list)


@dataclass
class AuditConfig:
    gates: list[str] = field(default_factory=lambda: list(KNOWN_GATES))
    optional: list[str] = field(default_factory=list)  # gates whose could-not-run does not make "incomplete"
    jobs: int = 2
    test_timeout: float = 300
    per_test_timeout: float = 60
    python: str | None = None  # interpreter path (resolved) or a bare name looked up on PATH
    prepare_env: bool = False  # build (once, cached) a venv with the base's test deps when no python is named
    test_workers: int | None = None  # pytest-xdist workers per pytest run; None: the host's cores / jobs
    torch: str | None = None  # the test venv's torch requirement, over what the base's files name
    select: str = "upstream"  # the tests gate: upstream CI's selection, or "affected" (audit/affectedrun)


@dataclass
class ProjectConfig:
    root: Path  # the directory relative paths are resolved against
    file: Path | None  # None when no patchkit.toml was found (all defaults)
    target: Pin | None
    series: SeriesConfig
    audit: AuditConfig = field(default_factory=AuditConfig)


# key -> kind; kinds: str, path, paths, int, seconds, strs, url
_SCHEMA: dict[str, dict[str, str]] = {
    "target": {
        "name": "str",
        "source": "str",
        "version": "str",
        "sha256": "str",
        "url": "url",
        "rev": "str",
        "path": "path",
    },
    "series": {"dir": "path", "rules": "path", "replays": "paths"},
    "audit": {
        "gates": "gates",
        "optional": "optional-gates",
        "jobs": "int",
        "test_timeout": "seconds",
        "per_test_timeout": "seconds",
        "python": "python",
        "prepare_env": "bool",
        "test_workers": "int",
        "torch": "str",
        "select": "select",
    },
}


def default_config(root: Path) -> ProjectConfig:
    """What a project without a patchkit.toml has: its series in ``root/patches``, no pin."""
    return ProjectConfig(root=root, file=None, target=None, series=SeriesConfig(root / SERIES_DIR))


def load_pin(path: Path) -> Pin:
    """The ``[target]`` pin of a toml file (a patchkit.toml or a pin file of the same form)."""
    target = load_config(path).target
    if target is None:
        raise UserError(f"no [target] table in {path}", where=str(path))
    return target


def load_config(path: Path) -> ProjectConfig:
    import tomllib  # apply and status only look for the file: they do not pay for the parser

    path = path.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", where=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        where = f"{path}:{line.group(1)}" if line else str(path)
        raise UserError(f"invalid TOML: {exc}", where=where) from None
    except ValueError as exc:  # an integer too long to convert
        raise UserError(f"invalid TOML: {exc}", where=str(path)) from None
    except RecursionError:
        raise UserError("invalid TOML: arrays or tables nested too deeply", where=str(path)) from None
    tables = _Tables(path, text)
    values = {name: tables.read(name, data.pop(name, {})) for name in _SCHEMA}
    if data:
        unknown = next(iter(data))
        raise tables.error(None, unknown, f"unknown table or key '{unknown}'")
    root = path.parent
    series = values["series"]
    return ProjectConfig(
        root=root,
        file=path,
        target=_target(tables, values["target"]) if values["target"] else None,
        series=SeriesConfig(
            dir=series.get("dir", root / SERIES_DIR),
            rules=series.get("rules"),
            replays=series.get("replays", []),
        ),
        audit=AuditConfig(**values["audit"]),
    )


def _target(tables: _Tables, values: dict[str, Any]) -> Pin:
    from patchkit.base.pin import pin_problem  # loads the download code: only when a pin is read

    target = Pin(**{k: str(v) for k, v in values.items()})
    if problem := pin_problem(target):
        key, reason = problem
        raise tables.error("target", key, reason)
    return target


class _Tables:
    """Type-checks the known tables and finds the line of a key for error messages."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, table: str | None, key: str) -> int | None:
        current: str | None = None
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if header := re.fullmatch(r"\[\s*([^\[\]]+?)\s*\]\s*(#.*)?", stripped):
                current = header.group(1)
                if table is None and current.split(".")[0] == key:
                    return number
            elif current == table and re.match(rf"""["']?{re.escape(key)}["']?\s*=""", stripped):
                return number
        return None

    def error(self, table: str | None, key: str, message: str) -> UserError:
        """An error at the key's line, else at its table's header (a missing key)."""
        line = self.line_of(table, key) or (self.line_of(None, table) if table else None)
        where = f"{self.path}:{line}" if line else str(self.path)
        name = f"{table}.{key}" if table else key
        return UserError(f"{name}: {message}" if table else message, where=where)

    def read(self, table: str, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.error(None, table, f"'{table}' must be a table")
        out = {}
        for key, value in raw.items():
            kind = _SCHEMA[table].get(key)
            if kind is None:
                known = ", ".join(_SCHEMA[table])
                raise self.error(table, key, f"unknown key (known: {known})")
            try:
                out[key] = self._convert(kind, value)
            except (TypeError, ValueError, RuntimeError) as exc:  # RuntimeError: '~nosuchuser/...'
                raise self.error(table, key, str(exc)) from None
        return out

    def _convert(self, kind: str, value: Any) -> Any:
        base = self.path.parent
        if kind in ("str", "url", "path", "python"):
            if not isinstance(value, str) or not value:
                raise TypeError(f"expected a non-empty string, got {_describe(value)}")
            if kind == "path":
                return (base / Path(value).expanduser()).resolve()
            if kind == "python" and "/" in value:
                return str((base / Path(value).expanduser()).resolve())
            if kind == "url" and _is_relative_path(value):
                return str((base / value).resolve())
            return value
        if kind == "paths":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"expected a list of paths, got {_describe(value)}")
            return [(base / Path(v).expanduser()).resolve() for v in value]
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError(f"expected true or false, got {_describe(value)}")
            return value
        if kind in ("gates", "optional-gates"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"expected a list of strings, got {_describe(value)}")
            if unknown := [v for v in value if v not in GATE_NAMES]:
                raise ValueError(f"unknown gate {unknown[0]!r} (known: {', '.join(GATE_NAMES)})")
            if kind == "gates" and not value:
                raise ValueError(f"no gate to run: name at least one of {', '.join(GATE_NAMES)}")
            return value
        if kind == "select":
            if value not in SELECTIONS:
                raise ValueError(f"{value!r} is not one of {', '.join(SELECTIONS)}")
            return value
        if isinstance(value, bool) or not isinstance(value, int if kind == "int" else int | float):
            expected = "an integer" if kind == "int" else "a number of seconds"
            raise TypeError(f"expected {expected}, got {_describe(value)}")
        if not 0 < value < math.inf:  # also refuses nan
            raise ValueError(f"must be positive and finite, got {value}")
        return value


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _is_relative_path(url: str) -> bool:
    """A git url that is a relative local path (not scheme://, not user@host:path, not /abs)."""
    return not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*://|[^/]*:", url) and not url.startswith(("/", "~"))
