"""JUnit XML: one <testsuite> per patch, one <testcase> per gate (Jenkins / ant junit schema).

failed → <failure>; a requested gate that could not run → <error> (the audit is incomplete); one the
project marks optional, and skipped → <skipped message=...> with the reason; never a pass.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from patchkit.audit.model import AuditResult, GateResult
from patchkit.report.i18n import reason_texts, summary_text, t
from patchkit.report.words import witness_lines


def render_junit(result: AuditResult, lang: str = "en") -> str:
    root = ET.Element("testsuites")
    optional = set(result.environment.get("optional_gates") or ())
    for index, patch in enumerate(result.patches):
        failures = sum(g.status == "failed" for g in patch.gates)
        errors = sum(g.status == "could-not-run" and g.gate not in optional for g in patch.gates)
        skipped = sum(g.status == "skipped" for g in patch.gates) + sum(
            g.status == "could-not-run" and g.gate in optional for g in patch.gates
        )
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": patch.patch,
                "id": str(index),
                "package": f"patchkit.{patch.domain}",
                "tests": str(len(patch.gates)),
                "failures": str(failures),
                "errors": str(errors),
                "skipped": str(skipped),
                "time": _seconds(sum(g.duration for g in patch.gates)),
                "timestamp": result.created[:19] if result.created else "1970-01-01T00:00:00",
                "hostname": str(result.environment.get("hostname", "localhost")),
            },
        )
        ET.SubElement(suite, "properties")
        for gate in patch.gates:
            case = ET.SubElement(
                suite,
                "testcase",
                {"name": gate.gate, "classname": f"{patch.patch}", "time": _seconds(gate.duration)},
            )
            _outcome(case, gate, lang, accepted=gate.gate in optional)
            lines = witness_lines(gate, lang) or [t("ui.witness.none", lang)]
            ET.SubElement(case, "system-out").text = "\n".join(f"{t('ui.witness', lang)}: {w}" for w in lines)
        reasons = "; ".join(reason_texts(patch, lang))
        ET.SubElement(suite, "system-out").text = f"verdict: {patch.verdict}; {reasons}"
        ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _outcome(case: ET.Element, gate: GateResult, lang: str, accepted: bool) -> None:
    detail = json.dumps(gate.details, indent=1, ensure_ascii=False, default=str) if gate.details else ""
    summary = summary_text(gate, lang)  # English unless --lang asks otherwise: CI logs grep it
    if gate.status == "failed":
        ET.SubElement(case, "failure", {"message": summary, "type": f"{gate.gate}-failed"}).text = detail
    elif gate.status == "could-not-run" and not accepted:  # requested, did not run: the audit is incomplete
        reason = str(gate.details.get("reason") or summary)
        ET.SubElement(case, "error", {"message": t("ui.junit.could_not_run", lang, reason=reason),
                                      "type": f"{gate.gate}-could-not-run"})  # fmt: skip
    elif gate.status in ("could-not-run", "skipped"):
        reason = str(gate.details.get("reason") or summary)
        key = "ui.junit.could_not_run" if gate.status == "could-not-run" else "ui.junit.skipped"
        ET.SubElement(case, "skipped", {"message": t(key, lang, reason=reason)})


def _seconds(value: float) -> str:
    return f"{value:.3f}"
