"""The JobProgress widget following real job processes through Pilot."""

from __future__ import annotations

import time

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Label, ProgressBar

from sparsify_tui import jobs
from sparsify_tui.jobs.runner import MeasureLock
from sparsify_tui.store import Workspace
from sparsify_tui.tui.widgets.jobs import JobProgress


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Workspace:
    monkeypatch.setenv("SPARSIFY_TUI_MEASURE_LOCK", str(tmp_path / "measure.lock"))
    return Workspace(tmp_path / "ws")


class JobApp(App):
    def __init__(self, ws: Workspace, job_id: str) -> None:
        super().__init__()
        self.workspace = ws
        self.job_id = job_id
        self.finished = []

    def compose(self) -> ComposeResult:
        yield JobProgress(self.job_id, poll_interval_s=0.1)

    def on_job_progress_finished(self, event: JobProgress.Finished) -> None:
        self.finished.append(event)


async def _until(pilot, cond, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not reached before the timeout")


def _status(app) -> str:
    return str(app.query_one("#job-status", Label).render())


async def test_widget_follows_job_to_completion(ws):
    job = jobs.submit(ws, None, "sleep", {"steps": 6, "step_s": 0.2})
    app = JobApp(ws, job["id"])
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: "step" in _status(app) and "%" in _status(app))
        await _until(pilot, lambda: app.finished)
        event = app.finished[0]
        assert event.status == "completed" and event.job["result"]["steps"] == 6
        assert app.query_one(ProgressBar).percentage == 1.0
        assert _status(app) == "completed"


async def test_widget_shows_queue_and_cancels(ws):
    """The widget shows the queue; cancel() stops the job (the `c` key is the section's, see test_tui_jobs)."""
    lock = MeasureLock()
    assert lock.try_acquire("blocker 1 elsewhere\n")
    try:
        job = jobs.submit(ws, None, "sleep", {"steps": 1000, "step_s": 0.1})
        app = JobApp(ws, job["id"])
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(pilot, lambda: _status(app) == "queued behind blocker")
            assert not app.query_one(JobProgress).can_focus  # no invisible tab stop
            app.query_one(JobProgress).cancel()
            await _until(pilot, lambda: app.finished)
            assert app.finished[0].status == "canceled"
            assert jobs.get_job(ws, job["id"])["status"] == "canceled"
    finally:
        lock.release()
