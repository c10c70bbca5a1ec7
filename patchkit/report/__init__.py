"""Reports rendered only from an ``AuditResult``: HTML, Markdown (PR comment), JUnit, terminal."""

from __future__ import annotations

from pathlib import Path

from patchkit.audit.model import AuditResult


def render_all(
    result: AuditResult,
    html: Path | None = None,
    md: Path | None = None,
    junit: Path | None = None,
    lang: str = "en",
) -> None:
    """Write every report asked for; files are written whole (UTF-8)."""
    if html is not None:
        from patchkit.report.html import render_html

        html.write_text(render_html(result, lang), encoding="utf-8")
    if md is not None:
        from patchkit.report.markdown import render_markdown

        md.write_text(render_markdown(result, lang), encoding="utf-8")
    if junit is not None:
        from patchkit.report.junit import render_junit

        junit.write_text(render_junit(result, lang), encoding="utf-8")
