"""Message catalogues (``i18n/en.json``, ``i18n/zh.json``): every UI string, finding, gate summary
and verdict reason.

``t(key, lang, **kw)`` formats with ``str.format``; a dict value in ``kw`` ({"en":..,"zh":..})
is picked for the language, so nested translated fragments compose.

Gates and verdicts record a ``Message`` (key + plain-data params) beside their English string;
``message_text`` renders one (a bug raises), ``localise`` renders one for a report and falls back to
the recorded English string when the record has no message or one this catalogue cannot render.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from patchkit.audit.model import GateResult, PatchAudit
from patchkit.values import Message

LANGS = ("en", "zh")
CATALOGUE_DIR = Path(__file__).with_name("i18n")


@cache
def catalogue(lang: str) -> dict[str, str]:
    return json.loads((CATALOGUE_DIR / f"{lang}.json").read_text("utf-8"))


def t(key: str, lang: str = "en", **kw: object) -> str:
    """The text for ``key`` in ``lang``; an unknown key is a bug and raises KeyError."""
    text = catalogue(lang if lang in LANGS else "en")[key]
    if not kw:
        return text
    picked = {k: (v.get(lang, v.get("en")) if isinstance(v, Mapping) else v) for k, v in kw.items()}
    return text.format(**picked)


def both(key: str, **kw: object) -> dict[str, str]:
    return {lang: t(key, lang, **kw) for lang in LANGS}


MAX_NESTING = 8  # messages and lists inside params: deeper is not a record patchkit wrote


def message_text(message: Message | Mapping[str, Any], lang: str = "en") -> str:
    """``message`` in ``lang``. A list param is joined with ``list.sep.<param>`` (else ``list.sep``);
    a param that is itself a message is rendered first. Unknown key or missing param: KeyError."""
    return _render(message, lang if lang in LANGS else "en", 0)


def localise(message: Message | Mapping[str, Any] | None, lang: str, english: str) -> str:
    """``message`` in ``lang`` for a report; ``english`` (the string recorded beside it) when there is
    no message, or its key or a param is unknown here: a report never shows a raw key or crashes."""
    if message is None:
        return english
    try:
        return message_text(message, lang)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        return english


def summary_text(gate: GateResult, lang: str) -> str:
    """A gate's summary in ``lang``."""
    return localise(gate.message, lang, gate.summary)


def reason_texts(audit: PatchAudit, lang: str) -> list[str]:
    """A patch's verdict reasons in ``lang``; the English ones when the record's messages do not
    pair up with them (a record from before messages, or a hand-edited one)."""
    if len(audit.reason_messages) != len(audit.reasons):
        return list(audit.reasons)
    return [localise(m, lang, english) for m, english in zip(audit.reason_messages, audit.reasons)]


def _render(message: Any, lang: str, depth: int) -> str:
    key, params = _parts(message)
    if key is None or depth > MAX_NESTING:
        raise ValueError(f"not a message: {message!r:.60}")
    values = {name: _param(name, value, lang, depth) for name, value in params.items()}
    return catalogue(lang)[key].format_map(values)


def _parts(message: Any) -> tuple[str | None, Mapping[str, Any]]:
    if isinstance(message, Message):
        return message.key, message.params
    if isinstance(message, Mapping) and isinstance(message.get("key"), str):
        params = message.get("params", {})
        if isinstance(params, Mapping):
            return message["key"], params
    return None, {}


def _param(name: str, value: Any, lang: str, depth: int) -> str:
    if depth > MAX_NESTING:
        raise ValueError(f"param {name}: nested too deeply")
    if isinstance(value, (Message, Mapping)):
        return _render(value, lang, depth + 1)
    if isinstance(value, list):
        table = catalogue(lang)
        sep = table.get(f"list.sep.{name}", table["list.sep"])
        return sep.join(_param(name, item, lang, depth + 1) for item in value)
    if isinstance(value, (str, int, float)):  # bool is an int; None is not data we write
        return str(value)
    raise TypeError(f"param {name}: {type(value).__name__}")


def default_lang(environ: Mapping[str, str] = os.environ) -> str:
    """zh when the locale says so (LC_ALL, LC_MESSAGES, LANG — first one set wins), else en."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"
