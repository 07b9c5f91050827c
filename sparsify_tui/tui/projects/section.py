"""Projects section: every project in the workspace; `n` new, `enter` open, `d` delete."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from sparsify_tui.tui import messages
from sparsify_tui.tui.widgets import tables
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count


class ProjectsSection(Widget):
    """Table of projects: name, model file, params, created, modified."""

    BINDINGS = [
        Binding("n", "new_project", "New", id="projects.new", tooltip="Create a project from an .onnx model"),
        Binding("enter", "open_project", "Open", id="projects.open", tooltip="Open the selected project"),
        Binding("d", "delete_project", "Delete", id="projects.delete", tooltip="Delete the selected project"),
        Binding("ctrl+r", "reload", "Refresh", id="projects.refresh", tooltip="Re-read the projects from disk"),
    ]

    def compose(self) -> ComposeResult:
        yield Static("Projects", classes="section-title")
        yield Static("No projects yet. Press [b]n[/b] to create one from an .onnx model "
                     "(or run [b]sparsify-tui demo[/b]).", id="projects-empty")
        yield FilterableTable([
            Column("name", "Name", filter=True),
            Column("model_file", "Model file", filter=True),
            Column("params", "Params", numeric=True, fmt=format_count),
            Column("created", "Created", fmt=lambda v: tables.format_timestamp(v)),
            Column("modified", "Modified", fmt=lambda v: tables.format_timestamp(v)),
        ], id="projects-table")

    def on_mount(self) -> None:
        self.reload()

    def focus_default(self) -> None:
        self.query_one(FilterableTable).focus()

    def action_reload(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Re-read the projects (thread worker; the table updates when done)."""
        self._load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="projects", description="list projects")
    def _load(self) -> list[dict]:
        return self.app.workspace.list_projects()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state == WorkerState.ERROR:
            self.app.show_error(worker.error)
        elif event.state == WorkerState.SUCCESS and worker.name == "_load":
            self._show(worker.result)
        elif event.state == WorkerState.SUCCESS and worker.name == "_delete":
            self.post_message(messages.ProjectsChanged(worker.result, deleted=True))

    def _show(self, projects: list[dict]) -> None:
        rows = [{
            "_key": p["id"],
            "id": p["id"],
            "name": p.get("name", ""),
            "model_file": (p.get("model") or {}).get("file", ""),
            "params": (p.get("model") or {}).get("params"),
            "created": p.get("created"),
            "modified": p.get("modified"),
        } for p in projects]
        self.query_one("#projects-empty").display = not rows
        self.query_one(FilterableTable).set_rows(rows)

    def _selected(self) -> dict | None:
        return self.query_one(FilterableTable).current_row()

    def action_new_project(self) -> None:
        self.app.action_new_project()

    def action_open_project(self) -> None:
        row = self._selected()
        if row is None:
            self.notify("No project selected: press n to create one.", severity="warning")
            return
        self.post_message(messages.OpenProject(row["id"]))

    @on(FilterableTable.RowChosen)
    def _chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.post_message(messages.OpenProject(event.row["id"]))

    def action_delete_project(self) -> None:
        row = self._selected()
        if row is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(row["id"])

        self.app.push_screen(ConfirmDialog(
            f"Delete project {row['name']!r}? Its model copy, profiles, optimizations and benchmarks "
            "are removed from disk (a linked model file is kept).", confirm_label="Delete"), answered)

    @work(thread=True, exclusive=True, exit_on_error=False, group="projects-delete", description="delete project")
    def _delete(self, project_id: str) -> str:
        self.app.workspace.delete_project(project_id)
        return project_id
