"""Issue 30 deliverable 8: 80x24. A key hides the list pane (the view gets its width: the accuracy column in
Benchmarks, both value columns of the optimization comparison); an override is marked in the Sparsity column; a layer
has one name (its node id, as in Performance and Loss; its weight in its record); a table sorts by a column picked
by the key that names it; the Jobs view says how long each job took."""

from __future__ import annotations

from conftest import wait_for, wait_project_open

from sparsify_tui.services import optimizations
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp

DEMO_DIMS = {"x:2": 48, "x:3": 192}
SIZE = (80, 24)


async def test_z_hides_the_list_pane_and_p_shows_it(workspace_home, demo_model, monkeypatch):
    from seeded_workspace import seed_demo


    monkeypatch.setattr(SparsifyApp, "WATCH_SECONDS", 600.0)
    ws = Workspace()
    pid = seed_demo(ws, demo_model)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("5")
        sec = app.query_one("#benchmarks")
        await wait_for(pilot, lambda: sec.result is not None)
        await pilot.pause(0.5)
        pane = sec.query_one("#bench-left")
        view_width = lambda: sec.query_one("#bench-left").parent.size.width - pane.outer_size.width  # noqa: E731
        before = view_width()
        await pilot.press("z")
        await wait_for(pilot, lambda: pane.region.width == 0)
        assert app.focused is not None and not any(a.has_class("list-pane") for a in app.focused.ancestors_with_self)
        # the pane's width went to the view (Benchmarks' accuracy column was hidden at 80 columns)
        await pilot.press("4")
        await wait_for(pilot, lambda: app.section == "optimization")
        assert app.query_one("#opt-left").region.width == 0  # every section: one key, one setting
        await pilot.press("5", "p")  # p shows the list again, focused
        await wait_for(pilot, lambda: pane.region.width > 0 and app.focused is not None
                       and pane in app.focused.ancestors)
        assert view_width() == before


async def test_a_layer_is_named_by_its_node_id_and_an_override_is_marked(workspace_home, demo_model):
    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    rec = optimizations.create_optimization(ws, pid, "o", sparsity=0.7)
    layer = rec.layers[3]
    optimizations.set_override(ws, pid, "o", layer.weight_name, 0.5)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None)
        await pilot.press("l")
        table = sec.query_one("#layer-table")
        await wait_for(pilot, lambda: table.rows_shown())
        assert table.columns[0].label == "Node id" and table.columns[1].label == "Sparsity"
        texts = {r["layer"]: table.columns[1].row_text(r) for r in table.rows_shown()}
        assert texts[layer.weight_name] == "0.500*"  # in the column that is on screen, not the 10th
        assert all(t.endswith(" ") for k, t in texts.items() if k != layer.weight_name)
        names = [r["name"] for r in table.rows_shown()]
        assert layer.node_id in names and layer.weight_name not in names  # the weight is in the record (i)


async def test_s_sorts_by_the_column_whose_key_is_pressed(workspace_home, demo_model):
    from sparsify_tui.tui.widgets.tables import SortMenu

    ws = Workspace()
    pid = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)["id"]
    optimizations.create_optimization(ws, pid, "o", sparsity=0.7)
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_project_open(pilot)
        await pilot.press("4")
        sec = app.query_one("#optimization")
        await wait_for(pilot, lambda: sec.rec is not None)
        await pilot.press("l")
        table = sec.query_one("#layer-table")
        await wait_for(pilot, lambda: table.rows_shown())
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SortMenu))
        labels = [str(app.screen.query_one("#sort-columns").get_option_at_index(i).prompt)
                  for i in range(len(table.columns))]
        assert labels[1].startswith("2  Sparsity")
        await pilot.press("2")  # one key: sorted by sparsity, largest first (it took a press of s per column)
        await wait_for(pilot, lambda: table.sort_key == "sparsity")
        values = [r["sparsity"] for r in table.rows_shown()]
        assert values == sorted(values, reverse=True)
        await pilot.press("s", "2")  # the column sorted already: reversed
        await wait_for(pilot, lambda: not table.sort_reverse)
        assert [r["sparsity"] for r in table.rows_shown()] == sorted(values)


def test_the_jobs_view_says_how_long_each_job_took():
    from sparsify_tui.tui.jobs.screen import job_rows

    rows = job_rows([{"id": "a", "type": "perf_profile", "status": "completed", "created": "2026-01-01T00:00:00+00:00",
                      "started": "2026-01-01T00:00:01+00:00", "finished": "2026-01-01T00:02:05+00:00"},
                     {"id": "b", "type": "perf_profile", "status": "pending", "created": "2026-01-01T00:00:00+00:00"}],
                    {})
    from sparsify_tui.tui.jobs.screen import duration_text

    took = {r["id"]: duration_text(r["duration"]) for r in rows}
    assert took == {"a": "2 min 04 s", "b": ""}
