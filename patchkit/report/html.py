"""One self-contained HTML report (Jinja2, autoescape on) rendered only from an ``AuditResult``.

Diff line ids: ``p{P}-f{F}`` (file), ``p{P}-f{F}-h{H}`` (hunk header), ``p{P}-f{F}-l{N}`` (post-image
line N: context and added lines), ``p{P}-f{F}-o{N}`` (pre-image line N of a removed line).
"""

from __future__ import annotations

import bisect
import json
import keyword
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup

from patchkit.audit.model import AuditResult, PatchAudit
from patchkit.diff.filediff import parse_diff
from patchkit.errors import UserError
from patchkit.guide import PRE_IMAGE_KINDS
from patchkit.report.i18n import LANGS, catalogue, localise, reason_texts, summary_text, t
from patchkit.report.pictures import gate_bars, label_grid, series_graph, test_bars
from patchkit.report.since import since_lead, since_patch
from patchkit.report.tallies import BUCKETS, gate_names, test_buckets
from patchkit.report.words import pick, runtime_word, target_counts, witness_lines

_KEYWORDS = "|".join(keyword.kwlist)
_TOKEN = re.compile(rf"(#.*$|\"[^\"]*\"|'[^']*'|\b(?:{_KEYWORDS})\b)")
KNOWN_DETAIL_KEYS = {"findings", "whitespace", "commits", "tests", "reason", "rule"}
RECORD_ONLY_KEYS = {"file_tests"}  # for the next sharded run's plan (``patchkit ci durations``), not readers
APPLY_DETAIL_KEYS = {"alone", "alone_error", "in_series", "series_error", "needs", "needs_from", "files"}
NEEDS_FROM = {"computed": "ui.apply.from.computed", "split.json": "ui.apply.from.split.json"}


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("patchkit.report", "templates"),
        autoescape=True,  # every string from the input is escaped; no |safe on input anywhere
        undefined=jinja2.ChainableUndefined,  # gate details vary by gate: missing keys render empty
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["code_spans"] = code_spans
    return env


def code_spans(text: str) -> list[tuple[bool, str]]:
    """Message text split on backticks: (is_code, text) pairs; the template escapes both."""
    return [(i % 2 == 1, part) for i, part in enumerate(str(text).split("`")) if part]


def own_ruff_message(finding: object, lang: str) -> str:
    """A ruff-gate finding's message: patchkit's own whitespace checks in the report's language,
    ruff's rule messages as ruff wrote them (tool output is evidence, not translated)."""
    if not isinstance(finding, Mapping):
        return ""
    key = f"ruff.own.{finding.get('code')}"
    if key in catalogue(lang if lang in LANGS else "en"):
        return t(key, lang)
    message = finding.get("message")
    return message if isinstance(message, str) else ""


def render_html(result: AuditResult, lang: str) -> str:
    patches = [_patch_view(i + 1, pa, lang) for i, pa in enumerate(result.patches)]
    counts = Counter(pa.verdict for pa in result.patches)
    domains: dict[str, list[dict]] = {}
    labels: dict[str, list[dict]] = {}  # vLLM's labels: a patch may carry several
    for view in patches:
        domains.setdefault(view["audit"].domain, []).append(view)
        for label in view["audit"].labels:
            labels.setdefault(label, []).append(view)
    since = (result.since or {}).get("patches", {})
    buckets = {b: t(f"ui.tests.bucket.{b}", lang, count="").strip() for b in BUCKETS}
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            r=result,
            lang=lang,
            _=lambda key, **kw: t(key, lang, **kw),
            own_ruff_message=own_ruff_message,
            runtime_word=lambda kind, value: runtime_word(kind, value, lang),
            target_counts=target_counts(result, lang),
            pick=lambda texts: pick(texts, lang),
            patches=patches,
            domains=domains,
            labels=dict(sorted(labels.items())),
            counts=counts,
            base=_pin_text(result),
            base_short=_pin_short(result),
            show_tests=any(view["buckets"] for view in patches),
            environment=environment_rows(result.environment, t("list.sep", lang), t("ui.none", lang)),
            series_lead=_text((result.guide or {}).get("lead"), lang),
            since_lead=since_lead(result, lang),
            since_of=lambda name: since_patch(result, name, lang),
            graph=Markup(series_graph(result, t("ui.graph", lang), _verdict_words(lang))),
            grid=Markup(label_grid(result, t("ui.labels_grid", lang))),
            gates=gate_names(result),
            since_status={name: str(entry.get("status") or "") for name, entry in since.items()},
            bucket_words=buckets,
            test_bars=Markup(
                test_bars(result, t("ui.pictures.tests", lang), buckets, t("ui.pictures.tests.total", lang))
            ),
            gate_bars=Markup(
                gate_bars(
                    result,
                    t("ui.pictures.gates", lang),
                    lambda runs, cached: t("ui.pictures.gates.note", lang, runs=runs, cached=cached),
                )
            ),
        )
    )


def environment_rows(env: Any, sep: str, none: str, depth: int = 0) -> list[tuple[str, str, list]]:
    """The record's environment as (key, text, rows) for a definition list: a list is its items
    joined, a table is rows of its own (one level; deeper ones as ``a.b`` keys), never a Python repr."""
    if not isinstance(env, Mapping):
        return []
    rows = []
    for key, value in sorted(env.items(), key=lambda kv: str(kv[0])):
        if isinstance(value, Mapping) and depth == 0:
            rows.append((str(key), "", environment_rows(value, sep, none, 1) or [("-", none, [])]))
        elif isinstance(value, Mapping):
            rows += [(f"{key}.{k}", v, r) for k, v, r in environment_rows(value, sep, none, depth)]
        else:
            rows.append((str(key), _value_text(value, sep, none), []))
    return rows


def _value_text(value: Any, sep: str, none: str) -> str:
    if value is None or value == [] or value == "":
        return none
    if isinstance(value, bool):
        return "true" if value else "false"  # as the JSON record says it
    if isinstance(value, (list, tuple)):
        return sep.join(_value_text(v, sep, none) for v in value)
    if isinstance(value, Mapping):
        return sep.join(f"{k} {_value_text(v, sep, none)}" for k, v in value.items())
    return str(value)


def _verdict_words(lang: str) -> dict[str, str]:
    return {v: t(f"ui.verdict.{v}", lang) for v in ("ready", "incomplete", "needs-work", "blocked")}


def _text(words: Any, lang: str) -> str:
    """A filled ``{"en", "zh"}`` text in ``lang``; empty when the record has none."""
    return (words.get(lang) or words.get("en") or "") if isinstance(words, Mapping) else ""


def _pin_short(result: AuditResult) -> str:
    pin = result.base
    parts = [" ".join(p for p in (pin.name, pin.version) if p), (pin.rev or "")[:12], pin.path]
    return " · ".join(p for p in parts if p) + f" ({pin.source})"


def _pin_text(result: AuditResult) -> str:
    pin = result.base
    parts = [pin.name, pin.version, pin.rev, pin.path, f"sha256 {pin.sha256[:16]}" if pin.sha256 else None]
    if pin.tree_hash:
        parts.append(f"tree {pin.tree_hash[:16]}")
    return " · ".join(p for p in parts if p) + f" ({pin.source})"


def _patch_view(number: int, pa: PatchAudit, lang: str) -> dict[str, Any]:
    prefix = f"p{number}"
    guide = pa.guide or {}
    rank = reading_rank(guide.get("order", []))
    files = sorted(_diff_files(prefix, pa), key=lambda f: rank(f["path"]))
    findings = [dict(f, href=_anchor(prefix, files, f)) for f in guide.get("findings", [])]
    gates = [_gate_view(g, lang) for g in pa.gates]
    return {
        "id": prefix,
        "audit": pa,
        "title": pa.title.get(lang) or pa.title.get("en") or pa.domain,
        "files": files,
        "findings": findings,
        "priority": guide.get("priority"),
        "lead": _text(guide.get("lead"), lang),
        "order": guide.get("order", []),
        "follow_ups": guide.get("follow_ups", []),
        "reasons": reason_texts(pa, lang),
        "gates": gates,
        "gate_by": {view["gate"].gate: view for view in gates},
        "file_rows": sorted(pa.files, key=lambda f: rank(str(f.get("path", "")))),
        "buckets": test_buckets(pa),
        "focused": [_focused_row(test, lang) for test in pa.focused_tests],
    }


def reading_rank(order: Any):
    """A sort key: files in the guide's reading order (contract, consumers, tests), the others after
    them in the order they came."""
    listed = [o.get("path") for o in order if isinstance(o, Mapping)] if isinstance(order, list) else []
    place = {path: i for i, path in enumerate(listed)}
    return lambda path: place.get(path, len(place))


def _focused_row(test, lang: str) -> dict[str, Any]:
    """A focused test with its reason and where upstream CI runs it, in ``lang``."""
    kind, _, source = test.why.partition(" ")
    why = (
        t(f"ui.focused.why.{kind}", lang, source=source)
        if kind in ("changed", "mirrors", "named", "imports")
        else test.why
    )
    where = (
        t("ui.focused.runs-on", lang, device=test.accelerator)
        if test.accelerator
        else t("ui.focused.cpu", lang)
    )
    return {
        "path": test.path,
        "why": why,
        "steps": test.steps,
        "where": where,
        "accelerator": test.accelerator,
    }


def _gate_view(gate, lang: str) -> dict[str, Any]:
    details = gate.details or {}
    known = KNOWN_DETAIL_KEYS | RECORD_ONLY_KEYS | (APPLY_DETAIL_KEYS if gate.gate == "apply" else set())
    extra = {k: v for k, v in details.items() if k not in known}
    commits = details.get("commits") if isinstance(details.get("commits"), list) else []
    return {
        "gate": gate,
        "summary": summary_text(gate, lang),
        "witnesses": witness_lines(gate, lang),
        "findings": details.get("findings") if isinstance(details.get("findings"), list) else [],
        "whitespace": details.get("whitespace") if isinstance(details.get("whitespace"), list) else [],
        "commits": [_commit_row(c, lang) for c in commits],
        "tests": details.get("tests") if isinstance(details.get("tests"), list) else [],
        "reason": details.get("reason"),
        "apply": _apply_rows(details, lang) if gate.gate == "apply" else [],
        "rule": details.get("rule"),
        "extra": json.dumps(extra, indent=1, ensure_ascii=False, default=str) if extra else "",
    }


def _apply_rows(details: dict[str, Any], lang: str) -> list[tuple[str, str]]:
    """The apply gate's evidence as (label, value) rows in ``lang``; errors stay as recorded."""
    rows = []
    for side, error in (("alone", "alone_error"), ("in_series", "series_error")):
        outcome = details.get(side)
        if outcome in ("applies", "does not apply"):
            value = t("ui.apply.applies" if outcome == "applies" else "ui.apply.fails", lang)
            if details.get(error):
                value += t("ui.apply.error_sep", lang) + str(details[error])
            rows.append((t(f"ui.apply.{side}", lang), value))
    needs = details.get("needs")
    if isinstance(needs, list) and needs:
        listed = t("list.sep", lang).join(map(str, needs))
        how = NEEDS_FROM.get(str(details.get("needs_from")))
        value = t("ui.apply.needs", lang, needs=listed, how=t(how, lang)) if how else listed
        rows.append((t("ui.depends", lang), value))
    return rows


def _commit_row(row: Any, lang: str) -> Any:
    """A DCO row with its reason in ``lang`` (the recorded English one when it cannot be rendered)."""
    if not isinstance(row, dict) or not isinstance(row.get("reason_message"), dict):
        return row
    return dict(row, reason=localise(row["reason_message"], lang, str(row.get("reason") or "")))


def _diff_files(prefix: str, pa: PatchAudit) -> list[dict[str, Any]]:
    if not pa.diff.strip():
        return []
    try:
        parsed = parse_diff(pa.diff.split("\n"), pa.patch)
    except UserError:  # an unparsable diff is still shown, as plain lines
        lines = [
            {"id": f"{prefix}-f1-r{i}", "cls": "ctx", "old": "", "new": "", "tokens": [("", ln)]}
            for i, ln in enumerate(pa.diff.split("\n"), 1)
        ]
        return [{"id": f"{prefix}-f1", "path": pa.patch, "old_path": None, "lines": lines,
                 "new_ids": [], "old_ids": [], "added": 0, "removed": 0}]  # fmt: skip
    files = []
    for f_index, fp in enumerate(parsed, 1):
        fid = f"{prefix}-f{f_index}"
        is_py = fp.path.endswith(".py")
        lines, new_ids, old_ids = [], [], []
        for h_index, hunk in enumerate(fp.hunks, 1):
            lines.append(
                {
                    "id": f"{fid}-h{h_index}",
                    "cls": "hunk",
                    "old": "",
                    "new": "",
                    "tokens": [("", hunk.header())],
                }
            )
            old, new = hunk.old_start, hunk.new_start
            for raw in hunk.lines:
                op, text = raw[:1], raw[1:]
                if op == "-":
                    line = {"id": f"{fid}-o{old}", "cls": "del", "old": old, "new": "", "sign": "-"}
                    old_ids.append(old)
                    old += 1
                elif op == "+":
                    line = {"id": f"{fid}-l{new}", "cls": "add", "old": "", "new": new, "sign": "+"}
                    new_ids.append(new)
                    new += 1
                elif op == " ":
                    line = {"id": f"{fid}-l{new}", "cls": "ctx", "old": old, "new": new, "sign": " "}
                    new_ids.append(new)
                    old, new = old + 1, new + 1
                else:
                    line = {
                        "id": f"{fid}-n{new}-{len(lines)}",
                        "cls": "meta",
                        "old": "",
                        "new": "",
                        "sign": "",
                    }
                    text = raw
                line["tokens"] = _tokens(text) if is_py else [("", text)]
                lines.append(line)
        files.append(
            {
                "id": fid,
                "path": fp.path,
                "old_path": fp.old_path,
                "lines": lines,
                "new_ids": sorted(new_ids),
                "old_ids": sorted(old_ids),
                "added": fp.added,
                "removed": fp.removed,
            }
        )
    return files


def _tokens(text: str) -> list[tuple[str, str]]:
    """Light Python highlighting: keywords, strings and comments as (css class, text) pairs."""
    out = []
    for i, part in enumerate(_TOKEN.split(text)):
        if not part:
            continue
        if i % 2 == 0:
            out.append(("", part))
        else:
            out.append(("com" if part.startswith("#") else "str" if part[0] in "'\"" else "kw", part))
    return out


def _anchor(prefix: str, files: list[dict], finding: dict) -> str:
    """The diff line a finding points at: exact id, else the nearest line of that file and side."""
    path, line = finding.get("file", ""), int(finding.get("line") or 0)
    match = next((f for f in files if path and path in (f["path"], f["old_path"])), None)
    if match is None:
        return (
            f"#{prefix}-commits"
            if finding.get("kind") == "message-names-untouched-file"
            else f"#{prefix}-files"
        )
    side, ids = ("o", match["old_ids"]) if finding.get("kind") in PRE_IMAGE_KINDS else ("l", match["new_ids"])
    if line <= 0 or not ids:
        return f"#{match['id']}"
    at = bisect.bisect_left(ids, line)
    candidates = [ids[i] for i in (at - 1, at) if 0 <= i < len(ids)]
    nearest = min(candidates, key=lambda n: abs(n - line))
    return f"#{match['id']}-{side}{nearest}"
