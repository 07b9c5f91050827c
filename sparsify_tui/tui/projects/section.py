"""Projects section: every project in the workspace; `n` new, `enter` open, `d` delete."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from sparsify_tui.tui import messages
from sparsify_tui.tui.projects.messages import ProjectsListed
from sparsify_tui.tui.widgets import tables
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count
from sparsify_tui.tui.workers import app_work, post_result


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

    @app_work(group="projects", description="list projects")
    def _load(self) -> None:
        post_result(self, ProjectsListed(self.app.workspace.list_projects()))

    @on(ProjectsListed)
    def _show(self, message: ProjectsListed) -> None:
        projects = message.projects
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
        self.post_message(messages.OpenProject(row["id"], name=row.get("name")))

    @on(FilterableTable.RowChosen)
    def _chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.post_message(messages.OpenProject(event.row["id"], name=event.row.get("name")))

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

    @app_work(group="projects-delete", description="delete project")
    def _delete(self, project_id: str) -> None:
        self.app.workspace.delete_project(project_id)
        post_result(self, messages.ProjectsChanged(project_id, deleted=True))
