"""The engine's messages become words here, and only here.

The audit engine records catalogue messages (``GateResult.message``, ``PatchAudit.reason_messages``,
dco rows' ``reason_message``, the guide's ``{"key", "params"}`` data). ``fill_words`` writes the
English strings the JSON record keeps beside them (``summary``, ``reasons``, ``reason``) and turns the
guide's messages into ``{"en": ..., "zh": ...}``; the renderers then read the record in any language.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from patchkit.audit.model import GUIDE_UNFINISHED, AuditResult, GateResult, PatchAudit
from patchkit.audit.verdict import NO_EVIDENCE
from patchkit.report.i18n import LANGS, catalogue, localise, message_text, t


def fill_words(result: AuditResult) -> AuditResult:
    for audit in result.patches:
        fill_patch(audit)
    result.guide = in_all_languages(result.guide)
    return result


def fill_patch(audit: PatchAudit) -> PatchAudit:
    for gate in audit.gates:
        fill_gate(gate)
    if audit.reason_messages:
        audit.reasons = [message_text(m) for m in audit.reason_messages]
    unfinished = audit.guide.get(GUIDE_UNFINISHED)  # a test shard's: the merge finishes it, as messages
    audit.guide = in_all_languages({k: v for k, v in audit.guide.items() if k != GUIDE_UNFINISHED})
    if unfinished is not None:
        audit.guide[GUIDE_UNFINISHED] = unfinished
    for target in audit.targets:  # patchkit runtime: the facts behind each target's status
        target.reason = in_all_languages(target.reason)
        target.signature_problems = in_all_languages(target.signature_problems)
        if isinstance(target.real.get("differences"), list):
            target.real["differences"] = in_all_languages(target.real["differences"])
    if isinstance(audit.guide.get("follow_ups"), list):  # several findings can ask the same thing
        unique: dict[str, Any] = {}
        for item in audit.guide["follow_ups"]:
            unique.setdefault(item.get("en", "") if isinstance(item, dict) else str(item), item)
        audit.guide["follow_ups"] = list(unique.values())
    return audit


def fill_gate(gate: GateResult) -> GateResult:
    if gate.message is not None:
        gate.summary = message_text(gate.message)
    for row in gate.details.get("commits", []) if gate.gate == "dco" else []:
        if isinstance(row, dict) and isinstance(row.get("reason_message"), Mapping):
            row["reason"] = message_text(row["reason_message"])
    return gate


def fill_decided(result: AuditResult) -> AuditResult:
    """The English words of what ``audit.verdict.decide_record`` changed in a loaded record (a
    demoted gate, reasons decided again); a message this catalogue cannot render keeps the
    recorded English, as the renderers do."""
    for audit in result.patches:
        for gate in audit.gates:
            if gate.message is not None and gate.message.key == NO_EVIDENCE:
                gate.summary = localise(gate.message, "en", gate.summary)
        if len(audit.reasons) != len(audit.reason_messages):
            summaries = {g.gate: g.summary for g in audit.gates}
            audit.reasons = [
                localise(m, "en", f"{m.params.get('gate', '')}: {summaries.get(m.params.get('gate'), '')}")
                for m in audit.reason_messages
            ]
    return result


def witness_lines(gate: GateResult, lang: str) -> list[str]:
    """Each witness of ``gate`` as one line in ``lang``: tool and version, its own outcome, the
    command, what it counted. The tool's own words (outcome, command) stay as recorded."""
    colon = t("punct.colon", lang)
    lines = []
    for evidence in gate.evidence:
        tool = f"{evidence.tool} {evidence.version}".strip()
        parts = [tool, f"{t('ui.witness.outcome', lang)}{colon}{evidence.outcome}"]
        if evidence.command:
            parts.append(f"{t('ui.witness.command', lang)}{colon}{' '.join(evidence.command)}")
        if evidence.counts:
            counted = [f"{_count_word(key, lang)} {value}" for key, value in evidence.counts.items()]
            parts.append(f"{t('ui.witness.counts', lang)}{colon}{t('list.sep', lang).join(counted)}")
        lines.append(" · ".join(parts))
    return lines


def _count_word(key: str, lang: str) -> str:
    """A count's label; a key this catalogue lacks (a newer record) is shown as recorded."""
    try:
        return t(f"evidence.count.{key}", lang)
    except KeyError:
        return key


def gate_summary(gate: GateResult) -> str:
    """A gate's English summary, whether or not the record was filled yet."""
    return message_text(gate.message) if gate.message is not None else gate.summary


def in_all_languages(value: Any) -> Any:
    """Every ``{"key", "params"}`` message inside ``value`` as ``{"en": ..., "zh": ...}``."""
    if _is_message(value):
        return {lang: message_text(value, lang) for lang in LANGS}
    if isinstance(value, list):
        return [in_all_languages(v) for v in value]
    if isinstance(value, dict):
        return {k: in_all_languages(v) for k, v in value.items()}
    if hasattr(value, "to_dict") and hasattr(value, "message"):  # a Finding before serialisation
        value.message = in_all_languages(value.message)
    return value


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) == {"key", "params"}
        and isinstance(value["key"], str)
        and isinstance(value["params"], Mapping)
    )


def pick(texts: Any, lang: str) -> str:
    """A filled ``{"en", "zh"}`` text in ``lang`` (else English); a message rendered; a string as is."""
    if _is_message(texts):
        return message_text(texts, lang)
    if isinstance(texts, Mapping):
        return str(texts.get(lang) or texts.get("en") or "")
    return str(texts or "")


def runtime_word(kind: str, value: str, lang: str) -> str:
    """A ``patchkit runtime`` status or witness in ``lang``; an unknown one as recorded."""
    key = f"ui.runtime.{kind}.{value}"
    return t(key, lang) if key in catalogue(lang if lang in LANGS else "en") else str(value)


def target_counts(result: AuditResult, lang: str) -> str:
    """``patchkit runtime``: how many targets have each status, in ``lang`` (from the record)."""
    counts = result.environment.get("counts")
    if not isinstance(counts, Mapping):
        counts = Counter(target.status for pa in result.patches for target in pa.targets)
    parts = [f"{runtime_word('status', str(k), lang)} {v}" for k, v in sorted(counts.items())]
    return t("list.sep", lang).join(parts)
