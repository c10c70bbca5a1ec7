"""The lead paragraph: what a maintainer's digest says first about a patch and about the series.

Built from the guide's findings after the gates ran (a ruff F821 and the ``imports`` gate add
findings here), deterministically: the same record gives the same words. Priority in three levels
with a reading time, the two or three decisions to judge, the reading order (contract → consumers →
tests), who should read it (CODEOWNERS reviewers and labels when the record has them, else the
area), upgrade advice ("if you run with X, check Y") and follow-ups. Messages only; report/ has the
words.
"""

from __future__ import annotations

import json
import re
from typing import Any

from patchkit.guide.model import AuditedPatch
from patchkit.guide.priority import LEVELS, reading_minutes, reading_priority
from patchkit.values import message

SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
# which findings are the decisions worth a reviewer's judgement, most important first
DECISION_KINDS = (
    "import-missing",
    "undefined-name",
    "call-passes-unknown-arg",
    "op-schema-unwrapped",
    "off-unless-request-flag",
    "client-value-replaces-server",
    "forced-setting",
    "field-constraint-changed",
    "public-symbol-removed",
    "kernel-changed",
    "near-whole-file-rewrite",
    "exception-type-changed",
    "assert-weakened",
    "env-set-at-runtime",
    "cache-call-removed",
    "hard-coded-cpu-ids",
    "default-changed",
    "dependency-pin-changed",
    "signature-changed",
    "hot-path-touched",
    "broad-except-swallows",
    "ci-changed",
    "new-env-var",
    "hard-coded-path",
)
UPGRADE_KINDS = (
    "forced-setting",
    "off-unless-request-flag",
    "new-env-var",
    "default-changed",
    "env-set-at-runtime",
    "field-constraint-changed",
    "cli-flag-added",
    "dependency-pin-changed",
    "exception-type-changed",
)
MAX_DECISIONS = 3
MAX_UPGRADE = 4
MAX_FOLLOW = 2
MAX_FILES = 3
MAX_LINES = 3  # CODEOWNERS lines named in "who should read it"
_UNDEFINED = re.compile(r"`([^`]+)`")


def _params(finding: dict) -> dict:
    msg = finding.get("message") or {}
    params = dict(msg.get("params", {})) if isinstance(msg, dict) else {}
    return {"file": finding.get("file") or "-", "line": finding.get("line", 0), **params}


def gate_findings(audit: AuditedPatch) -> list[dict]:
    """Findings the gates add: ruff's F821 (a NameError when the line runs) and the imports gate."""
    out = []
    for gate in audit.gates:
        if gate.gate == "ruff":
            for f in gate.details.get("findings", []):
                if isinstance(f, dict) and f.get("code") == "F821":
                    name = _UNDEFINED.search(f.get("message", "")) or re.search(
                        r"(\S+)$", f.get("message", "x")
                    )
                    params = {"name": name.group(1) if name else "?"}
                    out.append(
                        _finding(
                            "undefined-name",
                            "high",
                            f["file"],
                            f.get("line", 0),
                            params,
                            [f.get("message", "")],
                        )
                    )
        elif gate.gate == "tests" and isinstance(gate.details.get("tests"), dict):
            for test_id in gate.details["tests"].get("removed", [])[:20]:  # passed on the base, gone now
                if isinstance(test_id, str):
                    where = test_id.split("::", 1)[0].replace(".", "/") + ".py"
                    out.append(_finding("test-removed", "medium", where, 0, {"test": test_id}, [test_id]))
            for test_id in gate.details["tests"].get("flaky", [])[:20]:  # failed, then passed run again
                if isinstance(test_id, str):
                    where = test_id.split("::", 1)[0].replace(".", "/") + ".py"
                    out.append(_finding("test-flaky", "medium", where, 0, {"test": test_id}, [test_id]))
        elif gate.gate == "imports" and gate.status in ("passed", "failed"):
            for f in gate.details.get("missing", gate.details.get("findings", [])):
                if isinstance(f, dict) and f.get("name"):
                    params = {"name": f["name"], "module": f.get("module", "-")}
                    out.append(
                        _finding("import-missing", "high", f.get("file", ""), f.get("line", 0), params, [])
                    )
    return out


def _finding(kind: str, severity: str, file: str, line: int, params: dict, evidence: list[str]) -> dict:
    return {
        "kind": kind,
        "severity": severity,
        "file": file,
        "line": line,
        "message": message(f"finding.{kind}", **params),
        "evidence": evidence,
    }


def finish(audit: AuditedPatch) -> dict:
    """The patch's guide with the gates' findings, its priority and its lead paragraph."""
    guide = dict(audit.guide)
    findings = list(guide.get("findings", []))
    extra = gate_findings(audit)
    if any(f["kind"] == "import-missing" for f in extra):  # the imports gate's word wins over our check
        findings = [f for f in findings if f["kind"] != "import-missing"]
    findings += [
        f
        for f in extra
        if (f["kind"], f["file"], f["line"]) not in {(g["kind"], g["file"], g["line"]) for g in findings}
    ]
    guide["findings"] = findings
    guide["priority"] = reading_priority(findings, audit.files)
    if extra:
        guide["follow_ups"] = list(guide.get("follow_ups", [])) + [
            message(f"follow.{f['kind']}", **_params(f)) for f in extra
        ]
    guide["lead"] = patch_lead(guide, audit)
    return guide


def _ranked(findings: list[dict]) -> list[dict]:
    rank = {k: i for i, k in enumerate(DECISION_KINDS)}
    chosen = [f for f in findings if f["kind"] in rank]
    return sorted(
        chosen, key=lambda f: (SEVERITY_RANK.get(f["severity"], 9), rank[f["kind"]], f["file"], f["line"])
    )


def _decisions(findings: list[dict], where: str | None = None) -> list[dict]:
    out, seen = [], set()
    for f in _ranked(findings):
        if f["kind"] in seen:
            continue
        seen.add(f["kind"])
        params = _params(f) | ({"patch": where} if where else {})
        out.append(message(f"decision.{f['kind']}", **params))
        if len(out) == MAX_DECISIONS:
            break
    return out


def _shown(paths: list[str]) -> list[str]:
    return paths[:MAX_FILES] + ([f"+{len(paths) - MAX_FILES}"] if len(paths) > MAX_FILES else [])


def _order(order: list[dict]) -> dict | None:
    steps = []
    for role in ("contract", "consumer", "test"):
        paths = [o["path"] for o in order if o.get("role") == role]
        if paths:
            steps.append(message(f"lead.order.{role}", files=_shown(paths)))
    return message("lead.order", steps=steps) if len(steps) > 1 else None


def readers(audit: AuditedPatch | list[AuditedPatch]) -> dict:
    """CODEOWNERS reviewers and labels from the record when it has them; else the area."""
    audits = audit if isinstance(audit, list) else [audit]
    people = list(dict.fromkeys(r for a in audits for r in getattr(a, "reviewers", None) or []))
    labels = list(dict.fromkeys(label for a in audits for label in getattr(a, "labels", None) or []))
    areas = list(dict.fromkeys(a.domain for a in audits))
    decided = sorted((o for a in audits for o in getattr(a, "owner_lines", None) or []),
                     key=lambda o: (-o.get("files", 0), o.get("line", 0)))  # fmt: skip
    numbers = list(dict.fromkeys((o["line"], o["pattern"]) for o in decided if "line" in o))
    lines = [message("lead.readers.line", line=n, pattern=p) for n, p in numbers[:MAX_LINES]]
    more = {"lines": lines} if lines else {}
    if people and labels:
        key = "lead.readers.owners-labels" + (".lines" if lines else "")
        return message(key, people=people[:4], labels=labels[:4], **more)
    if people:
        return message("lead.readers.owners" + (".lines" if lines else ""), people=people[:4], **more)
    if labels:
        return message("lead.readers.labels", labels=labels[:4])
    return message("lead.readers.area", areas=areas[:4])


# kinds whose sentences are said once for a run of findings in one file ("if you set any of X, Y, Z
# yourself ..."), not once a finding; a run ends where the next finding is more than GROUP_SPAN lines on
# kind -> the param that names the thing, and the message that names it with its value
GROUPED = {"forced-setting": ("setting", "lead.setting-value", "value"),
           "new-env-var": ("name", "lead.env-default", "default")}  # fmt: skip
GROUPED_KINDS = tuple(GROUPED)
GROUP_SPAN = 20


def grouped(findings: list[dict]) -> list[list[dict]]:
    """``findings`` in runs: one run per kind of GROUPED_KINDS, file and line range; others alone."""
    runs: list[list[dict]] = []
    for f in findings:
        last = runs[-1][-1] if runs else None
        if (f["kind"] in GROUPED_KINDS and last is not None and last["kind"] == f["kind"]
                and last["file"] == f["file"] and 0 <= f["line"] - last["line"] <= GROUP_SPAN):  # fmt: skip
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


def _run_message(prefix: str, run: list[dict]) -> dict:
    """One sentence for a run: the finding's own when it is alone, else the kind's ``.many`` one."""
    if len(run) == 1:
        return message(f"{prefix}.{run[0]['kind']}", **_params(run[0]))
    what, key, value = GROUPED[run[0]["kind"]]
    pairs = list(
        dict.fromkeys((str(_params(f).get(what, "?")), _frozen(_params(f).get(value, "?"))) for f in run)
    )
    if len(pairs) == 1:  # one setting forced to one value, several times: one finding's sentence
        return message(f"{prefix}.{run[0]['kind']}", **_params(run[0]))
    settings = [message("lead.setting", setting=name) for name in dict.fromkeys(name for name, _ in pairs)]
    values = [message(key, setting=name, value=_thawed(shown)) for name, shown in pairs]
    return message(f"{prefix}.{run[0]['kind']}.many", settings=settings, values=values, file=run[0]["file"],
                   first=run[0]["line"], last=run[-1]["line"], count=len(pairs))  # fmt: skip


def _frozen(value):
    """A param value as a dict key (a message is a dict)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else value


def _thawed(value):
    return json.loads(value) if isinstance(value, str) and value.startswith("{") else value


def _upgrade(findings: list[dict]) -> dict:
    rank = {k: i for i, k in enumerate(UPGRADE_KINDS)}
    items, seen = [], set()
    no_default = message("env.no-default")
    ordered = sorted(
        (
            f
            for f in findings
            if f["kind"] in rank
            and not (f["kind"] == "new-env-var" and (_params(f).get("default") or {}) == no_default)
        ),
        key=lambda f: (rank[f["kind"]], f["file"], f["line"]),
    )  # a variable with no default changes nothing for whoever does not export it
    for run in grouped(ordered):
        f = run[0]
        key = (f["kind"], str(_params(f).get("name", _params(f).get("setting", ""))))
        if len(run) > 1:
            items.append(_run_message("upgrade", run))
            seen.update((g["kind"], str(_params(g).get("name", _params(g).get("setting", "")))) for g in run)
        elif key not in seen:
            seen.add(key)
            items.append(message(f"upgrade.{f['kind']}", **_params(f)))
    if not items:
        return message("lead.upgrade.none")
    more = len(items) - MAX_UPGRADE
    shown = items[:MAX_UPGRADE] + ([message("lead.more", count=more)] if more > 0 else [])
    return message("lead.upgrade", items=shown)


def _follow(findings: list[dict]) -> dict | None:
    items, seen = [], set()
    ordered = _ranked(findings) + [f for f in findings if f["kind"] not in DECISION_KINDS]
    runs = {id(f): run for run in grouped(sorted(ordered, key=lambda f: (f["kind"], f["file"], f["line"])))
            if len(run) > 1 for f in run}  # fmt: skip
    for f in ordered:
        if (run := runs.get(id(f))) is not None:
            if id(run[0]) not in seen:
                seen.add(id(run[0]))
                items.append(_run_message("follow", run))
            continue
        params = _params(f)
        key = (f["kind"], str(params.get("name", f["file"])))
        if key not in seen:
            seen.add(key)
            items.append(
                message(f"follow.{f['kind']}", **{**params, "name": params.get("name", f["file"] or "-")})
            )
    return message("lead.follow", follow=items[:MAX_FOLLOW]) if items else None


def patch_lead(guide: dict, audit: AuditedPatch) -> dict:
    findings, priority = guide.get("findings", []), guide["priority"]
    parts: list[Any] = [message(f"lead.priority.{priority['level']}", minutes=priority["minutes"])]
    decisions = _decisions(findings)
    if decisions and priority["level"] != "skip":
        parts.append(message("lead.decisions", items=decisions))
    elif priority["level"] == "skip":
        parts.append(message("lead.nothing"))
    if (order := _order(guide.get("order", []))) is not None:
        parts.append(order)
    parts.append(readers(audit))
    parts.append(_upgrade(findings))
    if (follow := _follow(findings)) is not None and priority["level"] != "skip":
        parts.append(follow)
    return message("lead.paragraph", sentences=parts)


def series_lead(audits: list[AuditedPatch]) -> dict:
    """The whole series in the same shape: how much of it deserves a close read and how long it takes,
    the decisions across it, the order to read it in (needs first), readers, upgrade advice."""
    if not audits:
        return {}
    levels = {
        level: [a.patch for a in audits if (a.guide.get("priority") or {}).get("level") == level]
        for level in LEVELS
    }
    minutes = reading_minutes([f for a in audits for f in a.files], 0) + sum(
        1 for a in audits for f in a.guide.get("findings", []) if f.get("severity") == "high"
    )
    parts: list[Any] = [
        message(
            "lead.series.priority",
            count=len(audits),
            minutes=minutes,
            close=len(levels["close-read"]),
            skim=len(levels["skim"]),
            skip=len(levels["skip"]),
        )
    ]
    tagged = [dict(f, patch=a.patch) for a in audits for f in a.guide.get("findings", [])]
    decisions, seen = [], set()
    for f in _ranked(tagged):
        if f["kind"] not in seen:
            seen.add(f["kind"])
            decisions.append(message("lead.series.decision", patch=f["patch"], decision=_decisions([f])[0]))
        if len(decisions) == MAX_DECISIONS:
            break
    if decisions:
        parts.append(message("lead.decisions", items=decisions))
    first = [a.patch for a in audits if any(d for d in a.depends_on)]
    needed = list(dict.fromkeys(d for a in audits for d in a.depends_on))
    if needed:
        parts.append(message("lead.series.order", first=needed[:3], later=first[:3]))
    if levels["close-read"]:
        parts.append(message("lead.series.close", patches=_shown(levels["close-read"])))
    parts.append(readers(audits))
    parts.append(_upgrade([f for a in audits for f in a.guide.get("findings", [])]))
    return message("lead.paragraph", sentences=parts)
