"""The Projects screen (issue 15 item 19) and the palette's actions (item 21) through Pilot: it follows the
workspace (a project made by the CLI or another TUI appears without a key) and shows each project's profiles and
running jobs; the command palette runs section actions such as a new loss profile."""

from __future__ import annotations


from sparsify_tui.jobs import run_here
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from conftest import wait_for

DEMO_DIMS = {"x:2": 48, "x:3": 192}


async def test_projects_follow_the_workspace_with_profiles_and_jobs(workspace_home, demo_model):
    ws = Workspace()
    first = create_project(ws, str(demo_model), "first", dims=DEMO_DIMS)
    app = SparsifyApp(workspace=ws)
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one("#projects-table")
        await wait_for(pilot, lambda: [r["name"] for r in table.rows_shown()] == ["first"])
        assert table.rows_shown()[0]["profiles"] == "-"
        # meanwhile, from "the CLI": a second project, and a loss profile of the first
        create_project(ws, str(demo_model), "second", dims=DEMO_DIMS)
        run_here(ws, first["id"], "loss_profile", {"name": "quick", "method": "magnitude", "levels": [0.5]})
        await wait_for(pilot, lambda: [r["name"] for r in table.rows_shown()] == ["first", "second"])
        await wait_for(pilot, lambda: table.rows_shown()[0]["profiles"] == "1 loss")
        assert table.rows_shown()[0]["jobs"] == ""  # run_here's job completed: nothing running


async def test_the_palette_runs_a_section_action(workspace_home, demo_model):
    from sparsify_tui.tui.loss.dialogs import LossProfileDialog

    ws = Workspace()
    pid = create_project(ws, str(demo_model), "demo", dims=DEMO_DIMS)["id"]
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.focused is not None)
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"New loss profile")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LossProfileDialog))
        assert app.section == "loss"
