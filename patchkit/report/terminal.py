"""A rich table of the audit for the terminal (``patchkit audit`` / ``patchkit report``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from patchkit.audit.model import AuditResult
from patchkit.report.i18n import reason_texts, t
from patchkit.report.since import since_lead, since_patch

STYLE = {
    "passed": "green",
    "failed": "red",
    "could-not-run": "yellow",
    "skipped": "dim",
    "ready": "green",
    "incomplete": "magenta",
    "needs-work": "yellow",
    "blocked": "red",
}


def print_summary(result: AuditResult, lang: str, console: Console | None = None) -> None:
    console = console or Console(highlight=False, soft_wrap=True)
    gates = list(dict.fromkeys(g.gate for p in result.patches for g in p.gates))
    verdict = t(f"ui.verdict.{result.verdict}", lang)
    table = Table(title=f"{t('ui.terminal.title', lang)}: {result.series_dir} — {verdict}")
    for column in (
        "#",
        t("ui.patch", lang),
        t("ui.verdict", lang),
        *gates,
        t("ui.priority", lang),
        t("ui.terminal.findings", lang),
    ):
        table.add_column(column)
    for number, p in enumerate(result.patches, 1):
        status = {g.gate: g.status for g in p.gates}
        cells = [
            Text(t(f"ui.status.{status[g]}", lang), style=STYLE[status[g]]) if g in status else Text("-")
            for g in gates
        ]
        level = (p.guide.get("priority") or {}).get("level")
        findings = p.guide.get("findings", [])
        high = sum(f["severity"] == "high" for f in findings)
        table.add_row(
            str(number),
            Text(p.patch),
            Text(t(f"ui.verdict.{p.verdict}", lang), style=STYLE[p.verdict]),
            *cells,
            t(f"ui.priority.{level}", lang) if level else "-",
            f"{len(findings)} ({high})",
        )
    console.print(table)
    for p in result.patches:  # what ran for each gate: the witness behind its status
        said = [f"{g.gate}: {short_witness(g, lang)}" for g in p.gates]
        console.print(f"{p.patch} {t('ui.witness', lang)}: {'; '.join(said)}", markup=False)
    for p in result.patches:
        if p.verdict != "ready":  # what a table cell cannot say: why
            for reason in reason_texts(p, lang):
                console.print(f"{p.patch}: {reason}", markup=False)
    if since_lead(result, lang):  # audit --since: what changed since the last audited revision
        console.print(since_lead(result, lang), markup=False)
        for p in result.patches:
            if since_patch(result, p.patch, lang):
                console.print(f"{p.patch}: {since_patch(result, p.patch, lang)}", markup=False)


def short_witness(gate, lang: str) -> str:
    """A gate's witnesses in a few words: tool, version and its own outcome."""
    said = [f"{e.tool} {e.version}".strip() + f" → {e.outcome}" for e in gate.evidence]
    return " + ".join(said) if said else t("ui.witness.none", lang)
