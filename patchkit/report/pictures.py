"""Inline SVG pictures for the HTML report: the series as a graph and the label view as a grid.

Plain SVG markup (no script, nothing from the network), every text escaped, a ``viewBox`` so it
scales to a phone's width and prints as vectors. Colours come from CSS classes (``report.css``).

- ``series_graph``: one node per patch in series order (top to bottom), shifted right by how deep
  its "needs first" chain is; area by changed lines; colour by verdict; an arrow from each patch to
  the one that needs it.
- ``label_grid``: labels (the record's labels, else the domain) × patches, a filled cell where the
  patch carries the label.
"""

from __future__ import annotations

import math
from html import escape

from patchkit.audit.model import AuditResult, PatchAudit

ROW = 44
LEFT = 24
STEP = 34
R_MIN, R_MAX = 7.0, 18.0
WIDTH = 420
CELL = 22


def _lines(pa: PatchAudit) -> int:
    return sum(f.get("added", 0) + f.get("removed", 0) for f in pa.files)


def _depths(patches: list[PatchAudit]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for pa in patches:  # series order: whatever a patch needs comes before it
        depth[pa.patch] = 1 + max((depth.get(d, -1) for d in pa.depends_on), default=-1)
    return depth


def _radius(lines: int, most: int) -> float:
    return R_MIN + (R_MAX - R_MIN) * math.sqrt(lines / most) if most else R_MIN


def series_graph(result: AuditResult, title: str, verdict_words: dict[str, str]) -> str:
    patches = result.patches
    if not patches:
        return ""
    depth, most = _depths(patches), max(_lines(p) for p in patches)
    step = min(STEP, 180 / max(1, max(depth.values())))  # deep chains stay inside the picture
    place = {p.patch: (LEFT + R_MAX + step * depth[p.patch], 28 + ROW * i) for i, p in enumerate(patches)}
    height = 28 + ROW * len(patches)
    text_x = LEFT + 2 * R_MAX + step * max(depth.values()) + 10
    out = [
        f'<svg class="series-graph" viewBox="0 0 {WIDTH} {height}" role="img" aria-labelledby="graph-t" '
        f'xmlns="http://www.w3.org/2000/svg"><title id="graph-t">{escape(title)}</title>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="edge-head"/></marker></defs>',
    ]
    for pa in patches:
        x2, y2 = place[pa.patch]
        r2 = _radius(_lines(pa), most)
        for need in pa.depends_on:
            if need not in place:
                continue
            x1, y1 = place[need]
            r1 = _radius(_lines(next(p for p in patches if p.patch == need)), most)
            out.append(
                f'<path class="edge" marker-end="url(#arrow)" d="M{x1:.1f},{y1 + r1:.1f} '
                f"C{x1:.1f},{(y1 + y2) / 2:.1f} {x2 - r2:.1f},{(y1 + y2) / 2:.1f} "
                f'{x2 - r2 - 1:.1f},{y2:.1f}"/>'
            )
    for number, pa in enumerate(patches, 1):
        x, y = place[pa.patch]
        r = _radius(_lines(pa), most)
        label = f"{pa.patch} · {verdict_words.get(pa.verdict, pa.verdict)} · {_lines(pa)}"
        out.append(
            f'<a href="#p{number}"><g class="node v-{escape(pa.verdict)}"><title>{escape(label)}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"/>'
            f'<text class="num" x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{number}</text>'
            f'<text x="{text_x:.1f}" y="{y + 4:.1f}">'
            f"{escape(pa.patch.removesuffix('.patch'))} "
            f'<tspan class="muted">±{_lines(pa)}</tspan></text></g></a>'
        )
    out.append("</svg>")
    return "".join(out)


def _labels_of(pa: PatchAudit) -> list[str]:
    return list(getattr(pa, "labels", None) or []) or [pa.domain]


def label_grid(result: AuditResult, title: str) -> str:
    patches = result.patches
    labels = list(dict.fromkeys(label for pa in patches for label in _labels_of(pa)))
    if not patches or not labels:
        return ""
    left = 12 + 7 * min(28, max(len(label) for label in labels))
    width, height = left + CELL * len(patches) + 8, 26 + CELL * len(labels) + 4
    out = [
        f'<svg class="label-grid" viewBox="0 0 {width} {height}" role="img" aria-labelledby="grid-t" '
        f'xmlns="http://www.w3.org/2000/svg" style="max-width:{width * 1.6:.0f}px">'
        f'<title id="grid-t">{escape(title)}</title>'
    ]
    for column, pa in enumerate(patches):
        x = left + CELL * column + CELL / 2
        out.append(f'<a href="#p{column + 1}"><text class="num" x="{x:.1f}" y="16" text-anchor="middle">')
        out.append(f"<title>{escape(pa.patch)}</title>{column + 1}</text></a>")
    for row, label in enumerate(labels):
        y = 26 + CELL * row
        out.append(
            f'<text x="{left - 6}" y="{y + CELL / 2 + 4:.1f}" text-anchor="end">{escape(label[:28])}</text>'
        )
        for column, pa in enumerate(patches):
            on = label in _labels_of(pa)
            cls = f"cell on v-{escape(pa.verdict)}" if on else "cell"
            out.append(
                f'<rect class="{cls}" x="{left + CELL * column + 2}" y="{y + 2}" width="{CELL - 4}" '
                f'height="{CELL - 4}" rx="3"><title>{escape(label)} × {escape(pa.patch)}</title></rect>'
            )
    out.append("</svg>")
    return "".join(out)
