"""Message catalogues (``i18n/en.json``, ``i18n/zh.json``): every UI string and finding text.

``t(key, lang, **kw)`` formats with ``str.format``; a dict value in ``kw`` ({"en":..,"zh":..})
is picked for the language, so nested translated fragments compose.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

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


def default_lang(environ: Mapping[str, str] = os.environ) -> str:
    """zh when the locale says so (LC_ALL, LC_MESSAGES, LANG — first one set wins), else en."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"
