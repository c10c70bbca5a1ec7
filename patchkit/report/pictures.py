"""Inline SVG pictures for the HTML report: the series as a graph and the label view as a grid.

Plain SVG markup (no script, nothing from the network), every text escaped, a ``viewBox`` so it
scales to a phone's width and prints as vectors. Colours come from CSS classes (``report.css``).

- ``series_graph``: one node per patch in series order (top to bottom), shifted right by how deep
  its "needs first" chain is; area by changed lines; colour by verdict; an arrow from each patch to
  the one that needs it. An arrow between neighbours is one curve; one that skips patches runs in a
  lane of its own left of every node, so it never crosses a node it does not join.
- ``label_grid``: labels (the record's labels, else the domain) × patches, a filled cell where the
  patch carries the label.
- ``test_bars``: each patch's test outcomes as one bar split by bucket (``tallies.BUCKETS``).
- ``gate_bars``: the seconds each gate took over the patches, one bar per gate.
"""

from __future__ import annotations

import math
import unicodedata
from html import escape

from patchkit.audit.model import AuditResult, PatchAudit
from patchkit.report.tallies import BUCKETS, gate_seconds, test_buckets

ROW = 44
LEFT = 24  # room left of the nodes, grown by one LANE per arrow that skips patches
LANE = 9
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
    row = {p.patch: i for i, p in enumerate(patches)}
    edges = [(need, p.patch) for p in patches for need in p.depends_on if need in row]
    long = [e for e in edges if row[e[1]] - row[e[0]] > 1]  # each gets a lane of its own
    left = LEFT + LANE * len(long)
    step = min(STEP, 180 / max(1, max(depth.values())))  # deep chains stay inside the picture
    place = {p.patch: (left + R_MAX + step * depth[p.patch], 28 + ROW * i) for i, p in enumerate(patches)}
    radius = {p.patch: _radius(_lines(p), most) for p in patches}
    height = 28 + ROW * len(patches)
    text_x = left + 2 * R_MAX + step * max(depth.values()) + 10
    width = max(WIDTH, text_x + 240)
    out = [
        f'<svg class="series-graph" viewBox="0 0 {width:.0f} {height}" role="img" aria-labelledby="graph-t" '
        f'xmlns="http://www.w3.org/2000/svg"><title id="graph-t">{escape(title)}</title>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="edge-head"/></marker></defs>',
    ]
    for need, name in edges:
        (x1, y1), (x2, y2) = place[need], place[name]
        r1, r2 = radius[need], radius[name]
        y1, y2 = y1 + _spread(need, (need, name), long, 0), y2 + _spread(name, (need, name), long, 1)
        if (need, name) not in long:
            d = (
                f"M{x1:.1f},{y1 + r1:.1f} C{x1:.1f},{(y1 + y2) / 2:.1f} {x2 - r2:.1f},{(y1 + y2) / 2:.1f} "
                f"{x2 - r2 - 1:.1f},{y2:.1f}"
            )
        else:  # out of the left of one node, down its lane, into the left of the other
            lane = left - LANE * (long.index((need, name)) + 1) + LANE / 2
            bend = min(8.0, (y2 - y1) / 4)
            d = (
                f"M{x1 - r1:.1f},{y1:.1f} L{lane + bend:.1f},{y1:.1f} "
                f"Q{lane:.1f},{y1:.1f} {lane:.1f},{y1 + bend:.1f} "
                f"L{lane:.1f},{y2 - bend:.1f} Q{lane:.1f},{y2:.1f} {lane + bend:.1f},{y2:.1f} "
                f"L{x2 - r2 - 1:.1f},{y2:.1f}"
            )
        out.append(
            f'<path class="edge" marker-end="url(#arrow)" data-from="{escape(need)}" '
            f'data-to="{escape(name)}" d="{d}"/>'
        )
    for number, pa in enumerate(patches, 1):
        x, y = place[pa.patch]
        r = radius[pa.patch]
        label = f"{pa.patch} · {verdict_words.get(pa.verdict, pa.verdict)} · {_lines(pa)}"
        out.append(
            f'<a href="#p{number}"><g class="node v-{escape(pa.verdict)}" data-patch="{escape(pa.patch)}">'
            f"<title>{escape(label)}</title>"
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"/>'
            f'<text class="num{" small" if number > 9 else ""}" x="{x:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="middle">{number}</text>'
            f'<text x="{text_x:.1f}" y="{y + 4:.1f}">'
            f"{escape(pa.patch.removesuffix('.patch'))} "
            f'<tspan class="muted">±{_lines(pa)}</tspan></text></g></a>'
        )
    out.append("</svg>")
    return "".join(out)


def _spread(node: str, edge: tuple[str, str], long: list[tuple[str, str]], end: int) -> float:
    """Where a lane arrow leaves or enters ``node``: arrows sharing a node are spread a few pixels
    apart over its height, so two of them never draw one line."""
    if edge not in long:
        return 0.0
    mine = [e for e in long if e[end] == node]
    return (mine.index(edge) - (len(mine) - 1) / 2) * min(5.0, 2 * R_MIN / max(1, len(mine)))


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


BAR_ROW = 26
BAR_LEFT = 34
BAR_WIDTH = 300


def test_bars(result: AuditResult, title: str, words: dict[str, str], total_word: str) -> str:
    """Each patch with test outcomes: one bar, its buckets side by side in proportion, the count of
    tests after it; ``words``: bucket -> its name (the legend and each part's tooltip)."""
    rows = [(n, pa, test_buckets(pa)) for n, pa in enumerate(result.patches, 1)]
    rows = [(n, pa, buckets) for n, pa, buckets in rows if buckets]
    if not rows:
        return ""
    height = 8 + BAR_ROW * len(rows) + 22
    body, legend_x = [], float(BAR_LEFT)
    for bucket in BUCKETS:  # the legend, under the bars
        if any(bucket in buckets for _, _, buckets in rows):
            body.append(
                f'<rect class="b-{bucket}" x="{legend_x:.0f}" y="{height - 17}" width="10" height="10"/>'
            )
            body.append(f'<text x="{legend_x + 14:.0f}" y="{height - 8}">{escape(words[bucket])}</text>')
            legend_x += 24 + _text_width(words[bucket])
    totals = max(_text_width(f"{sum(b.values())} {total_word}", 6.5) for _, _, b in rows)
    for index, (number, pa, buckets) in enumerate(rows):
        y, x, total = 8 + BAR_ROW * index, float(BAR_LEFT), sum(buckets.values())
        body.append(f'<a href="#p{number}"><g class="bar-row" data-patch="{escape(pa.patch)}">')
        body.append(f'<text class="num" x="{BAR_LEFT - 8}" y="{y + 13}" text-anchor="end">{number}</text>')
        for bucket, count in buckets.items():
            width = BAR_WIDTH * count / total
            body.append(
                f'<rect class="b-{bucket}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="18">'
                f"<title>{escape(pa.patch)}: {count} {escape(words[bucket])}</title></rect>"
            )
            x += width
        body.append(
            f'<text class="muted" x="{BAR_LEFT + BAR_WIDTH + 6}" y="{y + 13}">'
            f"{total} {escape(total_word)}</text></g></a>"
        )
    width = max(BAR_LEFT + BAR_WIDTH + 12 + totals, legend_x)
    head = (
        f'<svg class="bars test-bars" viewBox="0 0 {width:.0f} {height}" role="img" '
        f'aria-labelledby="tests-t" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="tests-t">{escape(title)}</title>'
    )
    return head + "".join(body) + "</svg>"


def gate_bars(result: AuditResult, title: str, note) -> str:
    """One bar per gate: the seconds it took over every patch (``note(runs, cached)``: the words
    after the seconds)."""
    times = gate_seconds(result)
    if not times:
        return ""
    most = max(total for total, _, _ in times.values()) or 1.0
    left = 12 + max(_text_width(name) for name in times)
    notes = {name: f"{total:.1f} s · {note(runs, cached)}" for name, (total, runs, cached) in times.items()}
    width = left + BAR_WIDTH + 12 + max(_text_width(text, 6.5) for text in notes.values())
    height = 8 + BAR_ROW * len(times)
    out = [
        f'<svg class="bars gate-bars" viewBox="0 0 {width:.0f} {height}" role="img" '
        f'aria-labelledby="gates-t" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="gates-t">{escape(title)}</title>'
    ]
    for index, (name, (total, _, _)) in enumerate(times.items()):
        y = 8 + BAR_ROW * index
        width = max(1.0, BAR_WIDTH * total / most)
        out.append(f'<g class="bar-row" data-gate="{escape(name)}">')
        out.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{escape(name)}</text>')
        out.append(f'<rect class="gate-bar" x="{left}" y="{y}" width="{width:.1f}" height="18"/>')
        out.append(
            f'<text class="muted" x="{left + width + 6:.1f}" y="{y + 13}">{escape(notes[name])}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _text_width(text: str, px: float = 7.0) -> float:
    """About how wide ``text`` is drawn at 12 px: a wide (CJK) character counts twice."""
    return px * sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
