"""The comparison screens and the Report dialog through Pilot, on stored profiles (nothing measured): mark two perf
profiles and press `=`, FP32 vs INT8 of one, `C` for optimizations side by side, `w` for a report; no workspace
call on the UI thread; 80x24 snapshots."""

from __future__ import annotations


import pytest
from compare_fixtures import DEMO_DIMS, profile_from_analysis
from conftest import steady, wait_for
from test_tui_plumbing import ThreadCheckingWorkspace

from sparsify_tui.services.profiles import store_perf_profile
from sparsify_tui.services.projects import create_project

SIZE = (80, 24)


def seed(ws, demo_model):
    """Project demo with perf profiles b1 and b8 (5× the time, batch 8) and optimizations opt, opt v2."""
    from sparsify_tui.services.optimizations import copy_optimization, create_optimization, reevaluate

    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    analysis = ws.analysis_of(pid)
    a = profile_from_analysis(analysis, "b1")
    b = profile_from_analysis(analysis, "b8", scale=5.0, batch_size=8)
    b.created = "2026-01-02T00:00:00Z"
    ids = [store_perf_profile(ws, pid, p)["record_id"] for p in (a, b)]
    create_optimization(ws, pid, "opt", sparsity=0.85)
    copy_optimization(ws, pid, "opt")
    reevaluate(ws, pid, "opt v2", sparsity=0.6)
    return pid, ids, a, b


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_perf(pilot):
    app = pilot.app
    await wait_for(pilot, lambda: app.section == "perf" and len(app.query_one("#perf").records) == 2)
    section = app.query_one("#perf")
    section.focus_default()
    return section


async def open_comparison(pilot, keys=("home", "down", "space", "down", "space", "equals_sign")):
    from sparsify_tui.tui.perf.compare_screen import PerfCompareScreen

    await open_perf(pilot)
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, PerfCompareScreen)
                   and pilot.app.screen.comparison is not None)
    return pilot.app.screen


async def open_optimization_comparison(pilot):
    """Optimization section, `=` on its list: the comparison screen once it shows a comparison."""
    from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen

    app = pilot.app
    await wait_for(pilot, lambda: app.section == "perf")
    await pilot.press("4")
    await wait_for(pilot, lambda: app.query_one("OptimizationSection").rec is not None)
    app.query_one("#opt-list").focus()
    await pilot.press("equals_sign")
    await wait_for(pilot, lambda: isinstance(app.screen, OptimizationCompareScreen) and app.screen.comparison)
    return app.screen


@pytest.fixture
def ws(workspace_home):
    from sparsify_tui.store import Workspace

    return Workspace()


def checked(ws) -> ThreadCheckingWorkspace:
    """The same workspace, recording every call made on the UI thread (for the app)."""
    out = ThreadCheckingWorkspace(ws.root)
    out.ui_thread_calls.clear()
    return out


async def test_mark_two_profiles_and_compare(ws, demo_model):
    from sparsify_tui.tui.widgets.diverging import DivergingBarChart
    from sparsify_tui.tui.widgets.tables import FilterableTable

    pid, ids, a, b = seed(ws, demo_model)
    ws = checked(ws)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        section = await open_perf(pilot)
        await pilot.press("home", "down", "space", "down", "space")  # the list opens on the newest (b8)
        assert section.marked == ids
        options = section.query_one("#profiles")
        assert str(options.get_option_at_index(1).prompt).startswith("A▸ b1")
        assert str(options.get_option_at_index(2).prompt).startswith("B▸ b8")
        await pilot.press("equals_sign")
        from sparsify_tui.tui.perf.compare_screen import PerfCompareScreen

        await wait_for(pilot, lambda: isinstance(app.screen, PerfCompareScreen) and app.screen.comparison)
        screen = app.screen
        cmp = screen.comparison
        assert (cmp.a.name, cmp.b.name) == ("b1", "b8")
        assert "b8" in str(screen.query_one("#cmp-sides").render())
        ops = screen.query_one("#cmp-ops", DivergingBarChart)
        conv = next(g for g in cmp.groups if g.name == "Conv")
        i = ops.labels.index("Conv")
        assert ops.a[i] == pytest.approx(conv.a_ms) and ops.b[i] == pytest.approx(conv.b_ms)
        assert ops.displayed()[i] == pytest.approx(conv.b_ms - conv.a_ms)
        await pilot.press("l")
        table = screen.query_one("#cmp-table", FilterableTable)
        await wait_for(pilot, lambda: len(table.rows_shown()) == len(a.nodes))
        # the per-node times every screen shows (scaled to the median): each column adds up to its latency
        assert sum(r["a_ms"] or 0 for r in table.all_rows) == pytest.approx(a.latency_ms.median)
        assert sum(r["b_ms"] or 0 for r in table.all_rows) == pytest.approx(b.latency_ms.median)
        # the table is sorted by B/A, largest first (S reverses)
        ratios = [r["ratio"] for r in table.rows_shown() if r["ratio"] is not None]
        assert ratios == sorted(ratios, reverse=True)
        await pilot.press("b")  # B: the INT8 times of b8
        await wait_for(pilot, lambda: screen.comparison.b.view == "int8")
        assert screen.comparison.b.label == "b8 INT8"
        await pilot.press("x")  # swap
        await wait_for(pilot, lambda: screen.comparison.a.name == "b8" and screen.comparison.a.view == "int8")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, PerfCompareScreen))
        assert ws.ui_thread_calls == []


async def test_one_profile_compares_fp32_with_int8_and_flops_says_what_to_do(ws, demo_model):
    from sparsify_tui.tui.perf.compare_screen import PerfCompareScreen

    pid, ids, a, _ = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_comparison(pilot, ("home", "down", "equals_sign"))
        assert (screen.comparison.a.label, screen.comparison.b.label) == ("b1", "b1 INT8")
        assert screen.comparison.totals["b_ms"] == pytest.approx(a.int8_ms)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, PerfCompareScreen) and app.focused is not None)
        await pilot.press("up", "space")  # FLOPS cannot be marked
        section = app.query_one("#perf")
        assert section.marked == []


async def test_optimizations_side_by_side(ws, demo_model):
    from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen
    from sparsify_tui.tui.widgets.tables import FilterableTable

    pid, *_ = seed(ws, demo_model)
    ws = checked(ws)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_optimization_comparison(pilot)
        assert screen.comparison.names == ["opt", "opt v2"]  # the newest and the one it was copied from
        await wait_for(pilot, lambda: screen.query_one("#ocmp-settings", FilterableTable).all_rows)
        rows = {r["label"]: r for r in screen.query_one("#ocmp-settings", FilterableTable).all_rows}
        assert rows["sparsity"]["diff"] == "*" and (rows["sparsity"]["v0"], rows["sparsity"]["v1"]) == ("0.85", "0.6")
        await pilot.press("l")
        layers = screen.query_one("#ocmp-layers", FilterableTable)
        await wait_for(pilot, lambda: layers.all_rows)
        assert layers.all_rows[0]["diff"] == "*"
        await pilot.press("less_than_sign")  # `<` twice from Layers: Settings, then Measured (it wraps)
        await pilot.press("less_than_sign")
        assert "Applied: not yet" in str(screen.query_one("#ocmp-measured").render())
        await pilot.press("p", "down", "space")  # uncheck one: nothing to compare
        await wait_for(pilot, lambda: "two or more" in str(screen.query_one("#ocmp-status").render()))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, OptimizationCompareScreen))
        assert ws.ui_thread_calls == []


async def test_checking_a_third_optimization_adds_its_column(ws, demo_model):
    """Checking one more optimization in the comparison rebuilds its tables with a column more: the app stayed up
    (it died with DuplicateIds 'ocmp-settings': the new table was mounted before the old one was removed)."""
    from sparsify_tui.services.optimizations import create_optimization
    from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen
    from sparsify_tui.tui.widgets.tables import FilterableTable

    pid, *_ = seed(ws, demo_model)
    create_optimization(ws, pid, "third", sparsity=0.5)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_optimization_comparison(pilot)
        assert len(screen.comparison.names) == 2
        unchecked = next(i for i, r in enumerate(screen.records) if r.id not in screen.checked())
        await pilot.press("p", "home", *["down"] * unchecked, "space")
        await wait_for(pilot, lambda: len(screen.comparison.names) == 3)
        table = screen.query_one("#ocmp-settings", FilterableTable)
        await wait_for(pilot, lambda: table.all_rows and "v2" in table.all_rows[0])
        assert len(screen.query("#ocmp-settings")) == 1 and len(screen.query("#ocmp-layers")) == 1
        assert app.is_running and isinstance(app.screen, OptimizationCompareScreen)


async def test_report_dialog_writes_the_report(ws, demo_model, tmp_path):
    from sparsify_tui.tui.report import ReportDialog

    pid, *_ = seed(ws, demo_model)
    app = make_app(ws, pid)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf")
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportDialog)
                       and app.screen.query_one("#report-path").value.endswith("demo.html"))
        dialog = app.screen
        default = dialog.query_one("#report-path").value
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: dialog.result is not None)
        html = open(default, encoding="utf-8").read()
        assert "<svg" in html and "sparsify-tui report: demo" in html
        dialog.query_one("#report-path").value = str(tmp_path / "nope" / "r.md")
        dialog.query_one("#report-format").value = "md"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "does not exist" in str(dialog.query_one("#error").render()))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ReportDialog))


def test_snapshot_perf_comparison(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, *_ = seed(ws, demo_model)

    async def setup(pilot):
        await open_comparison(pilot)
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=setup)


def test_snapshot_optimization_comparison(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, *_ = seed(ws, demo_model)

    async def setup(pilot):
        await open_optimization_comparison(pilot)
        await pilot.press("l")
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=SIZE, run_before=setup)
