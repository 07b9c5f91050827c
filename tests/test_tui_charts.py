"""Charts and tables that do not mislead (issue 15 items 1 and 9), through Pilot: log10 bars that grow with the
value, labels that stay distinct, evenly spaced y ticks, the legend on its own line, numbers never cut."""

from __future__ import annotations

import math

import pytest
from textual.app import App, ComposeResult

from sparsify_tui.tui.widgets.charts import BarChart, LineChart, even_ticks, log_scale, nice_ticks, tick_label
from sparsify_tui.tui.widgets.labels import collapse_path, shorten_labels
from sparsify_tui.tui.widgets.tables import Column, FilterableTable

MOBILENET_IDS = [f"/features/features.{i}/conv/conv.{j}/conv.{j}.0/Conv" for i in range(1, 18) for j in (0, 1)] + \
    [f"/features/features.{i}/conv/conv.2/Conv" for i in range(1, 18)]


def screen_lines(app) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def test_log_scale_starts_below_the_smallest_value():
    bars, e = log_scale([0.0059, 1.2, 30.0, 0.0])
    assert e == -3  # 0.001 ms: a decade boundary below 0.0059
    assert bars[0] > 0 and bars[0] < bars[1] < bars[2] and bars[3] == 0.0
    assert bars == pytest.approx([math.log10(0.0059 / 1e-3), math.log10(1.2e3), math.log10(30e3), 0.0])
    assert log_scale([1.0, 10.0])[1] == -1  # a value on a decade boundary still gets a bar
    assert log_scale([0.0, -1.0]) == ([0.0, 0.0], None)


class ChartApp(App):
    def compose(self) -> ComposeResult:
        yield BarChart(title="ms per op type", unit="ms", id="bars")
        yield LineChart(title="lr", x_label="epoch", y_label="LR", id="line")


async def test_log_mode_draws_the_smallest_value_shortest():
    app = ChartApp()
    async with app.run_test(size=(100, 40)) as pilot:
        chart = app.query_one(BarChart)
        chart.set_data(["Conv", "Add", "Reshape"], [1.2, 0.05, 0.0059])
        chart.mode = "log"
        await pilot.pause(0.3)
        lines = screen_lines(app)
        length = {name: next(line.count("█") for line in lines if f"{name} " in line and "┤" in line)
                  for name in ("Conv", "Add", "Reshape")}
        assert 0 < length["Reshape"] < length["Add"] < length["Conv"], length
        assert "bars start at 0.001" in chart.displayed()[1]


def test_labels_keep_what_tells_them_apart():
    assert collapse_path("/features/features.13/conv/conv.0/conv.0.0/Conv") == "/features.13/conv.0.0/Conv"
    short = shorten_labels(MOBILENET_IDS, 26)
    assert len(set(short)) == len(MOBILENET_IDS)  # before: every row read "/features/featur….0/conv.0.0/Conv"
    assert all(len(s) <= 26 for s in short)
    assert short[0] == "/features.1/conv.0.0/Conv"
    assert shorten_labels(["Reshape", "Conv"], 26) == ["Reshape", "Conv"]
    # names that collide after shortening get their row number
    clash = shorten_labels(["p1/" + "q" * 30, "p2/" + "q" * 30], 12)
    assert len(set(clash)) == 2 and clash[0].startswith("#0 ")


def test_even_ticks_are_evenly_spaced_and_distinct():
    ticks = even_ticks([0.01, 0.0001, 0.0067])
    steps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(ticks) == 5 and max(steps) - min(steps) < 1e-12
    labels = [tick_label(t, ticks) for t in ticks]
    assert len(set(labels)) == 5 and labels[0] == "0.0001" and labels[-1] == "0.01"


@pytest.mark.parametrize("lo, hi", [(-1.56, 1.0), (0.0, 1.0), (0.0001, 0.01), (-0.02, 0.05), (0.0, 0.0),
                                    (3.0, 3.0), (-3.1, 0.0), (12.5, 980.0)])
def test_nice_ticks_are_round_values_around_the_data(lo, hi):
    """A search chart's y ticks: round steps, every value inside them, and 0 a tick when the data spans it (a trial
    with a drop of 0 was drawn on a row labelled -0.28 with ticks from min to max)."""
    ticks = nice_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi and 3 <= len(ticks) <= 7
    step = ticks[1] - ticks[0]
    assert all(abs((b - a) - step) < 1e-9 * max(1.0, abs(step)) for a, b in zip(ticks, ticks[1:]))
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(abs(mantissa - m) < 1e-9 for m in (1, 2, 2.5, 5))
    if lo <= 0 <= hi:
        assert 0.0 in ticks
    assert len({tick_label(t, ticks) for t in ticks}) == len(ticks)


async def test_line_chart_legend_is_its_own_line():
    app = ChartApp()
    async with app.run_test(size=(100, 40)) as pilot:
        line = app.query_one(LineChart)
        line.set_series({"baseline": ([1, 2, 3], [3.0, 2.0, 1.0]), "opt one": ([1, 2, 3], [1.0, 1.5, 1.2])})
        await pilot.pause(0.3)
        title = str(line.query_one(".chart-title").render())
        assert "⠿ baseline" in title and "• opt one" in title  # a marker per series, readable without colour
        plot_rows = [ln for ln in screen_lines(app) if "baseline" in ln]
        assert len(plot_rows) == 1  # the legend, and not again over the plot's top line


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield FilterableTable([Column("index", "#", numeric=True, pin=True), Column("id", "Layer", pin=True)]
                              + [Column(f"s{k}", f"@0.{k}", numeric=True, fmt=lambda v: f"{v:.4g}")
                                 for k in range(10)], id="t")


async def test_tables_never_cut_a_number():
    """A loss table of mobilenet_v2 at 80 columns: every value shown whole; → pages to the next columns."""
    app = TableApp()
    async with app.run_test(size=(80, 20)) as pilot:
        table = app.query_one(FilterableTable)
        table.set_rows([{"index": i, "id": name, **{f"s{k}": 7.69e-06 * (k + 1) * (i + 1) for k in range(10)}}
                        for i, name in enumerate(MOBILENET_IDS)])
        table.focus()
        await pilot.pause(0.3)
        for _ in range(4):
            shown = [c.label.plain for c in table.data_table.ordered_columns]
            text = "\n".join(screen_lines(app))
            for row in table.rows_shown()[:10]:
                for col in table.columns:
                    if col.label in shown and col.key.startswith("s"):
                        assert col.text(row[col.key]) in text
            assert table.data_table.virtual_size.width <= table.size.width  # nothing to scroll sideways
            await pilot.press("right")
            await pilot.pause(0.1)
        for _ in range(10):  # → pages up to the last column, and stops there
            await pilot.press("right")
        await pilot.pause(0.1)
        assert [c.label.plain for c in table.data_table.ordered_columns][-1] == "@0.9"
        assert table.data_table.ordered_columns[1].label.plain == "Layer"  # the name stays pinned


async def test_clicking_a_bar_inspects_it():
    """Selecting a bar (a click on its row) posts BarChart.Inspect with that bar's key (a section then shows the
    layer's full record); so does enter on its row in the table view."""
    seen = []

    class InspectApp(ChartApp):
        def on_bar_chart_inspect(self, message: BarChart.Inspect) -> None:
            seen.append((message.index, message.label, message.key))

    app = InspectApp()
    async with app.run_test(size=(100, 40)) as pilot:
        chart = app.query_one(BarChart)
        chart.set_data(["Conv", "Add", "Reshape"], [1.2, 0.05, 0.0059], keys=[10, 11, 12])
        await pilot.pause(0.3)
        plot = chart.plot
        await pilot.click(plot, offset=(plot.region.width // 2, 2))  # the second bar's row (after the top border)
        await pilot.pause(0.2)
        assert seen == [(1, "Add", 11)]
        chart.focus()
        await pilot.press("t")
        await pilot.pause(0.3)
        await pilot.press("down", "down", "enter")
        await pilot.pause(0.2)
        assert seen[-1] == (2, "Reshape", 12)
