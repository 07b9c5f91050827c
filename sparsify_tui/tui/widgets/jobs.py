"""`JobProgress`: follows a background job (sparsify_tui.jobs) and shows its step, progress, ETA and status.

The job runs in its own process; this widget only watches it. A one-shot thread worker reads the job
from the workspace (never blocking the event loop) and posts it as :class:`JobProgress.Updated`; the next
read is scheduled with ``set_timer``, at most ``1 / poll_interval_s`` times a second (4 Hz by default,
never faster than 10 Hz), which is kind to slow SSH links. :meth:`JobProgress.cancel` asks the job to stop
(the widget takes no focus: the section or dialog showing it binds `c`). When the job ends (completed,
canceled or error) the widget posts :class:`JobProgress.Finished` and stops polling.

:class:`SectionJobs` is the pane under a section's list: one JobProgress per running or queued job of the
section's job types (found by polling, so jobs started by the CLI or another TUI appear too, and jobs still
running when the TUI is opened again); a finished job's line stays until the next one starts (an error
keeps its message). A section binds ``c`` to :meth:`SectionJobs.cancel_newest` while
:attr:`SectionJobs.active` is not empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import ProgressBar

from sparsify_tui.tui.widgets.labels import FittedLabel

from sparsify_tui.tui.workers import app_work, post_result

FINAL = ("completed", "canceled", "error")


def job_title(job: Dict[str, Any]) -> str:
    """``perf profile 'baseline'``, ``apply 'pruned 0.85'``: what the job works on, by name (the title stored with
    the job: :func:`sparsify_tui.jobs.registry.describe`; a job recorded before titles existed: its kind and name)."""
    if job.get("title"):
        return str(job["title"])
    from sparsify_tui.jobs.registry import JOB_KINDS

    kind = JOB_KINDS.get(str(job.get("type")), str(job.get("type") or "job").replace("_", " "))
    name = (job.get("args") or {}).get("name")
    return f"{kind} {name!r}" if name else kind


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


class JobProgress(Widget):
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
    JobProgress > FittedLabel { width: 100%; }  /* wraps at words in a narrow list pane; a long word is elided */
    JobProgress > #job-title { text-style: bold; }
    JobProgress > #job-bar { width: 1fr; }
    JobProgress.-error > #job-status { color: $error; }
    JobProgress.-completed > #job-status { color: $success; }
    """

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
        yield FittedLabel(f"job {self.job_id}", id="job-title")
        yield ProgressBar(total=100, show_eta=False, id="job-bar")
        yield FittedLabel("loading…", id="job-status")

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
        if job_id != self.job_id or self._finished or not self.is_mounted or not self.query("#job-title"):
            return  # a poll's answer after the widget was replaced or is being removed (its children gone)
        self.job = job
        self.query_one("#job-title", FittedLabel).set_text(f"{job_title(job)} · {job_id}")
        bar = self.query_one("#job-bar", ProgressBar)
        fraction = float((job.get("progress") or {}).get("fraction") or 0.0)
        if job.get("status") == "completed":
            fraction = 1.0
        bar.update(total=100, progress=round(100 * fraction, 1))
        self.query_one("#job-status", FittedLabel).set_text(job_status_text(job))
        status = job.get("status")
        if status in FINAL:
            self._finished = True
            self.set_class(status == "error", "-error")
            self.set_class(status == "completed", "-completed")
            self.post_message(self.Finished(self, job))
        else:
            self.set_timer(self.poll_interval_s, self._poll)

    @property
    def finished(self) -> bool:
        """The followed job has ended (completed, canceled or error)."""
        return self._finished

    def cancel(self) -> None:
        """Ask the job to stop (it does within about a second); the status line says so meanwhile."""
        if self._finished:
            self.notify("The job has already ended", severity="warning")
            return
        self.query_one("#job-status", FittedLabel).set_text("cancel requested…")
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


class SectionJobs(Vertical):
    """The running and queued jobs of ``job_types`` in one project, one :class:`JobProgress` each (module
    docstring). ``section``: the app section it belongs to (it polls only while that section is shown)."""

    DEFAULT_CSS = """
    SectionJobs { height: auto; max-height: 9; }
    SectionJobs > JobProgress { height: auto; }
    """

    POLL_SECONDS = 3.0

    @dataclass
    class Listed(Message, bubble=False):
        """The project's jobs of the pane's types that are pending or running (posted by its poll)."""

        jobs: list

    def __init__(self, project_id: str, job_types: tuple, *, section: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.job_types = tuple(job_types)
        self.section = section
        self.widgets: Dict[str, JobProgress] = {}

    def on_mount(self) -> None:
        self.refresh_jobs()
        self.set_interval(self.POLL_SECONDS, self._poll)

    def _poll(self) -> None:
        if getattr(self.app, "section", None) == self.section:
            self.refresh_jobs()

    def refresh_jobs(self) -> None:
        """Look for jobs started elsewhere (the CLI, another TUI, before a restart)."""
        self._list()

    @app_work(group="section-jobs", description="list running jobs")
    def _list(self) -> None:
        from sparsify_tui.jobs import ACTIVE, list_jobs

        jobs = [j for j in list_jobs(self.app.workspace, self.project_id)
                if j.get("type") in self.job_types and j.get("status") in ACTIVE]
        post_result(self, self.Listed(jobs))

    def on_section_jobs_listed(self, message: "SectionJobs.Listed") -> None:
        for job in message.jobs:
            self.follow(job)

    def follow(self, job: Dict[str, Any]) -> JobProgress:
        """Show job ``job`` (a job dict; at once after a submit). Lines of finished jobs make room."""
        if job["id"] in self.widgets:
            return self.widgets[job["id"]]
        for jid, widget in list(self.widgets.items()):
            if widget.finished:
                widget.remove()
                del self.widgets[jid]
        widget = JobProgress(job["id"], id=f"job-{job['id']}")
        self.widgets[job["id"]] = widget
        self.mount(widget)
        self.app.refresh_bindings()  # `c` Cancel appears in the footer
        return widget

    def on_job_progress_finished(self, event: JobProgress.Finished) -> None:
        # bubbles on to the section, which reloads its list; the footer loses `c` when nothing runs
        self.app.refresh_bindings()

    @property
    def active(self) -> list:
        """The JobProgress widgets of jobs still running or queued, oldest first."""
        return [w for w in self.widgets.values() if not w.finished]

    def cancel_newest(self) -> None:
        """`c`: cancel the only running job after a confirmation; with several, open the Jobs view to choose."""
        active = self.active
        if not active:
            self.notify("No job of this section is running.", severity="warning")
            return
        if len(active) > 1:
            self.app.action_jobs()
            return
        widget = active[0]
        title = job_title(widget.job or {"id": widget.job_id})

        def answer(yes: Optional[bool]) -> None:
            if yes and not widget.finished:
                widget.cancel()

        from sparsify_tui.tui.widgets.dialogs import ConfirmDialog

        self.app.push_screen(ConfirmDialog(f"Cancel the {title} job ({widget.job_id})? It stops within about a "
                                           "second; nothing it measured is kept.", confirm_label="Cancel job",
                                           title="Cancel job"), answer)
