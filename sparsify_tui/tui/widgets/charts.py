"""Terminal charts on textual-plotext, each with a companion table view of the same numbers.

`BarChart`: horizontal bars, one terminal row per bar inside a scroll container (the plot is
exactly ``bars + 5`` rows high, so plotext never drops a label), first item on top. Display modes:
``values`` (SI-scaled, e.g. GFLOPs), ``percent`` (% of the total of all bars) and ``log`` (a log10 scale
whose baseline is a decade boundary below the smallest value, so every bar grows with its value; the
x ticks are the values themselves). Long labels lose their common prefix, then their middle, keeping the
distinguishing tail (:func:`shorten_labels`). Keys: `v` cycles the display mode, `t` toggles
chart/table; clicking a bar, or `enter` on a row of the table view, posts :class:`BarChart.Inspect`::

    chart = BarChart(title="FLOPs per op type", unit="FLOPs", id="op-chart")
    chart.set_data(["Conv", "Relu"], [1.2e9, 3.4e6])

`LineChart`: one or more (x, y) series (benchmarks per iteration, LR schedules), with evenly spaced y
ticks and the legend on its own line above the plot (each series has its own marker, readable without
colour)::

    line = LineChart(title="Latency per iteration", x_label="iteration", y_label="ms per batch")
    line.set_series({"baseline": (xs, ys), "pruned": (xs, ys2)})
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Static
from textual_plotext import PlotextPlot

from sparsify_tui.tui.widgets.labels import MAX_LABEL_CHARS, shorten, shorten_labels  # noqa: F401 (re-exported)
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent

MODES = ("values", "percent", "log")
MODE_LABELS = {"values": "values", "percent": "% of total", "log": "log10"}
# units whose values get an SI prefix (k, M, G, T) in the values display
SI_UNITS = {"FLOPs", "MACs", "params", "FLOP/s", "items", "bytes", ""}
# extra rows around the bars: title, top border, bottom border, x ticks, x label
BAR_MARGIN_ROWS = 5


def log_scale(values: Sequence[float]) -> tuple[list[float], Optional[int]]:
    """(bar lengths, exponent of the baseline) of a log10 bar chart: the baseline is 10**e with
    ``e = ceil(log10(min positive value)) - 1``, a decade boundary below the smallest value, so every
    positive value gets a positive bar that grows with it (values at or below 0 get none).
    ``e`` is None when no value is positive."""
    positive = [v for v in values if v > 0]
    if not positive:
        return [0.0 for _ in values], None
    e = math.ceil(math.log10(min(positive))) - 1
    return [math.log10(v) - e if v > 0 else 0.0 for v in values], e


def si_scale(max_value: float) -> tuple[float, str]:
    """(factor, prefix) so that max_value / factor is below 1000: 3.2e9 -> (1e9, 'G')."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(max_value) >= factor:
            return factor, prefix
    return 1.0, ""


def format_value(value: float, unit: str) -> str:
    """Value with its unit: '1.20 GFLOPs', '3.410 ms' (a unit the shared formats know, with its fixed decimals:
    :func:`sparsify_tui.formatting.format_value`; 0.6 ms beside 0.4903 ms read as two precisions)."""
    from sparsify_tui.formatting import format_value as shared

    if unit in SI_UNITS:
        text = format_count(value)
        return f"{text}{unit}" if text[-1:].isalpha() and unit else f"{text} {unit}".strip()
    if unit in ("ms", "x", "MB"):
        return shared(value, unit)
    return f"{value:.4g} {unit}".strip()


class Plot(PlotextPlot):
    """A PlotextPlot that builds its figure once per change instead of on every repaint: textual-plotext rebuilds
    the whole figure and parses its ANSI text in each ``render()``, which a focus change, a scroll or a section
    shown again asks for (a 600-bar chart costs tens of ms a time). Call :meth:`redraw` after changing ``plt``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._version = 0
        self._cache: tuple = (None, None)

    def redraw(self) -> None:
        """The figure changed (``plt`` calls): build it again at the next render, and refresh."""
        self._version += 1
        self.refresh()

    def render(self):
        key = (self._version, self.size.width, self.size.height, self.app.theme)
        if self._cache[0] != key:
            self._cache = (key, super().render())
        return self._cache[1]


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
        Binding("t", "toggle_table", "Chart/table", show=False, id="chart.toggle_table",
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
        # the table view is mounted the first time `t` asks for it: a screen holds several charts, and most
        # are never shown as a table (fewer widgets to build when a section opens)
        with ContentSwitcher(initial="chart-view"):
            with _ChartScroll(id="chart-view"):
                yield Static("No data.", classes="chart-empty")
                plot = Plot(id="plot")
                plot.display = False  # shown by the first plot with data (an empty figure took a plotext render)
                yield plot

    def on_mount(self) -> None:
        self._stale = True  # plotted when first shown (on_show), with its real width

    def _update(self) -> None:
        """Plot the new data now when the chart is on screen; a chart on a hidden tab is plotted when it is
        shown (a section holds several charts of hundreds of bars, and plotext draws each for a few 10 ms)."""
        if self.is_mounted and self.region.width > 0:
            self._stale = False
            self._replot()
        else:
            self._stale = True

    def on_show(self) -> None:
        if getattr(self, "_stale", False) and self.query(".chart-title"):  # none while the app closes
            self._stale = False
            self._replot()

    @property
    def plot(self) -> Plot:
        return self.query_one("#plot", Plot)

    @property
    def table(self) -> FilterableTable:
        """The table view (mounted by the first `t`)."""
        return self.query_one("#table-view", FilterableTable)

    def _set_table_rows(self, rows: list[dict]) -> None:
        self._table_rows = rows
        tables = self.query("#table-view")
        if tables:
            tables.first(FilterableTable).set_rows(rows)

    async def action_toggle_table(self) -> None:
        if not self.query("#table-view"):
            table = FilterableTable(self._table_columns(), show_status=False, id="table-view")
            await self.query_one(ContentSwitcher).mount(table)
            table.set_rows(getattr(self, "_table_rows", []))
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

    def _shown_plot(self, has_data: bool) -> Optional[Plot]:
        """Show the plot, or the "No data." note instead when there is nothing to plot; returns the plot to draw
        on, None when empty."""
        self.query_one(".chart-empty").display = not has_data
        plot = self.plot
        plot.display = has_data
        return plot if has_data else None


class BarChart(_ChartBase):
    """Horizontal bar chart, one row per bar, with values / % / log display and a table view."""

    BINDINGS = [
        Binding("v", "cycle_mode", "Mode", show=False, id="chart.cycle_mode",
                tooltip="Cycle the value display: values, % of total, log10"),
    ]

    @dataclass
    class Inspect(Message):
        """A bar was chosen (clicked, or `enter` on its row in the table view): ``index`` into the data,
        ``label`` its full label, ``key`` the key given to :meth:`BarChart.set_data` (default the label)."""

        chart: "BarChart"
        index: int
        label: str
        key: Any

        @property
        def control(self) -> "BarChart":
            return self.chart

    mode: reactive[str] = reactive("values")

    def __init__(self, *, title: str = "", unit: str = "", x_label: str = "",
                 modes: Sequence[str] = MODES, mode: str = "values", **kwargs) -> None:
        super().__init__(title=title, **kwargs)
        self.unit = unit
        self.x_label = x_label or unit
        self.modes = tuple(modes)
        self.labels: list[str] = []
        self.values: list[float] = []
        self.keys: list[Any] = []
        self.total: Optional[float] = None
        self._plotted_width = 0  # the width the bars were last plotted at (their labels are fitted to it)
        self.set_reactive(BarChart.mode, mode)

    def _table_columns(self) -> list[Column]:
        return [
            Column("label", "Name", filter=True),
            Column("value", self.x_label or "Value", numeric=True, fmt=lambda v: format_value(v, self.unit)),
            Column("share", "% of total", numeric=True, fmt=format_percent),
        ]

    def set_data(self, labels: Sequence[str], values: Sequence[float], *, title: Optional[str] = None,
                 unit: Optional[str] = None, x_label: Optional[str] = None, total: Optional[float] = None,
                 keys: Optional[Sequence[Any]] = None) -> None:
        """Show bars `labels[i]` = `values[i]` (first on top). Values in `unit` (e.g. 'FLOPs', 'ms').

        `total`: denominator of the % display (e.g. the whole model's FLOPs when only the top N bars
        are shown); default the sum of `values`. `keys`: what :class:`Inspect` carries for each bar
        (default the labels)."""
        self.labels = [str(x) for x in labels]
        self.values = [float(v or 0.0) for v in values]
        self.keys = list(keys) if keys is not None else list(self.labels)
        self.total = total
        if title is not None:
            self.title = title
        if unit is not None:
            self.unit = unit
        if x_label is not None:
            self.x_label = x_label
        self._update()

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
            bars, e = log_scale(self.values)
            if e is None:
                return bars, "log10 scale"
            return bars, f"{self.x_label or self.unit or 'value'}, log10 scale (bars start at {10.0 ** e:g})"
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
        # the labels are fitted to the width: plotted again when it changed (not for a new height, which the plot
        # itself sets, nor for a section shown again at the width it had: a 600-bar plot takes tens of ms)
        if self.labels and self.size.width and self.size.width != self._plotted_width:
            self._replot()

    def _replot(self) -> None:
        self._plotted_width = self.size.width
        self.query_one(".chart-title", Static).update(self._title_text())
        total = self.total or sum(self.values)
        self._set_table_rows([
            {"_key": i, "label": lab, "value": v, "share": (v / total if total else 0.0)}
            for i, (lab, v) in enumerate(zip(self.labels, self.values))
        ])
        plot = self._shown_plot(bool(self.labels))
        if plot is None:
            return
        shown, axis_label = self.displayed()
        suffix = [format_value(v, self.unit) if self.mode == "values"
                  else f"{v / total * 100:.1f}%" if self.mode == "percent" and total
                  else format_value(v, self.unit) for v in self.values]
        limit = self.label_limit()
        labels = [f"{lab} {s}" for lab, s in zip(shorten_labels(self.labels, limit), suffix)]
        # plotext draws horizontal bars bottom-up: reverse so the first item is on top
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.bar(labels[::-1], shown[::-1], orientation="horizontal", width=0.1)
        if self.mode == "log":
            _, e = log_scale(self.values)
            if e is not None:  # ticks at each decade, labelled with the value itself
                top = max(1, math.ceil(max(shown, default=1.0)))
                ticks = list(range(0, top + 1))
                plt.xticks(ticks, [f"{10.0 ** (e + k):g}" for k in ticks])
        plt.xlabel(axis_label)
        plot.styles.height = len(labels) + BAR_MARGIN_ROWS - 1  # no plotext title row
        plot.redraw()

    def on_click(self, event) -> None:
        """A click on a bar's row inspects it (rows: the plot's top border, then one per bar)."""
        plot = self.plot
        if not self.labels or self.show_table or not plot.region.contains(event.screen_x, event.screen_y):
            return
        index = event.screen_y - plot.region.y - 1
        if 0 <= index < len(self.labels):
            self.post_message(self.Inspect(self, index, self.labels[index], self.keys[index]))

    @on(FilterableTable.RowChosen, "#table-view")
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        index = int(event.row.get("_key", -1))
        if 0 <= index < len(self.labels):
            self.post_message(self.Inspect(self, index, self.labels[index], self.keys[index]))


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
        self._update()

    def _replot(self) -> None:
        title = f"{self.title}  [dim](t: chart/table)[/dim]" if self.title else "[dim](t: chart/table)[/dim]"
        if len(self.series) > 1:  # the legend on its own line: plotext draws it over the top of the plot
            title += "\n" + "  ".join(f"[{SERIES_COLORS[i % len(SERIES_COLORS)][1]}]{MARKER_GLYPHS[i % len(MARKERS)]}"
                                       f" {escape(name)}[/]" for i, name in enumerate(self.series))
        self.query_one(".chart-title", Static).update(title)
        rows = []
        for name, (xs, ys) in self.series.items():
            rows.extend({"_key": f"{name}/{i}", "series": name, "x": x, "y": y}
                        for i, (x, y) in enumerate(zip(xs, ys)))
        self._set_table_rows(rows)
        plot = self._shown_plot(bool(rows))
        if plot is None:
            return
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        for i, (xs, ys) in enumerate(self.series.values()):
            plt.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=SERIES_COLORS[i % len(SERIES_COLORS)][0])
        ticks = even_ticks([y for _xs, ys in self.series.values() for y in ys])
        if ticks:
            plt.yticks(ticks, [tick_label(t, ticks) for t in ticks])
        plt.xlabel(self.x_label)
        plt.ylabel(self.y_label)
        plot.styles.height = self.plot_height
        plot.redraw()


#: per series of a line chart: plotext marker (distinct without colour), its glyph in the legend, colour
MARKERS = ("braille", "dot", "x", "+", "o")
MARKER_GLYPHS = ("⠿", "•", "x", "+", "o")
SERIES_COLORS = (("blue+", "blue"), ("orange+", "dark_orange"), ("green+", "green"), ("red+", "red"),
                 ("magenta+", "magenta"))


def even_ticks(values: Sequence[float], count: int = 5) -> list[float]:
    """``count`` evenly spaced tick positions from the smallest to the largest value ([] when empty)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [lo]
    step = (hi - lo) / (count - 1)
    return [lo + k * step for k in range(count)]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` tick positions at round values (a step of 1, 2, 2.5 or 5 times a power of ten) from at or below
    ``lo`` to at or above ``hi``, so a value on a tick (a drop of 0, a budget of 1 point) is drawn on the row of its
    label. Heckbert's "nice numbers for graph labels" (Graphics Gems, 1990), with 2.5 added to the steps.
    ``lo == hi``: one step of a tenth of the value (1 for 0) either side."""
    lo, hi = min(lo, hi), max(lo, hi)
    if hi == lo:
        pad = abs(lo) / 10 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(first, last + 1)]


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """A tick's label with just enough digits to tell the ticks apart ('0.0025', '1.2e-05')."""
    for digits in range(2, 8):
        labels = [f"{t:.{digits}g}" for t in ticks]
        if len(set(labels)) == len(labels):
            return f"{value:.{digits}g}"
    return f"{value:.8g}"
