"""The words for ``audit --since``: the series lead's line and each patch's (what changed since the
last audited revision, which gates changed)."""

from __future__ import annotations

from patchkit.audit.model import AuditResult
from patchkit.report.i18n import t


def since_lead(result: AuditResult, lang: str) -> str:
    since = result.since or {}
    if not since:
        return ""
    counts = since.get("counts", {})
    parts = [t(f"since.status.{k}", lang) + f" {v}" for k, v in counts.items() if v]
    gates = sum(len(p.get("gates", [])) for p in since.get("patches", {}).values())
    return t(
        "ui.since.lead",
        lang,
        created=since.get("created") or since.get("record", ""),
        what=t("list.sep", lang).join(parts) or "-",
        gates=gates,
    )


def since_patch(result: AuditResult, name: str, lang: str) -> str:
    entry = (result.since or {}).get("patches", {}).get(name)
    if not entry:
        return ""
    text = t(f"since.status.{entry['status']}", lang)
    if entry["status"] == "renamed" and entry.get("old"):
        text += f" ({entry['old']})"
    if entry.get("gates"):
        moved = t("list.sep", lang).join(f"{g} {a or '-'} → {b}" for g, a, b in entry["gates"])
        text += t("punct.colon", lang) + t("ui.since.gates", lang, gates=moved)
    return t("ui.since.patch", lang, what=text)
