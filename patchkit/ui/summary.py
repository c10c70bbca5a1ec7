"""One terminal presentation of an audit record, printed alike by ``patchkit audit`` (after its run),
``patchkit report`` (a loaded or merged record) and ``patchkit runtime`` (a plugin's record).

Default: a title line (series, verdict, base), what changed since the last revision, one table
(a row per patch: verdict, a column per gate, its tests, the reading priority, since), the reasons
of every patch that is not ready, and one result line. ``-v`` adds each gate's summary and its
witnesses (the tools that ran, as the JSON records them). ``-q``: the result line only. Words
follow ``--lang``; colour and widths follow ``ui.console`` (not a terminal: nothing is cut).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from patchkit.audit.model import AuditResult, PatchAudit
from patchkit.report.i18n import catalogue, reason_texts, summary_text, t
from patchkit.report.since import since_lead
from patchkit.report.tallies import gate_names, test_buckets
from patchkit.report.words import runtime_word, target_counts, witness_lines
from patchkit.ui.console import UNLIMITED, print_table, rich_console, verbosity

STYLE = {
    "passed": "green",
    "failed": "red",
    "could-not-run": "yellow",
    "skipped": "dim",
    "ready": "green",
    "incomplete": "magenta",
    "needs-work": "yellow",
    "blocked": "red",
    "changed": "bold yellow",
    "added": "bold yellow",
    "renamed": "bold yellow",
    "unchanged": "dim",
    "close-read": "red",
    "skim": "yellow",
    "skip": "dim",
}
BUCKET_STYLE = {
    "passed": "green",
    "failed": "red",
    "still-failing": "red",
    "could-not-run": "yellow",
    "flaky": "magenta",
}
SIGN = {"passed": "✓", "failed": "✗", "could-not-run": "!", "skipped": "–"}  # a narrow terminal's cells
SHORT_HASH = 12
# a count in a sentence ("4 touched modules"), not a line number, a version or a hash
COUNT = re.compile(r"(?<![\w/.:-])(\d{1,6})(?![\w/.:-])")


def print_audit(
    result: AuditResult,
    lang: str,
    written: Iterable[str] = (),
    seconds: float | None = None,
    console=None,
) -> None:
    """The record on stdout (``console``: another rich console, e.g. a test's)."""
    console = console or rich_console()
    written = list(written)
    if verbosity() < 0:  # -q: the result only
        console.print(result_line(result, lang, written, None, quiet=True), markup=False)
        return
    for line in head_lines(result, lang):
        console.print(line, markup=False)
    console.print()
    table = patch_table(result, lang)
    wide = console.measure(table, options=console.options.update_width(UNLIMITED)).maximum
    if console.is_terminal and wide > console.width:  # a terminal too narrow: a card per patch
        console.print(legend(lang), markup=False)
        for card in patch_cards(result, lang):
            console.print(card)
    else:
        print_table(console, table)
    console.print()
    if result.environment.get("kind") == "runtime":
        for audit in result.patches:
            for line in target_lines(audit, lang):
                console.print(line, markup=False)
    for line in reason_lines(result, lang):  # what a table cell cannot say: why
        console.print(line, markup=False)
    if verbosity() > 0:
        for audit in result.patches:
            for line in gate_lines(audit, lang):
                console.print(line, markup=False)
    console.print(result_line(result, lang, written, seconds, quiet=False), markup=False)


def reason_lines(result: AuditResult, lang: str) -> list[str]:
    """Why each patch is not ready; one reason several patches share (the same words but for their
    numbers, e.g. "imports could not run here" on every patch) is one line naming them all, with
    the numbers that differ between them left out ("…")."""
    groups: dict[str, list[tuple[str, str]]] = {}
    first: dict[str, int] = {}  # failures before what could not run
    for audit in result.patches:
        if audit.verdict == "ready":
            continue
        keys = (
            [m.key for m in audit.reason_messages] if len(audit.reason_messages) == len(audit.reasons) else []
        )
        for index, reason in enumerate(reason_texts(audit, lang)):
            shape = COUNT.sub("#", reason)
            groups.setdefault(shape, []).append((audit.patch, reason))
            failed = index < len(keys) and keys[index] in ("reason.failed", "reason.skipped-after-failure")
            first.setdefault(shape, 0 if failed or not keys else 1)
    colon, sep = t("punct.colon", lang), t("list.sep", lang)
    lines = []
    for _shape, members in sorted(groups.items(), key=lambda item: first[item[0]]):
        names = list(dict.fromkeys(name for name, _ in members))
        texts = [COUNT.split(text) for _, text in members]
        merged = "".join(parts[0] if len(set(parts)) == 1 else "…" for parts in zip(*texts))
        who = (
            names[0]
            if len(names) == 1
            else sep.join(names) + t("ui.terminal.patch_count", lang, count=len(names))
        )
        lines.append(f"{who}{colon}{merged}")
    return lines


def head_lines(result: AuditResult, lang: str) -> list[str]:
    runtime = result.environment.get("kind") == "runtime"
    colon = t("punct.colon", lang)
    title = t("ui.runtime.title" if runtime else "ui.title", lang)
    shard = f" ({t('ui.shard', lang)} {result.shard})" if result.shard else ""
    verdict = t(f"ui.verdict.{result.verdict}", lang)
    lines = [
        f"{title}{colon}{result.series_dir}{shard} — {verdict}",
        f"{t('ui.base', lang)}{colon}{base_text(result)}",
    ]
    if runtime:
        lines.append(t("ui.runtime.counts", lang, counts=target_counts(result, lang)))
    if since := since_lead(result, lang):
        lines.append(since)
    return lines


def base_text(result: AuditResult) -> str:
    """The base pin in a few words, hashes short."""
    pin = result.base
    parts = [" ".join(p for p in (pin.name, pin.version) if p) or "-"]
    if pin.rev:
        parts.append(pin.rev[:SHORT_HASH] if _is_hex(pin.rev) else pin.rev)
    if pin.path:
        parts.append(pin.path)
    if pin.sha256:
        parts.append(f"sha256 {pin.sha256[:SHORT_HASH]}")
    return " · ".join(parts) + f" ({pin.source})"


def _is_hex(text: str) -> bool:
    return len(text) >= 20 and all(c in "0123456789abcdef" for c in text.lower())


def legend(lang: str) -> str:
    """What the signs of a compact table mean."""
    return "  ".join(f"{sign} {t(f'ui.status.{status}', lang)}" for status, sign in SIGN.items())


def patch_table(result: AuditResult, lang: str):
    """One row per patch: verdict, a column per gate, tests, reading priority, since."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    runtime = result.environment.get("kind") == "runtime"
    gates = gate_names(result)
    tests = any(test_buckets(p) for p in result.patches)
    since = bool(result.since)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("#", justify="right")
    table.add_column(t("ui.runtime.module" if runtime else "ui.patch", lang), overflow="fold")
    if runtime:
        table.add_column(t("ui.runtime.targets", lang), justify="right")
    table.add_column(t("ui.verdict", lang))
    for gate in gates:
        table.add_column(gate)
    if tests:
        table.add_column(t("ui.tests", lang))
    if not runtime:
        table.add_column(t("ui.priority", lang))
    if since:
        table.add_column(t("ui.since", lang))
    for number, audit in enumerate(result.patches, 1):
        status = {g.gate: g.status for g in audit.gates}
        row = [str(number), Text(audit.patch)]
        if runtime:
            row.append(str(len(audit.targets)))
        row.append(Text(t(f"ui.verdict.{audit.verdict}", lang), style=STYLE.get(audit.verdict, "")))
        for gate in gates:
            word = t(f"ui.status.{status[gate]}", lang) if gate in status else "-"
            row.append(Text(word, style=STYLE.get(status.get(gate, ""), "")))
        if tests:
            row.append(tests_cell(audit, lang))
        if not runtime:
            row.append(priority_cell(audit, lang))
        if since:
            row.append(since_cell(result, audit, lang))
        table.add_row(*row)
    return table


def patch_cards(result: AuditResult, lang: str) -> list:
    """The table for a narrow terminal: per patch its name, verdict and what changed since the last
    revision on one line, each gate's sign, its tests and its reading priority on the next."""
    from rich.text import Text

    runtime = result.environment.get("kind") == "runtime"
    cards = []
    for number, audit in enumerate(result.patches, 1):
        head = Text(f"{number:>2} ")
        head.append(audit.patch, style="bold")
        head.append("  ")
        head.append(t(f"ui.verdict.{audit.verdict}", lang), style=STYLE.get(audit.verdict, ""))
        if result.since:
            head.append("  ")
            head.append_text(since_cell(result, audit, lang))
        line = Text("   ")
        for gate in audit.gates:
            line.append(f"{gate.gate} ")
            line.append(SIGN.get(gate.status, "?"), style=STYLE.get(gate.status, ""))
            line.append("  ")
        if test_buckets(audit):
            line.append_text(tests_cell(audit, lang))
            line.append("  ")
        if runtime:
            line.append(t("ui.runtime.target_count", lang, count=len(audit.targets)))
        else:
            line.append_text(priority_cell(audit, lang))
        cards += [head, line]
    return cards


def tests_cell(audit: PatchAudit, lang: str):
    from rich.text import Text

    buckets = test_buckets(audit)
    if not buckets:
        return Text("-")
    cell = Text()
    for index, (bucket, count) in enumerate(buckets.items()):
        if index:
            cell.append(t("list.sep", lang))
        cell.append(t(f"ui.tests.bucket.{bucket}", lang, count=count), style=BUCKET_STYLE.get(bucket, ""))
    return cell


def priority_cell(audit: PatchAudit, lang: str):
    from rich.text import Text

    priority = (audit.guide or {}).get("priority") or {}
    level = priority.get("level")
    if f"ui.priority.{level}" not in catalogue(lang):
        return Text("-")
    text = t(f"ui.priority.{level}", lang)
    if isinstance(priority.get("minutes"), int):
        text += " · " + t("ui.minutes", lang, count=priority["minutes"])
    return Text(text, style=STYLE.get(level, ""))


def since_status(result: AuditResult, name: str) -> str:
    entry = (result.since or {}).get("patches", {}).get(name) or {}
    return str(entry.get("status") or "")


def since_cell(result: AuditResult, audit: PatchAudit, lang: str):
    from rich.text import Text

    status = since_status(result, audit.patch)
    if f"since.status.{status}" not in catalogue(lang):
        return Text("-")
    return Text(t(f"since.status.{status}", lang), style=STYLE.get(status, ""))


def target_lines(audit: PatchAudit, lang: str) -> list[str]:
    """``patchkit runtime``: each target, its status and where the original is."""
    colon = t("punct.colon", lang)
    out = []
    for target in audit.targets:
        where = f" ({target.defined_in})" if target.defined_in else ""
        line = target.lines[0] if target.lines else 0
        status = runtime_word("status", target.status, lang)
        out.append(f"{audit.patch}:{line}{colon}{status}{colon}{target.target}{where}")
    return out


def gate_lines(audit: PatchAudit, lang: str) -> list[str]:
    """``-v``: each gate's summary and the witnesses behind its status."""
    colon = t("punct.colon", lang)
    out = [audit.patch]
    for gate in audit.gates:
        cached = f" ({t('ui.cached', lang)})" if gate.cached else ""
        status = t(f"ui.status.{gate.status}", lang)
        out.append(f"  {gate.gate}{colon}{status}{cached} — {summary_text(gate, lang)}")
        for line in witness_lines(gate, lang) or [t("ui.witness.none", lang)]:
            out.append(f"    {t('ui.witness', lang)}{colon}{line}")
    return out


def result_line(
    result: AuditResult, lang: str, written: list[str], seconds: float | None, quiet: bool
) -> str:
    """The last line: the verdict, the counts, the reports written, the time; ``-q`` prints it alone,
    with the verdict and the reports only (in English the verdict as the JSON spells it)."""
    verdict = t(f"ui.verdict.{result.verdict}", lang) if lang != "en" else result.verdict
    parts = [t("ui.terminal.verdict", lang, verdict=verdict)]
    if written:
        parts.append(t("ui.terminal.reports", lang, reports=t("list.sep", lang).join(written)))
    if not quiet:
        counts = Counter(p.verdict for p in result.patches)
        order = ("ready", "incomplete", "needs-work", "blocked")
        said = t("list.sep", lang).join(
            f"{counts[v]} {t(f'ui.verdict.{v}', lang)}" for v in order if counts[v]
        )
        parts.append(t("ui.terminal.patches", lang, counts=said) if said else "")
        if cached := sum(g.cached for p in result.patches for g in p.gates):
            parts.append(t("ui.terminal.cached", lang, count=cached))
        if seconds is not None:
            parts.append(f"{seconds:.1f} s")
    return t("list.sep.items", lang).join(p for p in parts if p)


def print_stages(records: list, lang: str = "en") -> None:
    """Where a (partly) cold run spent its time, on stderr; stages that ran in parallel overlap."""
    from rich.table import Table

    from patchkit.timing import totals

    table = Table(title=t("ui.stages.title", lang))
    for key, justify in (("stage", "left"), ("detail", "left"), ("start", "right"), ("seconds", "right")):
        table.add_column(t(f"ui.stages.{key}", lang), justify=justify)
    for s in records:
        if s.name != "tests.materialise":
            table.add_row(s.name, s.detail, f"{s.start:.1f}", f"{s.seconds:.1f}")
    for name, count, seconds in totals(records):
        if count > 1:
            table.add_row(f"{name} ({t('ui.stages.all', lang)})", t("ui.stages.runs", lang, count=count), "",
                          f"{seconds:.1f}")  # fmt: skip
    rich_console(stderr=True).print(table)
