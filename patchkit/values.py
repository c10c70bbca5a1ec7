"""Value types every stage shares, and the JSON round-trip of every record.

Each stage owns its own types (``diff/model.py``, ``split/model.py``, ``series/model.py``,
``audit/model.py``); what they all share lives here. Schema changes bump ``SCHEMA_VERSION``
(documented in docs/schema.md).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 1


class JsonMixin:
    """Dataclass <-> plain dict conversion, recursing into nested dataclasses and lists."""

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):  # noqa: ANN206 - returns cls
        return _from_plain(cls, data)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _to_plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], str):
            return list(value)  # hunk lines: the bulk of any record
        return [_to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    cls = type(value)
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        return {name: _to_plain(getattr(value, name)) for name in names}
    return value


def _from_plain(tp: Any, value: Any) -> Any:
    """``value`` as ``tp``; a value of the wrong JSON type is a ValueError naming both."""
    origin = typing.get_origin(tp)
    if value is None:
        if tp is Any or (origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)):
            return None
        raise ValueError(f"expected {_type_name(tp)}, got null")
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _from_plain(args[0], value) if len(args) == 1 else value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ValueError(f"expected one of {list(typing.get_args(tp))}, got {value!r:.60}")
        return value
    if origin is list:
        _expect(value, list, tp)
        (item_tp,) = typing.get_args(tp)
        return [_from_plain(item_tp, v) for v in value]
    if origin is dict:
        _expect(value, dict, tp)
        _, val_tp = typing.get_args(tp)
        return {k: _from_plain(val_tp, v) for k, v in value.items()}
    if tp in (str, bool):
        _expect(value, tp, tp)
    elif tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, int if tp is int else (int, float)):
            raise ValueError(f"expected {_type_name(tp)}, got {type(value).__name__} {value!r:.60}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: _from_plain(hints[k], v) for k, v in value.items() if k in known}
        return tp(**kwargs)
    return value


def _expect(value: Any, kind: type, tp: Any) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"expected {_type_name(tp)}, got {type(value).__name__} {value!r:.60}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


@dataclass
class Message(JsonMixin):
    """A report sentence as a catalogue key and its params (patchkit/report/i18n/*.json).

    Params are plain data (counts, names, lists); a param that is itself ``{"key", "params"}`` is a
    nested message. The English string beside it stays the fallback of every renderer."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Pin(JsonMixin):
    name: str = "vllm"
    source: str = "path"  # index | git | path
    version: str | None = None
    sha256: str | None = None
    url: str | None = None
    rev: str | None = None
    path: str | None = None
    tree_hash: str | None = None  # content hash of the prepared tree


def message(key: str, **params: Any) -> dict[str, Any]:
    """A catalogue message as plain data (``{"key", "params"}``); ``report/`` turns it into words."""
    return {"key": key, "params": params}
