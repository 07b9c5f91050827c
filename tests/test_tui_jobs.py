"""Jobs you can find (issue 15 items 10-12) through Pilot, with real job processes: a perf profile queued
behind the measuring lock shows under the Performance list (also when the TUI is opened after it started),
`c` on the section cancels it after a confirmation (and shows in the footer only while a job runs), and the
Jobs view (`j`, or the palette) lists every job of every project with its status, progress and log; a canceled
job stays listed."""

from __future__ import annotations


import pytest

from sparsify_tui import jobs
from sparsify_tui.jobs.runner import MeasureLock
from sparsify_tui.services.projects import create_project
from sparsify_tui.store import Workspace
from sparsify_tui.tui.app import SparsifyApp
from sparsify_tui.tui.jobs import JobsScreen
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.jobs import JobProgress, SectionJobs
from conftest import wait_for

SIZE = (80, 24)
DEMO_DIMS = {"x:2": 48, "x:3": 192}


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    monkeypatch.setenv("SPARSIFY_TUI_HOME", str(tmp_path / "ws"))
    return Workspace()


@pytest.fixture
def blocker():
    """The machine-wide measuring lock, held by 'another job': perf profiles queue behind it."""
    lock = MeasureLock()
    assert lock.try_acquire("blocker 1 elsewhere\n")
    yield lock
    lock.release()


def footer_texts(app) -> list[str]:
    """The footer's entries (``["n New", "c Cancel", ...]``, split at the key of each)."""
    from sparsify_tui.tui.widgets.footer import footer_entries

    return [e.text for e in footer_entries(app, app.screen.active_bindings)
            if e.text in app.screen.query_one("KeysFooter").text]


async def test_a_queued_perf_profile_shows_in_its_section_and_c_cancels_it(ws, demo_model, blocker):
    pid = create_project(ws, str(demo_model), "demo", dims=DEMO_DIMS)["id"]
    # started before the TUI opens (from the CLI, or a TUI that was closed): found by the section's poll
    job = jobs.submit(ws, pid, "perf_profile", {"name": "queued one"})
    app = SparsifyApp(project=pid, workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.section == "perf" and app.query("#perf-jobs JobProgress"))
        line = app.query_one("#perf-jobs JobProgress", JobProgress)
        await wait_for(pilot, lambda: "queued behind blocker" in str(line.query_one("#job-status").render()))
        assert "perf profile 'queued one'" in str(line.query_one("#job-title").render())
        assert not line.can_focus  # no invisible tab stop: `c` is the section's key
        app.query_one("#perf").focus_default()
        await pilot.pause(0.2)
        assert any("Cancel" in t for t in footer_texts(app))  # shown while a job of the section runs
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert "perf profile 'queued one'" in app.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: jobs.get_job(ws, job["id"])["status"] == "canceled")
        await wait_for(pilot, lambda: not app.query_one(SectionJobs).active)
        await pilot.pause(0.3)
        assert not any("Cancel" in t for t in footer_texts(app))
        # the canceled job leaves a trace: the Jobs view lists it
        await pilot.press("j")
        await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen) and app.screen.jobs)
        row = app.screen.query_one("#jobs-table").all_rows[0]
        assert row["status"] == "canceled" and row["project"] == "demo" and row["what"] == "perf profile 'queued one'"


async def test_jobs_view_lists_every_project_with_progress_log_and_cancel(ws, demo_model, blocker):
    a = create_project(ws, str(demo_model), "first", dims=DEMO_DIMS)["id"]
    b = create_project(ws, str(demo_model), "second", dims={"x:2": 32, "x:3": 100})["id"]
    queued = jobs.submit(ws, a, "perf_profile", {"name": "waits"})
    running = jobs.submit(ws, b, "sleep", {"steps": 400, "step_s": 0.05}, measuring=False)
    app = SparsifyApp(workspace=ws)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.focused is not None)
        # the palette offers the Jobs view too
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"Jobs")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, JobsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: {r["id"]: r for r in screen.query_one("#jobs-table").all_rows}
                       .get(running["id"], {}).get("status") == "running")
        rows = {r["id"]: r for r in screen.query_one("#jobs-table").all_rows}
        assert rows[queued["id"]]["status"] == "queued" and "queued behind blocker" in rows[queued["id"]]["progress"]
        assert rows[queued["id"]]["project"] == "first" and rows[running["id"]]["project"] == "second"
        assert "%" in rows[running["id"]]["progress"]
        # the newest (the running sleep job) is selected: its details and log are under the table
        await wait_for(pilot, lambda: screen.current_job()["id"] == running["id"])
        await wait_for(pilot, lambda: f"job {running['id']}" in str(screen.query_one("#job-detail").render()))
        await pilot.press("l")  # hides the log pane, l again shows it
        assert screen.query_one("#job-detail-scroll").has_class("-hidden")
        await pilot.press("l")
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_for(pilot, lambda: jobs.get_job(ws, running["id"])["status"] == "canceled")
        await wait_for(pilot, lambda: {r["id"]: r for r in screen.query_one("#jobs-table").all_rows}
                       [running["id"]]["status"] == "canceled")
        # enter opens the selected job's project in the section of its results
        table = screen.query_one("#jobs-table")
        table.data_table.move_cursor(row=[r["id"] for r in table.rows_shown()].index(queued["id"]))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.project_id == a and app.section == "perf")
    jobs.cancel(ws, queued["id"])
