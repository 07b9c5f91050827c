"""Settings section: name, description, training settings (saved with `update_project`), the setup
used for profiles, size on disk, and deleting the project."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static

from sparsify_tui.tui import messages
from sparsify_tui.tui.projects.messages import DeleteAsked
from sparsify_tui.tui.settings.messages import ProjectDeleted, ProjectSettingsLoaded, SettingsRefused
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.inputs import FieldError, SectionField
from sparsify_tui.tui.widgets.scroll import FormScroll
from sparsify_tui.tui.widgets.tables import format_bytes, format_count, format_timestamp
from sparsify_tui.tui.workers import app_work, post_result

OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop")


class SettingsSection(Widget):
    """Edit the open project's settings. `ctrl+s` saves, `ctrl+d` deletes the project."""

    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="settings.save", tooltip="Save name, description and training settings"),
        Binding("ctrl+d", "delete_project", "Delete project", id="settings.delete",
                tooltip="Delete this project (asks first)"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.data_stamp = None  # the project's change stamp read before the last read (SparsifyApp)
        self._filled: dict | None = None  # form_values() as last read: the form has no edit of the user's

    def compose(self) -> ComposeResult:
        with FormScroll():  # its focus restyles itself, not the whole form
            yield Static("Settings  [dim](enter: edit a field · escape: put it back · ctrl+s: save)[/dim]",
                         classes="section-title")
            with Grid(classes="form"):
                yield Label("Name")
                yield self._field("name")
                yield Label("Description")
                yield self._field("description", placeholder="what this project is for")
                yield Label("Optimizer")
                yield Select([(o, o) for o in OPTIMIZERS], id="optimizer", allow_blank=False, value="SGD", compact=True)
                yield Label("Epochs")
                yield self._field("epochs")
                yield Label("Initial LR")
                yield self._field("init_lr")
                yield Label("Final LR")
                yield self._field("final_lr")
            yield FieldError(id="settings-error")
            with Horizontal(classes="buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="save", compact=True)
                yield Button("Delete project (ctrl+d)", variant="error", id="delete", compact=True)
            yield Static("", id="setup-info", classes="info")

    def _field(self, key: str, **kwargs) -> SectionField:
        """A field of the form: enter edits it, enter again checks it in place (the line under the form),
        escape reverts; ctrl+s saves the form."""

        def check(text: str) -> str | None:
            from sparsify_tui.errors import SparsifyError
            from sparsify_tui.store.workspace import check_project_fields

            try:
                check_project_fields({key: text})
            except SparsifyError as err:
                return f"{err} (escape puts it back)"
            return None

        return SectionField(id=key, compact=True, check=check, error_id="settings-error", **kwargs)

    def on_mount(self) -> None:
        self._load()

    def focus_default(self) -> None:
        # the scroll container, not a field: digits 1-6 must keep switching sections
        self.query_one(FormScroll).focus()

    def reload_data(self) -> None:
        """The project changed on disk (the app's change-stamp watch: the CLI, another TUI): read it again, unless
        the form holds an edit not saved yet (it is kept; ctrl+s saves it)."""
        if self._filled is None or self.form_values() == self._filled:
            self._load()

    @app_work(group="settings", description="read project")
    def _load(self) -> None:
        ws = self.app.workspace
        self.data_stamp = ws.project_stamp(self.project_id)
        project = ws.get_project(self.project_id)
        try:
            size = ws.project_size_bytes(self.project_id)
        except Exception:
            size = None
        post_result(self, ProjectSettingsLoaded(project, size))

    @on(ProjectSettingsLoaded)
    def _loaded(self, message: ProjectSettingsLoaded) -> None:
        self._fill(message.project, message.size_bytes)
        if message.saved:
            self.notify("Settings saved.", timeout=3)
            self.post_message(messages.ProjectsChanged(self.project_id))

    @on(ProjectDeleted)
    def _deleted(self, message: ProjectDeleted) -> None:
        self.notify("Project deleted.", timeout=3)
        self.post_message(messages.ProjectsChanged(self.project_id, deleted=True))

    def _fill(self, project: dict, size: int | None) -> None:
        self.query_one("#settings-error", FieldError).say(None)
        training = project.get("training") or {}
        self.query_one("#name", Input).value = project.get("name", "")
        self.query_one("#description", Input).value = project.get("description", "")
        optimizer = training.get("optimizer", "SGD")
        if optimizer in OPTIMIZERS:
            self.query_one("#optimizer", Select).value = optimizer
        self.query_one("#epochs", Input).value = str(training.get("epochs", ""))
        self.query_one("#init_lr", Input).value = str(training.get("init_lr", ""))
        self.query_one("#final_lr", Input).value = str(training.get("final_lr", ""))
        setup = project.get("setup") or {}
        model = project.get("model") or {}
        dims = ", ".join(f"{k}={v}" for k, v in (setup.get("dims") or {}).items()) or "none"
        lines = [
            "[b]Setup[/b] (used for new profiles)",
            f"  batch size {setup.get('batch_size', 1)} · cores {setup.get('core_count', '?')} · dims {dims}",
            f"  perf profile {'on' if setup.get('perf_enabled', True) else 'off'} "
            f"({setup.get('perf_name', 'baseline')}) · loss profile "
            f"{'on' if setup.get('loss_enabled', True) else 'off'} ({setup.get('loss_name', 'baseline')})",
            "[b]Model[/b]",
            f"  {model.get('file', '?')} · {format_count(model.get('params'))} params · "
            f"{format_count(model.get('flops'))} FLOPs · opset {model.get('opset', '?')}"
            + (" · linked" if model.get("linked") else ""),
            f"  sha256 {str(model.get('sha256', ''))[:16]}…",
            "[b]Size on disk[/b]  " + (format_bytes(size) if size is not None else "?")
            + ("  (linked model not counted)" if model.get("linked") else ""),
            f"[b]Created[/b] {format_timestamp(project.get('created'))} · "
            f"[b]modified[/b] {format_timestamp(project.get('modified'))}",
        ]
        self.query_one("#setup-info", Static).update("\n".join(lines))
        self._filled = self.form_values()

    def form_values(self) -> dict:
        """The edited fields, as passed to `Workspace.update_project` (validation happens there)."""
        return {
            "name": self.query_one("#name", Input).value.strip(),
            "description": self.query_one("#description", Input).value,
            "optimizer": self.query_one("#optimizer", Select).value,
            "epochs": self.query_one("#epochs", Input).value.strip(),
            "init_lr": self.query_one("#init_lr", Input).value.strip(),
            "final_lr": self.query_one("#final_lr", Input).value.strip(),
        }

    def action_save(self) -> None:
        """ctrl+s: save the form; a field being edited is checked first (a bad value is said, nothing saved)."""
        for field in self.query(SectionField):
            if field.editing:
                problem = field.problem()
                field.say(problem)
                if problem:
                    return
                field.editing = False
        self._save(self.form_values())

    @app_work(group="settings", description="save settings")
    def _save(self, fields: dict) -> None:
        from sparsify_tui.errors import SparsifyError

        ws = self.app.workspace
        try:
            project = ws.update_project(self.project_id, **fields)
        except SparsifyError as err:  # a bad value or a name taken: said under the form, the edits kept
            post_result(self, SettingsRefused(str(err)))
            return
        post_result(self, ProjectSettingsLoaded(project, ws.project_size_bytes(self.project_id), saved=True))

    @on(SettingsRefused)
    def _refused(self, message: SettingsRefused) -> None:
        self.query_one("#settings-error", FieldError).say(f"Not saved: {message.error}")

    def action_delete_project(self) -> None:
        self._ask_delete(self.project_id, self.query_one("#name", Input).value or self.project_id)

    @app_work(group="settings-delete", description="ask before deleting the project")
    def _ask_delete(self, project_id: str, name: str) -> None:
        from sparsify_tui.tui.projects.section import delete_question

        post_result(self, DeleteAsked(project_id, *delete_question(self.app.workspace, project_id, name)))

    @on(DeleteAsked)
    def _confirm_delete(self, message: DeleteAsked) -> None:
        def answered(yes: bool | None) -> None:
            if yes and message.project_id == self.project_id:
                self._delete()

        self.app.push_screen(ConfirmDialog(message.question, confirm_label=message.confirm_label), answered)

    @app_work(group="settings-delete", description="delete project")
    def _delete(self) -> None:
        from sparsify_tui.jobs import delete_project

        delete_project(self.app.workspace, self.project_id)
        post_result(self, ProjectDeleted(self.project_id))

    @on(Button.Pressed, "#save")
    def _save_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_save()

    @on(Button.Pressed, "#delete")
    def _delete_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_delete_project()
