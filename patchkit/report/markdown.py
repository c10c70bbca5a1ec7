"""A GitHub PR-comment summary under ``LIMIT`` characters; what had to be cut is said explicitly."""

from __future__ import annotations

import re
from collections import Counter

from patchkit.audit.model import AuditResult, PatchAudit
from patchkit.report.i18n import reason_texts, summary_text, t
from patchkit.report.since import since_lead, since_patch
from patchkit.report.words import pick, runtime_word, target_counts, witness_lines

LIMIT = 60_000  # GitHub rejects comments over 65,536 characters; keep room for a wrapper
STATUS_ICON = {"passed": "✅", "failed": "❌", "could-not-run": "⚠️", "skipped": "⏭️"}
VERDICT_ICON = {"ready": "✅", "incomplete": "❔", "needs-work": "🟡", "blocked": "⛔"}


def render_markdown(result: AuditResult, lang: str, limit: int = LIMIT) -> str:
    """Full detail first; then drop evidence, then per-patch details from the end, until it fits."""
    text = _render(result, lang, evidence=True, detailed=len(result.patches))
    if len(text) <= limit:
        return text
    cut = [t("ui.md.cut.evidence", lang)]
    text = _render(result, lang, evidence=False, detailed=len(result.patches), cut=cut)
    detailed = len(result.patches)
    while len(text) > limit and detailed > 0:
        detailed -= 1
        dropped = cut + [_t("ui.md.cut.patches", lang, count=len(result.patches) - detailed)]
        text = _render(result, lang, evidence=False, detailed=detailed, cut=dropped)
    return text if len(text) <= limit else text[: limit - 20] + "\n\n…\n"


def _cell(value: object) -> str:
    """Text safe inside a Markdown table cell (no pipes, no line breaks, no HTML); the one escaping
    every field of the record goes through (idempotent: a value escaped twice reads the same)."""
    text = re.sub(r"(?<!\\)\|", r"\\|", str(value).replace("\r", " ").replace("\n", " "))
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _t(key: str, lang: str, **fields: object) -> str:
    """``t`` with every field of the record escaped (a catalogue's own text is ours)."""
    return t(key, lang, **{k: v if isinstance(v, (int, float)) else _cell(v) for k, v in fields.items()})


def _word(key: str, value: str, lang: str) -> str:
    return t(f"{key}.{value}", lang)


def _verdict(verdict: str, lang: str) -> str:
    return f"{VERDICT_ICON[verdict]} {t('ui.verdict.' + verdict, lang)}"


def _pick(texts: dict[str, str], lang: str) -> str:
    return _cell(texts.get(lang) or texts["en"])


def _render(
    result: AuditResult, lang: str, evidence: bool, detailed: int, cut: list[str] | None = None
) -> str:
    counts = Counter(p.verdict for p in result.patches)
    colon = t("punct.colon", lang)
    pin = result.base.version or result.base.rev or result.base.path or "-"
    runtime = result.environment.get("kind") == "runtime"
    out = [
        f"## {t('ui.runtime.title' if runtime else 'ui.title', lang)} — {_verdict(result.verdict, lang)}",
        "",
        t(
            "ui.counts",
            lang,
            ready=counts["ready"],
            incomplete=counts["incomplete"],
            needs=counts["needs-work"],
            blocked=counts["blocked"],
        ),
        "",
        f"{t('ui.base', lang)}{colon}`{_cell(pin)}`"
        + (f" · {t('ui.created', lang)}{colon}{_cell(result.created)}" if result.created else ""),
        "",
    ]
    if runtime:
        out += [_t("ui.runtime.counts", lang, counts=_cell(target_counts(result, lang))), ""]
    if cut:
        out += [f"> {_t('ui.md.cut', lang, what=t('list.sep', lang).join(cut))}", ""]
    if isinstance((result.guide or {}).get("lead"), dict):
        lead = _cell(_pick(result.guide["lead"], lang))
        out += [f"**{t('ui.series_lead', lang)}{t('punct.colon', lang).strip()}** {lead}", ""]
    if since_lead(result, lang):
        out += [f"> {_cell(since_lead(result, lang))}", ""]
    gates = list(dict.fromkeys(g.gate for p in result.patches for g in p.gates))
    out.append(
        "| # | "
        + t("ui.runtime.module" if runtime else "ui.patch", lang)
        + " | "
        + t("ui.verdict", lang)
        + " | "
        + " | ".join(_cell(g) for g in gates)
        + " | "
        + t("ui.priority", lang)
        + " |"
    )
    out.append("|---" * (len(gates) + 4) + "|")
    for number, p in enumerate(result.patches, 1):
        status = {g.gate: STATUS_ICON[g.status] for g in p.gates}
        level = (p.guide.get("priority") or {}).get("level")
        out.append(
            f"| {number} | `{_cell(p.patch)}` | {_verdict(p.verdict, lang)} | "
            + " | ".join(status.get(g, "–") for g in gates)
            + f" | {t('ui.priority.' + level, lang) if level else '–'} |"
        )
    out.append("")
    out += _label_view(result, lang)
    for number, p in enumerate(result.patches[:detailed], 1):
        out += _patch_section(number, p, lang, evidence, since_patch(result, p.patch, lang))
    return "\n".join(out) + "\n"


def _patch_section(number: int, p: PatchAudit, lang: str, evidence: bool, since: str = "") -> list[str]:
    title = p.title.get(lang) or p.title.get("en") or p.domain
    added = sum(f.get("added", 0) for f in p.files)
    removed = sum(f.get("removed", 0) for f in p.files)
    size = _t("ui.runtime.target_count", lang, count=len(p.targets)) if p.targets else f"+{added}/-{removed}"
    out = [
        "<details>",
        f"<summary>{number}. {_cell(p.patch)} — {_cell(title)} — {_word('ui.verdict', p.verdict, lang)}"
        f" ({size})</summary>",
        "",
    ]
    out += [f"- {_cell(reason)}" for reason in reason_texts(p, lang)]
    colon = t("punct.colon", lang)
    for g in p.gates:
        out.append(
            f"- {STATUS_ICON[g.status]} **{_cell(g.gate)}** {_word('ui.status', g.status, lang)}{colon}"
            f"{_cell(summary_text(g, lang))}" + (f" ({t('ui.cached', lang)})" if g.cached else "")
        )
        witnesses = [f"`{_cell(w).replace('`', chr(39))}`" for w in witness_lines(g, lang)]
        out += [f"  - {t('ui.witness', lang)}{colon}{w}" for w in witnesses or [t("ui.witness.none", lang)]]
    if p.depends_on:
        depends = t("list.sep", lang).join(_cell(d) for d in p.depends_on)
        out.append(f"- {t('ui.depends', lang)}{t('punct.colon', lang)}{depends}")
    out += _upstream_lines(p, lang)
    out += _target_lines(p, lang)
    if since:
        out.append(f"- {_cell(since)}")
    if isinstance(p.guide.get("lead"), dict):
        lead = _cell(_pick(p.guide["lead"], lang))
        out += ["", f"> **{t('ui.lead', lang)}{t('punct.colon', lang).strip()}** {lead}"]
    priority = p.guide.get("priority")
    if priority:
        out += [
            "",
            f"**{t('ui.priority', lang)}{t('punct.colon', lang).strip()}** {_pick(priority['reason'], lang)}",
        ]
    findings = p.guide.get("findings", [])
    if findings:
        out += ["", f"**{t('ui.findings', lang)}**", ""]
        for f in findings:
            line = f":{f['line']}" if f.get("line") else ""
            where = f"`{_cell(f['file'])}{line}` " if f.get("file") else ""
            out.append(f"- [{_word('ui.severity', f['severity'], lang)}] {where}{_pick(f['message'], lang)}")
            if evidence and f.get("evidence"):
                out.append(f"  <sub>{_cell(' ⏎ '.join(f['evidence'])[:300])}</sub>")
    follow = p.guide.get("follow_ups", [])
    if follow:
        out += ["", f"**{t('ui.follow_ups', lang)}**", ""]
        out += [f"- [ ] {_cell(item.get(lang) or item['en'])}" for item in follow]
    out += ["", "</details>", ""]
    return out


def _label_view(result: AuditResult, lang: str) -> list[str]:
    """Patches grouped by vLLM's own labels (a patch may carry several)."""
    labels: dict[str, list[str]] = {}
    for p in result.patches:
        for label in p.labels:
            labels.setdefault(label, []).append(f"`{_cell(p.patch)}`")
    if not labels:
        return []
    sep = t("list.sep", lang)
    out = [f"**{t('ui.labels.vllm', lang)}**", ""]
    out += [
        f"- `{_cell(label)}`{t('punct.colon', lang)}{sep.join(names)}"
        for label, names in sorted(labels.items())
    ]
    return out + [""]


def _target_lines(p: PatchAudit, lang: str) -> list[str]:
    """``patchkit runtime``: each target with its status and where the original is, and the plugin's note."""
    if not p.targets:
        return []
    heads = [t(f"ui.runtime.{key}", lang) for key in ("target", "status", "original", "witness")]
    out = ["", "| " + " | ".join(heads) + " |", "|---|---|---|---|"]
    for target in p.targets:
        line = f"{p.patch}:{target.lines[0]}" if target.lines else p.patch
        status = runtime_word("status", target.status, lang)
        original = _cell(target.defined_in or pick(target.reason, lang) or "–")
        witness = runtime_word("witness", target.witness, lang)
        out.append(f"| `{_cell(target.target)}` ({_cell(line)}) | {status} | `{original}` | {witness} |")
    for item in p.registry.get("items", []) if isinstance(p.registry, dict) else []:
        out.append("")
        out.append(f"> **{t('ui.runtime.registry', lang)}** {_cell(item.get('title', ''))}")
        for key in ("why", "how", "pr", "plan"):
            if item.get(key):
                out.append(f"> - {t('ui.runtime.' + key, lang)}{t('punct.colon', lang)}{_cell(item[key])}")
    return out


def _upstream_lines(p: PatchAudit, lang: str) -> list[str]:
    """Reviewers from CODEOWNERS and each focused test with the upstream CI step it comes from."""
    colon, sep = t("punct.colon", lang), t("list.sep", lang)
    out = []
    if p.reviewers:
        lines = [_t("ui.reviewers.line", lang, line=o["line"]) for o in p.owner_lines[:3] if "line" in o]
        shown = f" ({sep.join(lines)})" if lines else ""
        out.append(f"- {t('ui.reviewers', lang)}{colon}{sep.join(_cell(r) for r in p.reviewers[:12])}{shown}")
    for test in p.focused_tests:
        where = _t("ui.focused.runs-on", lang, device=test.accelerator) if test.accelerator else ""
        came = ""
        if test.steps:  # a record without steps is refused by report/validate; never an IndexError here
            step = test.steps[0]
            came = f" ← {_cell(step.label)} (`{_cell(step.file)}`, {_cell(step.device)})"
        tail = f" — {where}" if where else ""
        out.append(f"- {t('ui.focused', lang)}{colon}`{_cell(test.path)}`{came}{tail}")
    return out
