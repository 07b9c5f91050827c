"""`JobProgress`: follows a background job (sparsify_tui.jobs) and shows its step, progress, ETA and status.

The job runs in its own process; this widget only watches it. A one-shot thread worker reads the job
from the workspace (never blocking the event loop) and posts it as :class:`JobProgress.Updated`; the next
read is scheduled with ``set_timer``, at most ``1 / poll_interval_s`` times a second (4 Hz by default,
never faster than 10 Hz), which is kind to slow SSH links. Key ``c`` cancels the job. When the job ends
(completed, canceled or error) the widget posts :class:`JobProgress.Finished` and stops polling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Label, ProgressBar

from sparsify_tui.tui.workers import app_work, post_result

FINAL = ("completed", "canceled", "error")


def job_status_text(job: Dict[str, Any]) -> str:
    """One line for a job: ``timing · 42% · ETA 12 s``, ``queued behind ab12cd``, ``error: ...``."""
    status = job.get("status")
    prog = job.get("progress") or {}
    if status == "pending":
        if job.get("queued_behind"):
            return f"queued behind {job['queued_behind']}"
        return "cancel requested" if job.get("cancel_requested") else "starting"
    if status == "running":
        parts = [str(prog.get("step") or "running"), f"{100 * float(prog.get('fraction') or 0):.0f}%"]
        if prog.get("eta_s") is not None:
            parts.append(f"ETA {_fmt_eta(float(prog['eta_s']))}")
        if job.get("cancel_requested"):
            parts.append("cancel requested")
        return " · ".join(parts)
    if status == "error":
        return f"error: {job.get('error') or 'unknown error'}"
    return str(status or "unknown")


def _fmt_eta(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class JobProgress(Widget, can_focus=True):
    """Shows one job: title, a ProgressBar, and a status line (step, %, ETA, "queued behind <id>", errors).

    ``job_id``: the job to follow; ``workspace``: a :class:`sparsify_tui.store.Workspace` (default
    ``app.workspace``, else the default workspace); ``poll_interval_s``: seconds between reads
    (clamped to >= 0.1, so at most 10 Hz).
    """

    DEFAULT_CSS = """
    JobProgress {
        height: auto;
        padding: 0 1;
    }
    JobProgress > #job-title { text-style: bold; }
    JobProgress > #job-bar { width: 1fr; }
    JobProgress.-error > #job-status { color: $error; }
    JobProgress.-completed > #job-status { color: $success; }
    """

    BINDINGS = [
        Binding("c", "cancel_job", "Cancel job", id="job.cancel",
                tooltip="Cancel the running job (it stops within about a second)"),
    ]

    class Finished(Message):
        """The followed job ended. ``job``: the final job dict; ``status``: completed, canceled or error."""

        def __init__(self, widget: "JobProgress", job: Dict[str, Any]) -> None:
            super().__init__()
            self.widget = widget
            self.job = job
            self.job_id = job.get("id")
            self.status = job.get("status")

        @property
        def control(self) -> "JobProgress":
            return self.widget

    @dataclass
    class Updated(Message, bubble=False):
        """A fresh read of job `job_id` (posted to the widget by its poll worker). A newer one for the
        same job replaces a pending one: one redraw however fast they come."""

        job_id: str
        job: Dict[str, Any]

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, JobProgress.Updated) and message.job_id == self.job_id

    @dataclass
    class CancelFailed(Message, bubble=False):
        """Asking job `job_id` to stop failed (shown as a notification)."""

        job_id: str
        error: BaseException

    def __init__(self, job_id: str, *, workspace: Any = None, poll_interval_s: float = 0.25,
                 name: Optional[str] = None, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.job_id = job_id
        self.job: Optional[Dict[str, Any]] = None
        self._workspace = workspace
        self.poll_interval_s = max(0.1, float(poll_interval_s))
        self._finished = False

    @property
    def workspace(self):
        if self._workspace is None:
            self._workspace = getattr(self.app, "workspace", None)
            if self._workspace is None:
                from sparsify_tui.store import Workspace

                self._workspace = Workspace()
        return self._workspace

    def compose(self) -> ComposeResult:
        yield Label(f"job {self.job_id}", id="job-title")
        yield ProgressBar(total=100, show_eta=False, id="job-bar")
        yield Label("loading…", id="job-status")

    def on_mount(self) -> None:
        self.workspace  # resolve on the event loop, not in the worker thread
        self._poll()

    def follow(self, job_id: str) -> None:
        """Follow another job from now on."""
        self.job_id, self.job, self._finished = job_id, None, False
        self.remove_class("-error", "-completed")
        self._poll()

    @app_work(group="job-progress-poll", description="read job progress")
    def _poll(self) -> None:
        from sparsify_tui.errors import SparsifyError
        from sparsify_tui.jobs import get_job

        job_id = self.job_id
        try:
            job = get_job(self.workspace, job_id)
        except SparsifyError as err:
            job = {"id": job_id, "status": "error", "error": str(err), "progress": {}}
        except Exception as err:  # unreadable workspace: show it, keep the app up
            job = {"id": job_id, "status": "error", "error": f"{type(err).__name__}: {err}", "progress": {}}
        post_result(self, self.Updated(job_id, job))

    def on_job_progress_updated(self, message: "JobProgress.Updated") -> None:
        self._show(message.job_id, message.job)

    def _show(self, job_id: str, job: Dict[str, Any]) -> None:
        if job_id != self.job_id or self._finished or not self.is_mounted:
            return
        self.job = job
        self.query_one("#job-title", Label).update(f"{job.get('type') or 'job'} {job_id}")
        bar = self.query_one("#job-bar", ProgressBar)
        fraction = float((job.get("progress") or {}).get("fraction") or 0.0)
        if job.get("status") == "completed":
            fraction = 1.0
        bar.update(total=100, progress=round(100 * fraction, 1))
        self.query_one("#job-status", Label).update(job_status_text(job))
        status = job.get("status")
        if status in FINAL:
            self._finished = True
            self.set_class(status == "error", "-error")
            self.set_class(status == "completed", "-completed")
            self.post_message(self.Finished(self, job))
        else:
            self.set_timer(self.poll_interval_s, self._poll)

    def action_cancel_job(self) -> None:
        if self._finished:
            self.notify("The job has already ended", severity="warning")
            return
        self.query_one("#job-status", Label).update("cancel requested…")
        self._cancel()

    @app_work(group="job-progress-cancel", description="cancel job", exclusive=False)
    def _cancel(self) -> None:
        from sparsify_tui.jobs import cancel

        try:
            cancel(self.workspace, self.job_id)
        except Exception as err:  # noqa: BLE001 - a notification, the widget keeps following the job
            post_result(self, self.CancelFailed(self.job_id, err))

    def on_job_progress_cancel_failed(self, message: "JobProgress.CancelFailed") -> None:
        self.notify(f"cancel failed: {message.error}", severity="error")
