"""Horizontal bar charts as inline SVG, for the HTML report: no dependency, no script, no external asset.

One row per bar (first item on top), the label on the left (shortened in the middle when long; the full label is
the bar's ``<title>`` tooltip), the value printed after the bar::

    svg = bar_chart(["Conv", "Relu"], [1.25, 0.08], unit="ms", title="Time per op type")

The SVG has no ``xmlns`` attribute: inline in HTML5 it needs none (and the report then names no URL at all).
"""

from __future__ import annotations

from html import escape
from typing import Callable, Optional, Sequence

ROW = 20          # px per bar
LABEL_CHARS = 44  # longest label shown in full
CHAR_PX = 6.6     # approx. width of a 12 px sans-serif character
PALETTE = ("#3b6ea8", "#d9822b")


def shorten(label: str, limit: int = LABEL_CHARS) -> str:
    """``'/backbone/…/conv1/Conv'``: the start and the end of a long label."""
    label = str(label)
    if len(label) <= limit:
        return label
    keep = limit - 1
    return label[: keep // 2] + "…" + label[len(label) - (keep - keep // 2):]


def _fmt(v: float, unit: str) -> str:
    if unit == "x":
        return f"{v:.2f}×"
    if unit == "%":
        return f"{v:.1f}%"
    text = f"{v:.3f}" if abs(v) < 1000 else f"{v:,.0f}"
    return f"{text} {unit}".strip()


def bar_chart(labels: Sequence[str], values: Sequence[float], *, unit: str = "", title: str = "",
              width: int = 760, color: Optional[str] = None, fmt: Optional[Callable[[float], str]] = None,
              texts: Optional[Sequence[str]] = None, reference: Optional[float] = None) -> str:
    """An SVG bar chart of ``values`` (non-negative; None counts as 0) labelled ``labels``.

    ``unit``: printed after each value ("ms", "items/s", "x" prints ``2.50×``, "%"); ``fmt`` overrides the value
    text, ``texts`` gives it per bar; ``reference``: draw a dashed vertical line at this value (e.g. 1.0 for
    speedups). Returns "" with no bars."""
    if not labels:
        return ""
    vals = [max(0.0, float(v or 0.0)) for v in values]
    fmt = fmt or (lambda v: _fmt(v, unit))
    texts = [str(t) for t in texts] if texts is not None else [fmt(v) for v in vals]
    shown = [shorten(x) for x in labels]
    label_w = int(min(LABEL_CHARS, max(len(s) for s in shown)) * CHAR_PX) + 12
    value_w = int(max(len(t) for t in texts) * CHAR_PX) + 12
    top = 24 if title else 6
    plot_w = max(120, width - label_w - value_w - 8)
    vmax = max(vals + ([reference] if reference else [])) or 1.0
    height = top + ROW * len(vals) + 6
    color = color or PALETTE[0]
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{escape(title or "bar chart")}" font-family="sans-serif" font-size="12">']
    if title:
        out.append(f'<text x="0" y="15" font-weight="bold">{escape(title)}</text>')
    for i, (full, short, v, text) in enumerate(zip(labels, shown, vals, texts)):
        y = top + i * ROW
        w = plot_w * v / vmax
        out.append(f'<g><title>{escape(str(full))}: {escape(text)}</title>'
                   f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(short)}</text>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{ROW - 6}" fill="{color}"/>'
                   f'<text x="{label_w + w + 4:.1f}" y="{y + 14}">{escape(text)}</text></g>')
    if reference:
        x = label_w + plot_w * reference / vmax
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 4}" stroke="#555" '
                   f'stroke-dasharray="3,3"/>')
    out.append("</svg>")
    return "".join(out)
