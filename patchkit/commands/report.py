"""``patchkit report``: load audit results (shards), merge them, render HTML / Markdown / JUnit."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.audit.model import AuditResult
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.report import render_all, validate
from patchkit.report.i18n import LANGS, default_lang
from patchkit.report.terminal import print_summary

VERDICT_RANK = {"ready": 0, "needs-work": 1, "blocked": 2}


def run(results: list[Path], html: Path | None, md: Path | None, junit: Path | None, lang: str | None) -> int:
    lang = lang or default_lang()
    if lang not in LANGS:
        raise UserError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    merged = merge([load(path) for path in results])
    render_all(merged, html=html, md=md, junit=junit, lang=lang)
    print_summary(merged, lang)
    failed = any(g.status == "failed" for p in merged.patches for g in p.gates)
    return EXIT_FAILED if failed else EXIT_OK


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
    return result


def merge(results: list[AuditResult]) -> AuditResult:
    """audit.merge_results when it exists; else a local merge (dedupe by patch name, worst verdict)."""
    if len(results) == 1:
        return results[0]
    try:
        from patchkit.audit.engine import merge_results
    except ImportError:
        return merge_locally(results)
    return merge_results(results)


def merge_locally(results: list[AuditResult]) -> AuditResult:
    first = results[0]
    seen: dict[str, int] = {}
    patches = []
    for result in results:
        for patch in result.patches:
            if patch.patch in seen:  # the same patch in two shards: keep the later record
                patches[seen[patch.patch]] = patch
            else:
                seen[patch.patch] = len(patches)
                patches.append(patch)
    verdicts = [p.verdict for p in patches] or [first.verdict]
    return AuditResult(
        series_dir=first.series_dir,
        base=first.base,
        patches=patches,
        verdict=max(verdicts, key=VERDICT_RANK.__getitem__),
        environment=first.environment,
        shard=None,
        created=max(r.created for r in results),
    )
