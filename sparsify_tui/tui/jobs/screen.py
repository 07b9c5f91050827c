"""The Jobs view (`j` anywhere, or "Jobs" in the command palette): every job of every project, newest first.

Columns: status (queued, starting, running, completed, canceled, error), what the job is, its project,
its progress (step, percent, ETA; "queued behind <job>"; the error message), when it was created, and its
id. Under the table, the selected job's details: its error and the last lines of its log
(``<workspace>/jobs/<id>.log``, the same as ``sparsify-tui job log ID``).

Keys: `c` cancels the selected job (asks first), `l` shows or hides the log pane, `enter` opens the job's
project in its section, `escape` (or `j`) closes the view. The list re-reads the workspace every second
while the view is open (a one-shot worker rescheduled with ``set_timer``); a job whose process vanished
is marked ``error`` with its last log lines by that read (:func:`sparsify_tui.jobs.list_jobs`), and
canceled jobs stay listed.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from sparsify_tui.tui import messages
from sparsify_tui.tui.jobs.messages import JobCancelAsked, JobLogRead, JobsListed
from sparsify_tui.tui.widgets import tables
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.footer import KeysFooter
from sparsify_tui.tui.widgets.jobs import job_status_text, job_title
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.workers import app_work, post_result

POLL_SECONDS = 1.0
LOG_LINES = 6
ACTIVE = ("pending", "running")
#: the section each job type's results appear in
JOB_SECTIONS = {"perf_profile": "perf", "loss_profile": "loss", "benchmark": "benchmarks", "apply": "benchmarks"}


def status_label(job: dict) -> str:
    """One word for the Status column: queued (waiting for the measuring lock), starting, running,
    completed, canceled, error."""
    status = job.get("status") or "?"
    if status == "pending":
        return "queued" if job.get("queued_behind") else "starting"
    return str(status)


def progress_text(job: dict) -> str:
    """The Progress column: step · % · ETA while it runs, "queued behind <id>", the error, or the outcome."""
    status = job.get("status")
    if status in ACTIVE:
        return job_status_text(job)
    if status == "error":
        return f"error: {job.get('error') or 'see its log'}"
    if status == "canceled":
        return "canceled" + (" by the user" if job.get("cancel_requested") else "")
    return "100% · done"


def job_seconds(job: dict, now: Optional[float] = None) -> Optional[float]:
    """How long the job has run (s): from ``started`` to ``finished``, or to ``now`` while it runs; None before it
    started (queued) or without times."""
    import datetime as dt
    import time

    def parse(text) -> Optional[float]:
        try:
            return dt.datetime.fromisoformat(str(text)).timestamp() if text else None
        except ValueError:
            return None

    start = parse(job.get("started"))
    if start is None:
        return None
    end = parse(job.get("finished")) or (now if now is not None else time.time())
    return max(0.0, end - start)


def duration_text(seconds: Optional[float]) -> str:
    """``"12 s"``, ``"3 min 04 s"``, ``"1 h 02 min"`` (the ETA's format); "" for None."""
    from sparsify_tui.tui.widgets.jobs import _fmt_eta

    return "" if seconds is None else _fmt_eta(seconds)


def job_rows(jobs: list, projects: dict) -> list[dict]:
    """Rows of the jobs table, newest first."""
    rows = []
    for job in sorted(jobs, key=lambda j: (str(j.get("created") or ""), str(j.get("id"))), reverse=True):
        rows.append({
            "_key": job["id"], "id": job["id"], "status": status_label(job), "what": job_title(job),
            "project": projects.get(job.get("project_id"), job.get("project_id") or "-"),
            "progress": progress_text(job), "created": job.get("created"), "duration": job_seconds(job),
        })
    return rows


def detail_text(job: Optional[dict], log: str) -> str:
    """The details pane: the job, its state, its error, then the last lines of its log (Rich markup)."""
    if job is None:
        return "[dim]No job selected.[/dim]"
    lines = [f"[b]{escape(job_title(job))}[/b] · job {job['id']} · {status_label(job)}",
             escape(progress_text(job))]
    if job.get("stderr_tail") and job.get("status") == "error":
        lines.append("[dim]stderr:[/dim] " + escape(str(job["stderr_tail"]).strip().splitlines()[-1]))
    lines.append(f"[dim]log (sparsify-tui job log {job['id']}):[/dim]")
    tail = [line for line in (log or "").splitlines() if line.strip()][-LOG_LINES:]
    lines += [escape(line) for line in tail] or ["[dim](empty)[/dim]"]
    return "\n".join(lines)


class JobsScreen(Screen):
    """Every job across projects (module docstring)."""

    CSS_PATH = "jobs.tcss"

    BINDINGS = [
        Binding("escape,j", "close", "Close", id="jobs.close", tooltip="Close the Jobs view"),
        Binding("c", "cancel_job", "Cancel job", id="jobs.cancel", tooltip="Cancel the selected job (asks first)"),
        Binding("l", "toggle_log", "Log", id="jobs.log", tooltip="Show or hide the selected job's log"),
        Binding("enter", "open_job", "Open", id="jobs.open",
                tooltip="Open the selected job's project in the section of its results"),
        Binding("question_mark", "app.help", "Help", id="jobs.help", tooltip="List every key"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, dict] = {}
        self.projects: dict[str, str] = {}
        self._log: dict[str, str] = {}
        self._timer = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        yield Static("Jobs, newest first", id="jobs-title")
        yield FilterableTable([
            Column("status", "Status", filter=True),
            Column("what", "Job", filter=True),
            Column("project", "Project", filter=True),
            Column("progress", "Progress", width=44),
            Column("duration", "Took", numeric=True, fmt=duration_text),
            Column("created", "Created", fmt=lambda v: tables.format_timestamp(v)),
            Column("id", "Id", filter=True),
        ], id="jobs-table")
        with VerticalScroll(id="job-detail-scroll"):  # the job and its log's last lines: longer than 9 rows
            yield Static("", id="job-detail")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.sub_title = "jobs"
        self.query_one(FilterableTable).focus()
        self._list()

    def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()

    @app_work(group="jobs-view-list", description="list every job")
    def _list(self) -> None:
        from sparsify_tui.jobs import list_jobs

        ws = self.app.workspace
        jobs = list_jobs(ws)
        try:
            projects = {p["id"]: p.get("name") or p["id"] for p in ws.list_projects()}
        except Exception:  # noqa: BLE001 - the list shows project ids then
            projects = {}
        post_result(self, JobsListed(jobs, projects))

    @on(JobsListed)
    def _listed(self, message: JobsListed) -> None:
        self.jobs = {j["id"]: j for j in message.jobs}
        self.projects = message.projects
        table = self.query_one(FilterableTable)
        rows = job_rows(message.jobs, message.projects)
        if [tuple(r.values()) for r in rows] != [tuple(r.values()) for r in table.all_rows]:
            table.set_rows(rows)
        self.query_one("#jobs-title", Static).update(
            f"Jobs, newest first · {sum(j.get('status') in ACTIVE for j in message.jobs)} running or queued · "
            f"{len(message.jobs)} in all  [dim](enter: its project · c: cancel · l: log)[/dim]")
        self._show_detail()
        self.refresh_bindings()
        if self.is_attached:
            self._timer = self.set_timer(POLL_SECONDS, self._list)

    @on(messages.WorkFailed)
    def _failed(self, message: messages.WorkFailed) -> None:
        if message.group == "jobs-view-list" and self.is_attached:
            self._timer = self.set_timer(POLL_SECONDS * 5, self._list)

    def selected(self) -> Optional[dict]:
        row = self.query_one(FilterableTable).current_row()
        return self.jobs.get(row["id"]) if row else None

    def _show_detail(self) -> None:
        job = self.selected()
        if job is not None and (job["id"] not in self._log or job.get("status") in ACTIVE):
            self._read_log(job["id"])
        self.query_one("#job-detail", Static).update(detail_text(job, self._log.get(job["id"], "") if job else ""))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()
        self.refresh_bindings()

    @app_work(group="jobs-view-log", description="read job log")
    def _read_log(self, job_id: str) -> None:
        from sparsify_tui.jobs import log_tail

        try:
            post_result(self, JobLogRead(job_id, log_tail(self.app.workspace, job_id, lines=LOG_LINES)))
        except Exception as err:  # noqa: BLE001 - shown in the pane
            post_result(self, JobLogRead(job_id, "", str(err)))

    @on(JobLogRead)
    def _log_read(self, message: JobLogRead) -> None:
        self._log[message.job_id] = message.text if message.error is None else f"(log unreadable: {message.error})"
        job = self.selected()
        if job is not None and job["id"] == message.job_id:
            self.query_one("#job-detail", Static).update(detail_text(job, self._log[message.job_id]))

    # -- actions ------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "cancel_job":
            job = self.selected()
            return job is not None and job.get("status") in ACTIVE
        if action == "open_job":
            job = self.selected()
            return job is not None and bool(job.get("project_id"))
        return True

    def action_close(self) -> None:
        self.app.pop_screen()

    def action_toggle_log(self) -> None:
        self.query_one("#job-detail-scroll").toggle_class("-hidden")

    def action_cancel_job(self) -> None:
        job = self.selected()
        if job is None or job.get("status") not in ACTIVE:
            return

        def answer(yes: Optional[bool]) -> None:
            if yes:
                self._cancel(job["id"])

        self.app.push_screen(ConfirmDialog(f"Cancel the {job_title(job)} job ({job['id']})? It stops within about "
                                           "a second; nothing it measured is kept.", confirm_label="Cancel job",
                                           title="Cancel job"), answer)

    @app_work(group="jobs-view-cancel", description="cancel job", exclusive=False)
    def _cancel(self, job_id: str) -> None:
        from sparsify_tui.jobs import cancel

        post_result(self, JobCancelAsked(job_id, cancel(self.app.workspace, job_id)))

    @on(JobCancelAsked)
    def _cancel_asked(self, message: JobCancelAsked) -> None:
        self.notify(f"Cancel sent to job {message.job_id}.", timeout=3)
        self._list()

    def action_open_job(self) -> None:
        job = self.selected()
        if job is None or not job.get("project_id"):
            return
        section = JOB_SECTIONS.get(str(job.get("type")), "perf")
        project_id = job["project_id"]
        self.app.pop_screen()
        self.app.post_message(messages.OpenProject(project_id, section, name=self.projects.get(project_id)))

    @on(FilterableTable.RowChosen)
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.action_open_job()

    def current_job(self) -> Optional[Any]:
        """The job dict under the cursor (for tests)."""
        return self.selected()
