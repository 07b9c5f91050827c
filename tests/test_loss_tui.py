"""Loss Profiles section through Pilot: list (+ Approximated), profile page from a seeded stored result
(summary with the metric, sensitivity chart per level and INT8, params chart, table), add → real job,
rerun, delete; snapshots at 80x24."""

from __future__ import annotations


import pytest
from conftest import steady, wait_for

from sparsify_tui.profiling.loss import LossLayer, LossProfile, level_key
from sparsify_tui.services.profiles import store_loss_profile as store_profile
from sparsify_tui.services.projects import create_project

DEMO_DIMS = {"x:2": 48, "x:3": 192}
LEVELS = [0.0, 0.5, 0.9, 0.95]


def seeded_profile() -> LossProfile:
    layers = []
    for i in range(6):
        sens = {level_key(s): round((i + 1) * s * s / 10, 6) for s in LEVELS}
        layers.append(LossLayer(id=f"conv_{i}", weight_name=f"w{i}", op_type="Conv", params=100 * (i + 1) + 4,
                                prunable_params=100 * (i + 1), sparsity=0.0, sensitivity=sens,
                                int8_sensitivity=0.001 * (6 - i), depthwise=i == 2, first=i == 0))
    return LossProfile(name="seeded", method="one-shot",
                       settings={"levels": LEVELS, "batches": 2, "data": None, "int8": True, "metric": "auto",
                                 "batch_size": 1, "dims": DEMO_DIMS},
                       metric="kl", levels=LEVELS, total_params=2500, prunable_params=2100, layers=layers,
                       seconds=1.5)


def seed(ws, demo_model):
    project = create_project(ws, str(demo_model), name="demo", dims=DEMO_DIMS)
    pid = project["id"]
    summary = store_profile(ws, pid, seeded_profile())
    return pid, summary["record_id"]


def make_app(ws, pid):
    from sparsify_tui.tui.app import SparsifyApp

    return SparsifyApp(project=pid, workspace=ws)


async def open_section(pilot, n_profiles=1):
    await pilot.pause()
    await pilot.press("3")
    await wait_for(pilot, lambda: pilot.app.query("LossSection")
                   and len(pilot.app.query_one("LossSection").records) >= n_profiles)
    return pilot.app.query_one("LossSection")


async def select(pilot, sec, rid):
    from sparsify_tui.tui.loss.section import LossProfileView

    options = sec.option_list  # picked in the list, as a user does (enter on it)
    options.highlighted = options.get_option_index(rid)
    options.action_select()
    await wait_for(pilot, lambda: sec.query(LossProfileView) and sec.query_one(LossProfileView).profile is not None
                   and sec.query_one(LossProfileView).ref == rid)
    return sec.query_one(LossProfileView)


def test_profile_page_summary_charts_table(workspace_home, demo_model):
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.widgets.tables import FilterableTable

    ws = Workspace()
    pid, rid = seed(ws, demo_model)

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            ids = [o.id for o in sec.query_one("#loss-list").options]
            assert ids == ["approximated", rid]
            # the Approximated profile is shown first, built from the stored analysis
            view = await select(pilot, sec, "approximated")
            assert view.profile.method == "approximated" and len(view.profile.layers) == 54
            view = await select(pilot, sec, rid)
            text = str(view.query_one("#loss-summary").render())
            assert "KL divergence" in text and "one-shot" in text and "seeded" in text
            # sensitivity chart at the default level (0.9), then ] to 0.95, [ back twice to 0.5
            await pilot.press("g")
            chart = view.query_one("#sens-chart")
            assert chart.values == pytest.approx([x.value_at(0.9) for x in seeded_profile().layers])
            await pilot.press("right_square_bracket")
            assert view.level == 0.95 and chart.values[-1] == pytest.approx(6 * 0.95 ** 2 / 10)
            await pilot.press("left_square_bracket", "left_square_bracket")
            assert view.level == 0.5
            assert "KL divergence" in str(view.query_one("#sens-hint").render())
            await pilot.press("y")  # pruning -> INT8 sensitivity
            assert chart.values == pytest.approx([0.001 * (6 - i) for i in range(6)])
            assert "INT8" in chart.title
            await pilot.press("greater_than_sign")  # the next tab: Params
            assert view.current_tab() == "params"
            assert view.query_one("#params-chart").values == [100 * (i + 1) + 4 for i in range(6)]
            await pilot.press("l")
            table = view.query_one("#loss-table", FilterableTable)
            rows = table.all_rows
            assert len(rows) == 6 and rows[3]["s0.95"] == pytest.approx(4 * 0.95 ** 2 / 10)
            assert [c.key for c in table.columns if c.key.startswith("s0") or c.key == "s0"] == \
                ["s0", "s0.5", "s0.9", "s0.95"]
            # enter on a row: the layer's full record, node name and weight name together
            from sparsify_tui.tui.widgets.dialogs import RecordDialog

            await pilot.press("down", "enter")
            await wait_for(pilot, lambda: isinstance(pilot.app.screen, RecordDialog))
            record = pilot.app.screen.text()
            assert "Node id: conv_1" in record and "Weight: w1" in record and "Sensitivity @0.95: " in record
            await pilot.press("escape")

    import asyncio

    asyncio.run(run())


def test_add_rerun_delete_with_a_real_job(workspace_home, demo_model):
    from sparsify_tui.store import Workspace
    from sparsify_tui.tui.loss.dialogs import LossProfileDialog
    from textual.widgets import Input, Select

    ws = Workspace()
    pid, rid = seed(ws, demo_model)

    async def run():
        async with make_app(ws, pid).run_test(size=(80, 24)) as pilot:
            sec = await open_section(pilot)
            sec.focus_default()
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(pilot.app.screen, LossProfileDialog))
            dlg = pilot.app.screen
            assert dlg.query_one("#name", Input).value == "baseline"  # free: the seeded one is "seeded"
            dlg.query_one("#name", Input).value = "quick"
            dlg.query_one("#method", Select).value = "magnitude"
            dlg.query_one("#levels", Input).value = "0.5,0.9"
            # a bad level list stays in the dialog with a one-line error
            dlg.query_one("#levels", Input).value = "0.5,2"
            await pilot.press("ctrl+r")
            assert isinstance(pilot.app.screen, LossProfileDialog)
            assert "levels" in str(dlg.query_one("#error").render())
            dlg.query_one("#levels", Input).value = "0.5,0.9"
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: any(r.get("name") == "quick" for r in sec.records), 90)
            new = next(r for r in sec.records if r.get("name") == "quick")
            assert new["method"] == "magnitude" and new["settings"]["levels"] == [0.5, 0.9]
            # rerun the new profile, after a confirmation titled "Rerun quick": its numbers are replaced
            from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

            await wait_for(pilot, lambda: sec.selected == new["id"])
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog))
            assert pilot.app.screen.dialog_title == "Rerun quick"
            await pilot.press("y")
            await wait_for(pilot, lambda: any(r["id"] == new["id"] and r.get("modified") != new.get("modified")
                                              for r in sec.records), 90)
            assert sum(r.get("name") == "quick" for r in sec.records) == 1  # not a second "quick"
            # delete the seeded one after confirming
            await select(pilot, sec, rid)
            sec.focus_default()
            await pilot.press("delete")
            await pilot.pause(0.2)
            await pilot.press("y")  # ConfirmDialog: y = delete
            await wait_for(pilot, lambda: all(str(r["id"]) != rid for r in sec.records))
            assert all(str(r["id"]) != rid for r in ws.list_records(pid, "loss_profiles"))

    import asyncio

    asyncio.run(run())


def test_snapshot_loss_summary(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, rid = seed(ws, demo_model)

    async def setup(pilot):
        sec = await open_section(pilot)
        await select(pilot, sec, rid)
        sec.focus_default()  # where the section puts focus when it opens, however late the open finished
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_loss_sensitivity_chart(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, rid = seed(ws, demo_model)

    async def setup(pilot):
        sec = await open_section(pilot)
        await select(pilot, sec, rid)
        await pilot.press("g")
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)


def test_snapshot_loss_add_dialog(workspace_home, demo_model, snap_compare):
    from sparsify_tui.store import Workspace

    ws = Workspace()
    pid, _ = seed(ws, demo_model)

    async def setup(pilot):
        sec = await open_section(pilot)
        sec.focus_default()
        await pilot.press("n")
        await wait_for(pilot, lambda: pilot.app.screen.query("#name"))
        await steady(pilot)

    assert snap_compare(make_app(ws, pid), terminal_size=(80, 24), run_before=setup)
