"""Terminal charts on textual-plotext, each with a companion table view of the same numbers.

`BarChart`: horizontal bars, one terminal row per bar inside a scroll container (the plot is
exactly ``bars + 5`` rows high, so plotext never drops a label), first item on top. Display modes:
``values`` (SI-scaled, e.g. GFLOPs), ``percent`` (% of the total of all bars) and ``log``
(log10 of the value). Keys: `v` cycles the display mode, `t` toggles chart/table::

    chart = BarChart(title="FLOPs per op type", unit="FLOPs", id="op-chart")
    chart.set_data(["Conv", "Relu"], [1.2e9, 3.4e6])

`LineChart`: one or more (x, y) series (benchmarks per iteration, LR schedules)::

    line = LineChart(title="Latency per iteration", x_label="iteration", y_label="ms per batch")
    line.set_series({"baseline": (xs, ys), "pruned": (xs, ys2)})
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Static
from textual_plotext import PlotextPlot

from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent

MODES = ("values", "percent", "log")
MODE_LABELS = {"values": "values", "percent": "% of total", "log": "log10"}
# units whose values get an SI prefix (k, M, G, T) in the values display
SI_UNITS = {"FLOPs", "MACs", "params", "FLOP/s", "items", "bytes", ""}
# extra rows around the bars: title, top border, bottom border, x ticks, x label
BAR_MARGIN_ROWS = 5
MAX_LABEL_CHARS = 28


def shorten(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    """Shorten a label in the middle ('/backbone/…/conv1/Conv') so its start and end stay readable."""
    label = str(label)
    if len(label) <= limit:
        return label
    keep = limit - 1
    head = keep // 2
    return label[:head] + "…" + label[len(label) - (keep - head):]


def si_scale(max_value: float) -> tuple[float, str]:
    """(factor, prefix) so that max_value / factor is below 1000: 3.2e9 -> (1e9, 'G')."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(max_value) >= factor:
            return factor, prefix
    return 1.0, ""


def format_value(value: float, unit: str) -> str:
    """Value with its unit: '1.20 GFLOPs', '3.41 ms'."""
    if unit in SI_UNITS:
        text = format_count(value)
        return f"{text}{unit}" if text[-1:].isalpha() and unit else f"{text} {unit}".strip()
    return f"{value:.4g} {unit}".strip()


class _ChartScroll(VerticalScroll, can_focus=False):
    """The chart's scroll container. Focusing it focuses the chart widget (whose keys then work)."""

    def focus(self, scroll_visible: bool = True):  # type: ignore[override]
        chart = next((a for a in self.ancestors if isinstance(a, _ChartBase)), None)
        if chart is not None:
            chart.focus(scroll_visible=False)
            return self
        return super().focus(scroll_visible)


class _ChartBase(Widget, can_focus=True):
    """Chart + table in a ContentSwitcher; `t` toggles between them.

    The chart widget itself takes focus (its keys work; arrow keys scroll the container it is in)."""

    DEFAULT_CSS = """
    _ChartBase { height: auto; max-height: 100%; }
    _ChartBase > ContentSwitcher { height: auto; max-height: 100%; }
    _ChartBase VerticalScroll { height: auto; max-height: 100%; }
    _ChartBase PlotextPlot { height: 10; }
    _ChartBase FilterableTable { height: auto; max-height: 30; }
    _ChartBase FilterableTable > DataTable { height: auto; max-height: 28; }
    _ChartBase .chart-empty { color: $text-muted; padding: 1 2; }
    _ChartBase .chart-title { text-style: bold; height: auto; padding: 0 1; }
    _ChartBase:focus > .chart-title { background: $accent 30%; }
    """

    BINDINGS = [
        Binding("t", "toggle_table", "Chart/table", id="chart.toggle_table",
                tooltip="Switch between the chart and a table of the same numbers"),
    ]

    show_table: reactive[bool] = reactive(False)

    def __init__(self, *, title: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.title = title

    def _table_columns(self) -> list[Column]:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        yield Static("", classes="chart-title")
        with ContentSwitcher(initial="chart-view"):
            with _ChartScroll(id="chart-view"):
                yield Static("No data.", classes="chart-empty")
                yield PlotextPlot(id="plot")
            yield FilterableTable(self._table_columns(), show_status=False, id="table-view")

    def on_mount(self) -> None:
        self._replot()

    @property
    def plot(self) -> PlotextPlot:
        return self.query_one("#plot", PlotextPlot)

    @property
    def table(self) -> FilterableTable:
        return self.query_one("#table-view", FilterableTable)

    def action_toggle_table(self) -> None:
        self.show_table = not self.show_table

    def watch_show_table(self, show: bool) -> None:
        if not self.is_mounted:
            return
        switcher = self.query_one(ContentSwitcher)
        had_focus = self.has_focus_within
        switcher.current = "table-view" if show else "chart-view"
        self._replot()
        if had_focus:
            (self.table if show else self).focus(scroll_visible=False)

    def _replot(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class BarChart(_ChartBase):
    """Horizontal bar chart, one row per bar, with values / % / log display and a table view."""

    BINDINGS = [
        Binding("v", "cycle_mode", "Values/%/log", id="chart.cycle_mode",
                tooltip="Cycle the value display: values, % of total, log10"),
    ]

    mode: reactive[str] = reactive("values")

    def __init__(self, *, title: str = "", unit: str = "", x_label: str = "",
                 modes: Sequence[str] = MODES, mode: str = "values", **kwargs) -> None:
        super().__init__(title=title, **kwargs)
        self.unit = unit
        self.x_label = x_label or unit
        self.modes = tuple(modes)
        self.labels: list[str] = []
        self.values: list[float] = []
        self.total: Optional[float] = None
        self.set_reactive(BarChart.mode, mode)

    def _table_columns(self) -> list[Column]:
        return [
            Column("label", "Name", filter=True),
            Column("value", self.x_label or "Value", numeric=True, fmt=lambda v: format_value(v, self.unit)),
            Column("share", "% of total", numeric=True, fmt=format_percent),
        ]

    def set_data(self, labels: Sequence[str], values: Sequence[float], *, title: Optional[str] = None,
                 unit: Optional[str] = None, x_label: Optional[str] = None, total: Optional[float] = None) -> None:
        """Show bars `labels[i]` = `values[i]` (first on top). Values in `unit` (e.g. 'FLOPs', 'ms').

        `total`: denominator of the % display (e.g. the whole model's FLOPs when only the top N bars
        are shown); default the sum of `values`."""
        self.labels = [str(x) for x in labels]
        self.values = [float(v or 0.0) for v in values]
        self.total = total
        if title is not None:
            self.title = title
        if unit is not None:
            self.unit = unit
        if x_label is not None:
            self.x_label = x_label
        if self.is_mounted:
            self._replot()

    def action_cycle_mode(self) -> None:
        i = self.modes.index(self.mode) if self.mode in self.modes else -1
        self.mode = self.modes[(i + 1) % len(self.modes)]

    def watch_mode(self, _mode: str) -> None:
        if self.is_mounted:
            self._replot()

    def displayed(self) -> tuple[list[float], str]:
        """(plotted numbers, axis label) for the current mode."""
        total = self.total or sum(self.values)
        if self.mode == "percent":
            return ([v / total * 100 if total else 0.0 for v in self.values], f"% of total {self.unit}".strip())
        if self.mode == "log":
            return ([math.log10(v) if v > 0 else 0.0 for v in self.values], f"log10({self.x_label or 'value'})")
        factor, prefix = si_scale(max(self.values, default=0.0)) if self.unit in SI_UNITS else (1.0, "")
        label = self.x_label or self.unit
        if prefix:
            label = f"{label} (×{factor:.0e}, {prefix}{self.unit})" if label != self.unit else f"{prefix}{self.unit}"
        return ([v / factor for v in self.values], label)

    def _title_text(self) -> str:
        keys = (["v: mode"] if len(self.modes) > 1 else []) + ["t: table" if not self.show_table else "t: chart"]
        return f"{self.title} · {MODE_LABELS.get(self.mode, self.mode)}  [dim]({' · '.join(keys)})[/dim]"

    def label_limit(self) -> int:
        """Max label characters for the current width (labels longer than this are shortened)."""
        width = self.size.width or 80
        return max(12, min(MAX_LABEL_CHARS + 12, width // 2 - 14))

    def on_resize(self) -> None:
        if self.labels:
            self._replot()

    def _replot(self) -> None:
        self.query_one(".chart-title", Static).update(self._title_text())
        total = self.total or sum(self.values)
        self.table.set_rows([
            {"_key": i, "label": lab, "value": v, "share": (v / total if total else 0.0)}
            for i, (lab, v) in enumerate(zip(self.labels, self.values))
        ])
        empty = not self.labels
        self.query_one(".chart-empty").display = empty
        plot = self.plot
        plot.display = not empty
        if empty:
            return
        shown, axis_label = self.displayed()
        suffix = [format_value(v, self.unit) if self.mode == "values"
                  else f"{v / total * 100:.1f}%" if self.mode == "percent" and total
                  else format_value(v, self.unit) for v in self.values]
        limit = self.label_limit()
        labels = [f"{shorten(lab, limit)} {s}" for lab, s in zip(self.labels, suffix)]
        # plotext draws horizontal bars bottom-up: reverse so the first item is on top
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.bar(labels[::-1], shown[::-1], orientation="horizontal", width=0.1)
        plt.xlabel(axis_label)
        plot.styles.height = len(labels) + BAR_MARGIN_ROWS - 1  # no plotext title row
        plot.refresh()


class LineChart(_ChartBase):
    """Line chart of named (x, y) series, with a table view (`t`)."""

    DEFAULT_CSS = """
    LineChart PlotextPlot { height: 16; }
    """

    def __init__(self, *, title: str = "", x_label: str = "", y_label: str = "", height: int = 16, **kwargs) -> None:
        super().__init__(title=title, **kwargs)
        self.x_label = x_label
        self.y_label = y_label
        self.plot_height = height
        self.series: dict[str, tuple[list[float], list[float]]] = {}

    def _table_columns(self) -> list[Column]:
        return [
            Column("series", "Series", filter=True),
            Column("x", self.x_label or "x", numeric=True),
            Column("y", self.y_label or "y", numeric=True),
        ]

    def set_series(self, series: dict[str, tuple[Sequence[float], Sequence[float]]], *,
                   title: Optional[str] = None, x_label: Optional[str] = None, y_label: Optional[str] = None) -> None:
        """Plot each named series `{name: (xs, ys)}`."""
        self.series = {k: ([float(x) for x in xs], [float(y) for y in ys]) for k, (xs, ys) in series.items()}
        if title is not None:
            self.title = title
        if x_label is not None:
            self.x_label = x_label
        if y_label is not None:
            self.y_label = y_label
        if self.is_mounted:
            self._replot()

    def _replot(self) -> None:
        self.query_one(".chart-title", Static).update(
            f"{self.title}  [dim](t: chart/table)[/dim]" if self.title else "[dim](t: chart/table)[/dim]")
        rows = []
        for name, (xs, ys) in self.series.items():
            rows.extend({"_key": f"{name}/{i}", "series": name, "x": x, "y": y}
                        for i, (x, y) in enumerate(zip(xs, ys)))
        self.table.set_rows(rows)
        empty = not rows
        self.query_one(".chart-empty").display = empty
        plot = self.plot
        plot.display = not empty
        if empty:
            return
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        for name, (xs, ys) in self.series.items():
            plt.plot(xs, ys, label=name if len(self.series) > 1 else None, marker="braille")
        plt.xlabel(self.x_label)
        plt.ylabel(self.y_label)
        plot.styles.height = self.plot_height
        plot.refresh()
