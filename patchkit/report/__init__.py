"""Reports rendered only from an ``AuditResult``: HTML, Markdown (PR comment), JUnit, terminal."""

from __future__ import annotations

from pathlib import Path

from patchkit.atomic import write_atomic
from patchkit.audit.model import AuditResult


def render_all(
    result: AuditResult,
    html: Path | None = None,
    md: Path | None = None,
    junit: Path | None = None,
    lang: str = "en",
) -> None:
    """Write every report asked for; each file whole or not at all (temp file + rename; UTF-8)."""
    if html is not None:
        from patchkit.report.html import render_html

        write_atomic(html, render_html(result, lang))
    if md is not None:
        from patchkit.report.markdown import render_markdown

        write_atomic(md, render_markdown(result, lang))
    if junit is not None:
        from patchkit.report.junit import render_junit

        write_atomic(junit, render_junit(result, lang))
