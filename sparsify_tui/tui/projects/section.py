"""Projects section: every project in the workspace, with its profiles and running jobs; `n` new, `enter` open,
`d` delete. The list re-reads the workspace every few seconds while it is shown, so projects, profiles and
jobs made by the CLI or another TUI appear without a key."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from sparsify_tui.tui import messages
from sparsify_tui.formatting import safe_line
from sparsify_tui.tui.projects.messages import DeleteAsked, ProjectsListed
from sparsify_tui.tui.widgets import keys, tables
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count
from sparsify_tui.tui.workers import app_work, post_result

POLL_SECONDS = 3.0


def profiles_text(counts: dict) -> str:
    """``2 perf · 1 loss · 1 opt · 1 bench`` (kinds with none left out; "-" when empty)."""
    parts = [f"{counts[k]} {label}" for k, label in (("perf_profiles", "perf"), ("loss_profiles", "loss"),
                                                       ("optimizations", "opt"), ("benchmarks", "bench"))
             if counts.get(k)]
    return " · ".join(parts) or "-"


def jobs_text(jobs: list) -> str:
    """``1 running · 1 queued`` of a project's active jobs, or the last job's outcome when one failed."""
    running = sum(j.get("status") == "running" for j in jobs)
    queued = sum(j.get("status") == "pending" for j in jobs)
    parts = ([f"{running} running"] if running else []) + ([f"{queued} queued"] if queued else [])
    if parts:
        return " · ".join(parts)
    last = max(jobs, key=lambda j: str(j.get("created") or ""), default=None)
    return f"last: {last.get('status')}" if last is not None and last.get("status") in ("error", "canceled") else ""


def delete_question(ws, project_id: str, name: str) -> tuple[str, str]:
    """``(question, confirm label)`` before deleting a project (in a worker thread: it reads the jobs): what goes,
    and the project's running or queued jobs, which the delete cancels (:func:`sparsify_tui.jobs.delete_project`)."""
    from sparsify_tui.formatting import safe_line
    from sparsify_tui.jobs import active_jobs, active_jobs_phrase

    question = (f"Delete project {safe_line(name)!r}? Its model copy, profiles, optimizations and benchmarks are "
                "removed from disk (a linked model file is kept).")
    try:
        jobs = active_jobs(ws, project_id)
    except Exception:  # noqa: BLE001 - a damaged jobs table: the question without them
        jobs = []
    if not jobs:
        return question, "Delete"
    return f"{question} It has {active_jobs_phrase(jobs)}: deleting the project cancels it.", "Cancel job, delete"


class ProjectsSection(Widget):
    """Table of projects: name, model file, params, profiles, jobs, modified."""

    BINDINGS = [
        keys.new("projects", "project from an .onnx model"),
        Binding("enter", "open_project", "Open", id="projects.open", tooltip="Open the selected project"),
        keys.delete("projects", "project (its folder; a linked model file is kept)"),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._signature: tuple = ()
        self._damaged_shown: set = set()  # damaged projects already named (once per app)

    def compose(self) -> ComposeResult:
        yield Static("Projects", classes="section-title")
        yield Static("No projects yet. Press [b]n[/b] to create one from an .onnx model "
                     "(or run [b]sparsify-tui demo[/b]).", id="projects-empty")
        yield FilterableTable([
            Column("name", "Name", filter=True, pin=True),
            Column("model_file", "Model file", filter=True),
            Column("params", "Params", numeric=True, fmt=format_count),
            Column("profiles", "Profiles"),
            Column("jobs", "Jobs", filter=True),
            Column("modified", "Modified", fmt=lambda v: tables.format_timestamp(v)),
            Column("created", "Created", fmt=lambda v: tables.format_timestamp(v)),
        ], id="projects-table")

    def on_mount(self) -> None:
        self.reload()
        self.set_interval(POLL_SECONDS, self._poll)

    def _poll(self) -> None:
        if getattr(self.app, "section", None) == "projects" and self.app.screen is self.screen:
            self.reload()

    def focus_default(self) -> None:
        self.query_one(FilterableTable).focus()

    def reload(self) -> None:
        """Re-read the projects (thread worker; the table updates when something changed)."""
        self._load()

    @app_work(group="projects", description="list projects")
    def _load(self) -> None:
        from sparsify_tui.jobs import list_jobs

        ws = self.app.workspace
        projects = ws.list_projects()
        try:
            damaged = ws.damaged_projects()
        except Exception:  # noqa: BLE001 - the list must show
            damaged = []
        try:
            jobs = list_jobs(ws)
        except Exception:  # noqa: BLE001 - the list must show even if the jobs table is unreadable
            jobs = []
        for p in projects:
            counts = {}
            for table in ("perf_profiles", "loss_profiles", "optimizations", "benchmarks"):
                try:
                    counts[table] = len(ws.list_records(p["id"], table))
                except Exception:  # noqa: BLE001 - a damaged project still lists
                    counts[table] = 0
            p["_counts"] = counts
            p["_jobs"] = [j for j in jobs if j.get("project_id") == p["id"]]
        post_result(self, ProjectsListed(projects, damaged))

    @on(ProjectsListed)
    def _show(self, message: ProjectsListed) -> None:
        projects = message.projects
        for d in message.damaged:  # named once, as `sparsify-tui list` shows them (never "no projects")
            if d["id"] not in self._damaged_shown:
                self._damaged_shown.add(d["id"])
                self.notify(f"Project {safe_line(d['name'] or d['id'])} ({d['id']}) is damaged: {d['problem']}",
                            severity="error", timeout=30, markup=False)
        rows = [{
            "_key": p["id"],
            "id": p["id"],
            "name": safe_line(p.get("name", "")),  # a newline stored by hand or an old version: shown, one row
            "model_file": (p.get("model") or {}).get("file", ""),
            "params": (p.get("model") or {}).get("params"),
            "profiles": profiles_text(p.get("_counts") or {}),
            "jobs": jobs_text(p.get("_jobs") or []),
            "created": p.get("created"),
            "modified": p.get("modified"),
        } for p in projects]
        signature = tuple(tuple(r.values()) for r in rows)
        self.query_one("#projects-empty").display = not rows
        if signature != self._signature:  # no redraw when nothing changed (it polls)
            self._signature = signature
            self.query_one(FilterableTable).set_rows(rows)

    def _selected(self) -> dict | None:
        return self.query_one(FilterableTable).current_row()

    def action_new(self) -> None:
        self.app.action_new_project()

    def action_open_project(self) -> None:
        row = self._selected()
        if row is None:
            self.notify("No project selected: press n to create one.", severity="warning")
            return
        self.post_message(messages.OpenProject(row["id"], name=row.get("name")))

    @on(FilterableTable.RowChosen)
    def _chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.post_message(messages.OpenProject(event.row["id"], name=event.row.get("name")))

    def action_delete(self) -> None:
        row = self._selected()
        if row is None:
            return

        self._ask_delete(row["id"], row["name"])

    @app_work(group="projects-delete", description="ask before deleting a project")
    def _ask_delete(self, project_id: str, name: str) -> None:
        post_result(self, DeleteAsked(project_id, *delete_question(self.app.workspace, project_id, name)))

    @on(DeleteAsked)
    def _confirm_delete(self, message: DeleteAsked) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(message.project_id)

        self.app.push_screen(ConfirmDialog(message.question, confirm_label=message.confirm_label), answered)

    @app_work(group="projects-delete", description="delete project")
    def _delete(self, project_id: str) -> None:
        from sparsify_tui.jobs import delete_project

        delete_project(self.app.workspace, project_id)
        post_result(self, messages.ProjectsChanged(project_id, deleted=True))
