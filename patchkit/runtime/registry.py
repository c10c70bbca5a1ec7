"""A plugin's own notes on its patches: the registry comment of a package ``__init__.py``.

vllm-ascend's shape (``vllm_ascend/patch/__init__.py``): a section per file,
``** N. File: platform/patch_x.py**`` (up to v0.11: ``** File: platform/patch_x.py**``, no
number), then numbered items, each naming its targets in backticks and
carrying ``Why:``, ``How:``, ``Related PR (...):`` and ``Future Plan:`` paragraphs (ASCII or
full-width colons). Sections are keyed by the file's path inside the plugin dir.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

FILE_HEADER = re.compile(r"\*\*\s*(?:([0-9A-Za-z.]*?[0-9A-Za-z])\.?\s*)?File:\s*([^*\s]+)\s*\*\*")
ITEM = re.compile(r"^\s{1,6}(\d+)\.\s+(.*)$")
FIELD = re.compile(r"^\s*(Why|How|Related PR[^:：]*|Future Plan)\s*[:：]\s*(.*)$", re.IGNORECASE)
FIELD_NAMES = {"why": "why", "how": "how", "related pr": "pr", "future plan": "plan"}
TICKED = re.compile(r"`([^`]+)`")


def read_registry(plugin_dir: Path) -> dict[str, dict[str, Any]]:
    """{path inside plugin_dir: {"number", "registry", "line", "items": [...]}} from every
    ``__init__.py`` under ``plugin_dir`` whose comments carry ``File:`` sections."""
    found: dict[str, dict[str, Any]] = {}
    for init in sorted(plugin_dir.rglob("__init__.py")):
        try:
            text = init.read_text("utf-8", errors="replace")
        except OSError:
            continue
        if "File:" not in text:
            continue
        prefix = init.parent.relative_to(plugin_dir).as_posix()
        for rel, entry in parse_registry(text).items():
            key = f"{prefix}/{rel}" if prefix != "." else rel
            entry["registry"] = init.relative_to(plugin_dir).as_posix()
            found.setdefault(key, entry)
    return found


def parse_registry(text: str) -> dict[str, dict[str, Any]]:
    sections: dict[str, dict[str, Any]] = {}
    entry: dict[str, Any] | None = None
    item: dict[str, Any] | None = None
    field_name: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.lstrip()
        if not stripped.startswith("#"):
            if stripped:  # code ends the comment block
                entry = item = field_name = None
            continue
        line = stripped.lstrip("#")
        line = line[1:] if line.startswith(" ") else line
        if header := FILE_HEADER.search(line):
            entry = sections.setdefault(
                header.group(2), {"number": header.group(1) or "", "line": number, "items": []}
            )
            item, field_name = None, None
            continue
        if entry is None or set(line.strip()) <= {"~", "-", "=", "*"} and line.strip():
            continue
        if (match := ITEM.match(line)) and (field_name is None or not line.startswith("      ")):
            item = {
                "number": match.group(1),
                "title": match.group(2).strip(),
                "targets": [],
                "why": "",
                "how": "",
                "pr": "",
                "plan": "",
            }
            item["targets"] = TICKED.findall(match.group(2))
            entry["items"].append(item)
            field_name = None
            continue
        if item is None:
            continue
        if match := FIELD.match(line):
            field_name = FIELD_NAMES[re.sub(r"\s*\(.*", "", match.group(1).lower()).strip()]
            item[field_name] = match.group(2).strip()
        elif field_name is None:
            item["targets"] += TICKED.findall(line)
            item["title"] = f"{item['title']} {line.strip()}".strip()
        elif line.strip():
            item[field_name] = f"{item[field_name]} {line.strip()}".strip()
    return sections


def items_for(entry: dict[str, Any] | None, target: str) -> list[dict[str, Any]]:
    """The registry items of a module that name ``target`` (by its full path or its last parts)."""
    if not entry:
        return []
    out = []
    for item in entry.get("items", []):
        if any(_same(target, named) for named in item.get("targets", [])):
            out.append(item)
    return out


def _same(target: str, named: str) -> bool:
    """The registry names a target by its full path or by its last dotted parts."""
    return target == named or target.endswith("." + named) or named.endswith("." + target)
