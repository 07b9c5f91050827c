"""New Project dialog: model path (completion `→`, or `ctrl+b` file browser), name, description,
Performance/Loss profile toggles and names, batch size, core count, values for the model's symbolic dims;
RUN creates the project (and submits the enabled profile jobs, with live progress); COMPLETE opens it.

Dismisses with the new project id, or None when canceled before RUN.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, ProgressBar, Static, Switch

from sparsify_tui import settings
from sparsify_tui.tui import messages
from sparsify_tui.tui.new_project.messages import CreateProgress, ModelInspected, ProjectCreated
from sparsify_tui.tui.widgets.dialogs import error_message
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.jobs import JobProgress
from sparsify_tui.tui.widgets.labels import FittedLabel
from sparsify_tui.tui.widgets.paths import ONNX, PathInput
from sparsify_tui.tui.workers import app_work, post_result



def inspect_model(path: str) -> tuple[str, list[dict]]:
    """(one-line model description, symbolic non-batch dims) for the dialog.

    Each dim: {"key": dim name or "input:axis", "label", "suggestion": int}. Raises ModelError etc.
    """
    from dataclasses import asdict

    from sparsify_tui.analysis.loading import load_model
    from sparsify_tui.analysis.shapes import dim_prompts, graph_inputs

    model = load_model(path, load_external_data=False)
    # symbolic dims and scalar inputs (e.g. silero_vad's sample rate `sr`): synthetic data cannot guess them
    dims = [asdict(p) for p in dim_prompts(model)]
    inputs = []
    for vi in graph_inputs(model):
        shape = [d.dim_param or (str(d.dim_value) if d.dim_value > 0 else "?") for d in vi.type.tensor_type.shape.dim]
        inputs.append(f"{vi.name}[{','.join(shape)}]")
    size = Path(path).stat().st_size
    desc = f"{len(model.graph.node)} nodes · {size / 1e6:.1f} MB · inputs " + " ".join(inputs)
    return desc, dims


class NewProjectDialog(ModalScreen[Optional[str]]):
    """Create a project: form → RUN (create + profile jobs with progress) → COMPLETE (open it)."""

    DEFAULT_CSS = """
    NewProjectDialog { align: center middle; }
    """

    BINDINGS = [
        Binding("ctrl+r", "run", "RUN", id="new_project.run", tooltip="Create the project and start its profiles"),
        Binding("ctrl+b", "browse", "Browse", id="new_project.browse", tooltip="Pick the model in a file browser"),
        Binding("escape", "close", "Cancel/close", id="new_project.close",
                tooltip="Close (before RUN nothing is created; after RUN the project is opened)"),
    ]

    def __init__(self, model_path: str = "") -> None:
        super().__init__()
        self.initial_path = model_path
        self.dims: list[dict] = []
        self._dims_lock = asyncio.Lock()  # _set_dims: one replacement of the dim fields at a time
        self.project: Optional[dict] = None
        self.jobs: list[dict] = []
        self._inspect_timer = None
        self._creating = False

    def compose(self) -> ComposeResult:
        from sparsify_tui.settings import available_cores

        with Vertical(id="dialog"):
            yield Static("New project", classes="dialog-title")
            with VerticalScroll(id="form-scroll"):
                with Grid(id="form", classes="form"):
                    yield Label("Model (.onnx)")
                    with Horizontal(classes="path-row"):
                        yield PathInput(self.initial_path, placeholder="path/to/model.onnx  (→ completes)",
                                        suffixes=ONNX, id="model_path", compact=True)
                        yield Button("Browse", id="browse", compact=True)
                    yield Label("")
                    yield Static("", id="model-info", classes="hint")
                    yield Label("Name")
                    yield TextInput(placeholder="default: the model file name", id="name", compact=True)
                    yield Label("Description")
                    yield TextInput(id="description", compact=True)
                    yield Label("Perf profile")
                    with Horizontal(classes="toggle-row"):
                        yield Switch(True, id="perf_enabled")
                        yield Label("on", id="perf_state", classes="switch-state")
                        yield TextInput("baseline", id="perf_name", compact=True)
                    yield Label("Loss profile")
                    with Horizontal(classes="toggle-row"):
                        yield Switch(True, id="loss_enabled")
                        yield Label("on", id="loss_state", classes="switch-state")
                        yield TextInput("baseline", id="loss_name", compact=True)
                    yield Label("Batch size")
                    yield TextInput("1", id="batch_size", type="integer", compact=True)
                    yield Label("Cores")
                    yield TextInput(str(available_cores()), id="core_count", type="integer", compact=True)
                yield Grid(id="dims-form", classes="form")
                yield Static("RUN copies the model into the project and counts its FLOPs; the enabled profiles "
                             "then run as background jobs (they keep running if you close this or quit). "
                             "Symbolic dims (other than the batch) need a value. tab: next field · "
                             "→: complete the path · ctrl+b: browse", id="run-hint", classes="hint")
                yield Vertical(id="progress-area")
            with Horizontal(classes="buttons"):  # the actions first, Cancel last (every dialog)
                yield Button("RUN (ctrl+r)", variant="primary", id="run", compact=True)
                yield Button("COMPLETE", variant="success", id="complete", compact=True, disabled=True)
                yield Button("Cancel", id="cancel", compact=True)

    async def on_mount(self) -> None:
        self.query_one("#model_path", Input).focus()
        self.query_one("#dims-form").display = False
        if self.initial_path:
            await self._inspect(self.initial_path)

    @on(Switch.Changed)
    def _switch_changed(self, event: Switch.Changed) -> None:
        # the state is also written as text: a Switch alone is only colour (invisible with NO_COLOR)
        key = (event.switch.id or "").replace("_enabled", "")
        self.query_one(f"#{key}_state", Label).update("on" if event.value else "off")
        self.query_one(f"#{key}_name", Input).disabled = not event.value

    # -- model path ----------------------------------------------------------------------
    @on(Input.Changed, "#model_path")
    def _path_changed(self, event: Input.Changed) -> None:
        if self._inspect_timer is not None:
            self._inspect_timer.stop()
        value = event.value
        self._inspect_timer = self.set_timer(0.4, lambda: self._inspect(value))

    async def _inspect(self, value: str) -> None:
        from textual.css.query import NoMatches

        if not self.is_attached:
            return  # a timer that fired after the dialog closed
        path = os.path.expanduser(value.strip())
        try:
            info = self.query_one("#model-info", Static)
        except NoMatches:
            return
        if not path:
            info.update("")
            await self._set_dims([])
            return
        if not os.path.isfile(path):
            info.update("folder: pick an .onnx file in it" if os.path.isdir(path) else "no such file yet")
            await self._set_dims([])
            return
        info.update("reading the model…")
        self._inspect_worker(path)

    @app_work(group="inspect", description="read model inputs")
    def _inspect_worker(self, path: str) -> None:
        try:
            description, dims = inspect_model(path)
        except Exception as err:  # noqa: BLE001 - an unreadable model is shown under the path
            post_result(self, ModelInspected(path, error=err))
            return
        post_result(self, ModelInspected(path, description, dims))

    @on(ModelInspected)
    async def _inspected(self, message: ModelInspected) -> None:
        if message.error is not None:
            self.query_one("#model-info", Static).update(f"✗ {error_message(message.error)}")
            await self._set_dims([])
        elif os.path.expanduser(self.query_one("#model_path", Input).value.strip()) == message.path:
            self.query_one("#model-info", Static).update(message.description)
            await self._set_dims(message.dims)

    async def _set_dims(self, dims: list[dict]) -> None:
        """Show one Input per symbolic (non-batch) dim, with a suggested value as placeholder. The old fields are
        removed before the new ones (the same ids, `dim-0`...) are mounted, one change at a time (the path's timer
        and the model's inspection both call this)."""
        if [d["key"] for d in dims] == [d["key"] for d in self.dims]:
            return
        self.dims = dims
        async with self._dims_lock:
            grid = self.query_one("#dims-form", Grid)
            await grid.remove_children()
            grid.display = bool(dims)
            widgets = []
            labels = [f"dim {d['label']}" for d in dims]
            # the labels' column as wide as the longest (within reason): a dim named DynamicDimension.1 was cut
            grid.styles.grid_columns = f"{max(15, min(max(map(len, labels), default=0), 32))} 1fr"
            for i, (d, label) in enumerate(zip(dims, labels)):
                widgets.append(FittedLabel(label))
                widgets.append(Input(placeholder=f"required, e.g. {d['suggestion']}", id=f"dim-{i}",
                                     type="integer", compact=True))
            if widgets:
                await grid.mount(*widgets)

    def dim_values(self) -> dict[str, int]:
        """Every symbolic dim's value; one left empty is an error that names it (nothing is silently set)."""
        from sparsify_tui.errors import DimensionError

        out = {}
        for i, d in enumerate(self.dims):
            text = self.query_one(f"#dim-{i}", Input).value
            if not text.strip():
                raise DimensionError(f"dim {d['label']} needs a value (e.g. {d['suggestion']}): the model's inputs "
                                     "depend on it")
            out[d["key"]] = settings.dim_value(text, f"dim {d['label']}")
        return out

    def action_browse(self) -> None:
        if self._creating or self.project:
            return

        self.query_one("#model_path", PathInput).action_browse()  # the field reads the model when it changes

    # -- RUN -----------------------------------------------------------------------------
    def form_values(self) -> dict:
        """Validated form values (raises SparsifyError on a bad one)."""
        from sparsify_tui.errors import ModelError

        q = lambda wid: self.query_one(f"#{wid}", Input).value  # noqa: E731
        path = os.path.expanduser(q("model_path").strip())
        if not path:
            raise ModelError("no model path given: type the path of an .onnx file or press ctrl+b to browse")
        return {
            "model_path": path,
            "name": q("name").strip() or None,
            "description": q("description"),
            "batch_size": settings.batch_size(q("batch_size"), "batch size"),
            "dims": self.dim_values(),
            "setup": {
                "core_count": settings.core_count(q("core_count"), "core count"),
                "perf_enabled": self.query_one("#perf_enabled", Switch).value,
                "loss_enabled": self.query_one("#loss_enabled", Switch).value,
                "perf_name": q("perf_name").strip() or "baseline",
                "loss_name": q("loss_name").strip() or "baseline",
            },
        }

    def action_run(self) -> None:
        if self._creating or self.project is not None:
            return
        try:
            values = self.form_values()
        except Exception as err:  # noqa: BLE001 - shown to the user
            self.app.show_error(err)
            return
        self._creating = True
        self.query_one("#run", Button).disabled = True
        area = self.query_one("#progress-area")
        area.remove_children()
        area.mount(Static("Creating the project…", id="create-step"), ProgressBar(total=1.0, id="create-bar",
                                                                                  show_eta=False))
        self._create(values)

    @on(CreateProgress)
    def _progress(self, message: CreateProgress) -> None:
        try:
            self.query_one("#create-step", Static).update(f"Creating the project: {message.step}")
            self.query_one("#create-bar", ProgressBar).update(progress=message.fraction)
        except Exception:
            pass

    @app_work(group="create", description="create project")
    def _create(self, values: dict) -> None:
        from sparsify_tui import jobs
        from sparsify_tui.services.projects import create_project

        ws = self.app.workspace
        project = create_project(
            ws, values["model_path"], values["name"], values["description"], batch_size=values["batch_size"],
            dims=values["dims"], setup=values["setup"],
            progress=lambda step, frac: post_result(self, CreateProgress(step, frac)))
        submitted: list[dict] = []
        notes: list[str] = []
        for job_type, args, label in jobs.baseline_jobs(ws, project):
            try:
                submitted.append(jobs.submit(ws, project["id"], job_type, args))
            except Exception as err:  # noqa: BLE001 - the project exists; report and go on
                notes.append(f"{label} could not start: {error_message(err)}")
        post_result(self, ProjectCreated(project, submitted, notes))

    @on(messages.WorkFailed)
    def _create_failed(self, message: messages.WorkFailed) -> None:
        """RUN failed (the error dialog shows why): the form is editable again."""
        if message.group == "create":
            self._creating = False
            self.query_one("#run", Button).disabled = False
            self.query_one("#progress-area").remove_children()

    @on(ProjectCreated)
    def _on_created(self, message: ProjectCreated) -> None:
        self._created(message.project, message.jobs, message.notes)

    def _created(self, project: dict, submitted: list[dict], notes: list[str]) -> None:
        self._creating = False
        self.project = project
        self.jobs = submitted
        for widget in self.query("#form Input, #form Switch, #dims-form Input, #browse"):
            widget.disabled = True
        self.query_one("#run-hint").display = False
        area = self.query_one("#progress-area")
        area.remove_children()
        lines = [f"✓ Project [b]{project['name']}[/b] created."]
        lines += notes
        if submitted:
            lines.append("Profiles run in the background (they keep running if you close this or quit):")
        area.mount(Static("\n".join(lines), id="created-info"))
        for job in submitted:
            area.mount(JobProgress(job["id"]))
        complete = self.query_one("#complete", Button)
        complete.disabled = False
        complete.focus()
        self.query_one("#cancel", Button).display = False
        self.query_one("#run", Button).display = False

    # -- buttons and close ---------------------------------------------------------------
    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "run":
            self.action_run()
        elif event.button.id == "browse":
            self.action_browse()
        elif event.button.id == "complete":
            self.dismiss(self.project["id"] if self.project else None)
        elif event.button.id == "cancel":
            self.action_close()

    def action_close(self) -> None:
        if self._creating:
            self.notify("The project is being created; wait for it to finish.", severity="warning")
            return
        self.dismiss(self.project["id"] if self.project else None)
