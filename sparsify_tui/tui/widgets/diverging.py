"""`DivergingBarChart`: one bar per item growing left or right from zero, for A-vs-B comparisons.

Each item has an A and a B value (ms per batch). Modes (`v` cycles): ``delta`` draws B − A (right: more time in
B, left: less), ``ratio`` draws log2(B / A) (right: slower in B, left: faster; items missing a side or with 0 ms are
drawn at 0 and labelled). Like :class:`~sparsify_tui.tui.widgets.charts.BarChart`: one terminal row per bar inside a
scroll container, first item on top, and `t` shows a table of the same numbers::

    chart = DivergingBarChart(title="Time per op type", id="ops")
    chart.set_data(["Conv", "Relu"], a=[1.2, 0.1], b=[0.5, 0.1])
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Static

from sparsify_tui.tui.widgets.charts import BAR_MARGIN_ROWS, _ChartBase, shorten_labels
from sparsify_tui.tui.widgets.tables import Column

DIVERGING_MODES = ("delta", "ratio")
MODE_LABELS = {"delta": "B − A ms", "ratio": "log2(B/A)"}


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b / a if a and b is not None and a > 0 else None


class DivergingBarChart(_ChartBase):
    """Bars of B − A (or log2 B/A) from a zero line, with a table view of A, B, B − A and B/A."""

    BINDINGS = [
        Binding("v", "cycle_mode", "Δ/ratio", id="chart.diverging_mode",
                tooltip="Bars of B − A ms, or of log2(B/A)"),
    ]

    mode: reactive[str] = reactive("delta")

    def __init__(self, *, title: str = "", **kwargs) -> None:
        super().__init__(title=title, **kwargs)
        self.labels: list[str] = []
        self.a: list[Optional[float]] = []
        self.b: list[Optional[float]] = []

    def _table_columns(self) -> list[Column]:
        return [
            Column("label", "Name", filter=True),
            Column("a", "A ms", numeric=True, fmt=_ms),
            Column("b", "B ms", numeric=True, fmt=_ms),
            Column("delta", "B − A ms", numeric=True, fmt=lambda v: "-" if v is None else f"{v:+.3f}"),
            Column("ratio", "B/A", numeric=True, fmt=lambda v: "-" if v is None else f"{v:.2f}×"),
        ]

    def set_data(self, labels: Sequence[str], a: Sequence[Optional[float]], b: Sequence[Optional[float]], *,
                 title: Optional[str] = None) -> None:
        """Show one bar per label; ``a`` / ``b`` in ms per batch (None: not on that side)."""
        self.labels = [str(x) for x in labels]
        self.a = [None if v is None else float(v) for v in a]
        self.b = [None if v is None else float(v) for v in b]
        if title is not None:
            self.title = title
        self._update()

    def action_cycle_mode(self) -> None:
        i = DIVERGING_MODES.index(self.mode) if self.mode in DIVERGING_MODES else -1
        self.mode = DIVERGING_MODES[(i + 1) % len(DIVERGING_MODES)]

    def watch_mode(self, _mode: str) -> None:
        if self.is_mounted:
            self._replot()

    def displayed(self) -> list[float]:
        """The plotted numbers for the current mode (0 where a value is missing)."""
        out = []
        for a, b in zip(self.a, self.b):
            if self.mode == "ratio":
                r = _ratio(a, b)
                out.append(math.log2(r) if r else 0.0)
            else:
                out.append((b or 0.0) - (a or 0.0))
        return out

    def _suffix(self, a: Optional[float], b: Optional[float]) -> str:
        r = _ratio(a, b)
        if self.mode == "ratio":
            return f"{r:.2f}×" if r else ("only B" if a is None else "only A" if b is None else "-")
        return f"{(b or 0.0) - (a or 0.0):+.3f}"

    def label_limit(self) -> int:
        width = self.size.width or 80
        return max(12, min(40, width // 2 - 14))

    def on_resize(self) -> None:
        if self.labels:
            self._replot()

    def _replot(self) -> None:
        keys = "v: Δ/ratio · " + ("t: chart" if self.show_table else "t: table")
        self.query_one(".chart-title", Static).update(
            f"{self.title} · {MODE_LABELS[self.mode]} [dim]({keys} · right = more in B)[/dim]")
        self._set_table_rows([
            {"_key": i, "label": lab, "a": a, "b": b, "delta": (b or 0.0) - (a or 0.0), "ratio": _ratio(a, b)}
            for i, (lab, a, b) in enumerate(zip(self.labels, self.a, self.b))
        ])
        plot = self._shown_plot(bool(self.labels))
        if plot is None:
            return
        shown = self.displayed()
        limit = self.label_limit()
        labels = [f"{lab} {self._suffix(a, b)}"
                  for lab, a, b in zip(shorten_labels(self.labels, limit), self.a, self.b)]
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.bar(labels[::-1], shown[::-1], orientation="horizontal", width=0.1)
        plt.xlabel(MODE_LABELS[self.mode])
        plot.styles.height = len(labels) + BAR_MARGIN_ROWS - 1
        plot.redraw()
