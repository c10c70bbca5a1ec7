"""``patchkit report``: load audit results (shards), merge them, render HTML / Markdown / JUnit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchkit.audit.engine import merge_results
from patchkit.audit.model import AuditResult
from patchkit.audit.verdict import decide_record, exit_code
from patchkit.errors import UserError
from patchkit.project import Project
from patchkit.report import render_all, validate
from patchkit.report.i18n import LANGS, default_lang
from patchkit.report.words import fill_decided, fill_words
from patchkit.ui.summary import print_audit


@dataclass
class Options:
    results: list[Path]
    html: Path | None = None
    md: Path | None = None
    junit: Path | None = None
    lang: str | None = None


def run(project: Project, options: Options) -> int:
    lang = options.lang or default_lang()
    if lang not in LANGS:
        raise UserError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    merged = merge([load(path) for path in options.results])
    fill_decided(merged)  # merged shards are decided again (merge_results); their reasons need words
    if not merged.since and len(options.results) == 1:  # the prior revision audit kept beside the record
        from patchkit.interdiff.previous import beside

        merged.since = beside(options.results[0], merged) or {}
    render_all(merged, html=options.html, md=options.md, junit=options.junit, lang=lang)
    print_audit(merged, lang, [str(p) for p in (options.html, options.md, options.junit) if p is not None])
    return exit_code(merged)


def load(path: Path) -> AuditResult:
    try:
        data = json.loads(path.read_text("utf-8"))
        result = AuditResult.from_dict(data)
    except OSError as exc:
        raise UserError(f"cannot read audit result: {exc.strerror}", str(path)) from exc
    except json.JSONDecodeError as exc:
        raise UserError(f"not JSON: {exc.msg}", f"{path}:{exc.lineno}") from exc
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"not a patchkit audit result: {exc}", str(path)) from exc
    except RecursionError:
        raise UserError("not a patchkit audit result: nested too deeply", str(path)) from None
    if found := validate.problems(result):
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise UserError(f"not a renderable audit result: {found[0]}{more}", str(path))
    decide_record(result)  # every reader (report, wheel --audit) sees the verdicts audit/verdict.py gives
    return fill_decided(result)


def merge(results: list[AuditResult]) -> AuditResult:
    """One record from the shards of one audit (same base; each patch once)."""
    if len(results) == 1:
        return results[0]
    merged = merge_results(results)
    return (
        fill_words(merged) if merged.environment.get("test_shards") else merged
    )  # tests gates decided again
