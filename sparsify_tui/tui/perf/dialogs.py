"""The add dialog of the Performance Profiles section: the form (name, batch size, cores, warm-up, timed runs,
sample data, INT8), then the ``perf_profile`` job's live progress (`c` cancels it, `escape` hides it)."""

from __future__ import annotations

from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static

from sparsify_tui.tui.perf.messages import PerfJobSubmitted
from sparsify_tui.tui.widgets.data_summary import DataSummary
from sparsify_tui.tui.widgets.dialogs import FormDialog, dialog_css, form_buttons
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.paths import PathInput
from sparsify_tui.tui.widgets.runtimes import runtime_args, runtime_row, runtime_value
from sparsify_tui.tui.widgets.jobs import JobProgress
from sparsify_tui.tui.widgets.toggles import TextCheckbox


class PerfProfileDialog(FormDialog[Optional[dict]]):
    """Add a perf profile: the form, then the job's live progress. Dismisses with ``{"record_id"}`` when the
    job completes, ``{"job"}`` when hidden while it runs (it keeps running; the section shows it), or None
    when closed before Run."""

    DEFAULT_CSS = dialog_css("PerfProfileDialog", 64) + """
    PerfProfileDialog #form { height: auto; }
    PerfProfileDialog #progress { height: auto; }
    PerfProfileDialog #int8 { margin-top: 1; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="perfprofile.dialog.close",
                tooltip="Close the dialog (a started job keeps running)"),
        Binding("ctrl+r", "run", "Run", id="perfprofile.dialog.run", tooltip="Start the perf profile job"),
        Binding("c", "cancel_job", "Cancel job", id="perfprofile.dialog.cancel_job",
                tooltip="Cancel the running profile job"),
    ]

    def __init__(self, project_id: str, defaults: dict, *, job: Optional[dict] = None) -> None:
        super().__init__()
        self.project_id = project_id
        self.defaults = defaults
        self.job = job

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Static("New performance profile (measured on this machine)", classes="dialog-title")
            with Vertical(id="form"):
                for key, label, kind in (("name", "Name", "text"), ("batch_size", "Batch size", "integer"),
                                         ("core_count", "Cores", "integer"), ("warmup", "Warm-up runs", "integer"),
                                         ("iterations", "Timed runs", "integer")):
                    with Horizontal(classes="row"):
                        yield Label(label)
                        yield TextInput(str(d.get(key, "")), id=key, type=kind, compact=True)
                yield from runtime_row("runtime", runtime_value(d.get("engine"), d.get("precision")))
                with Horizontal(classes="row"):
                    yield Label("Sample data")
                    yield PathInput(str(d.get("data") or ""), placeholder="synthetic, or .npz/.npy: ctrl+b", id="data",
                                    compact=True)
                yield DataSummary("#data")
                yield TextCheckbox("Also quantize to INT8 and measure it", bool(d.get("int8", True)), id="int8",
                                   compact=True)
            yield Vertical(id="progress")
            yield from form_buttons("Run", "run", "close", cancel_label="Close")

    def on_mount(self) -> None:
        if self.job is not None:
            self._follow(self.job)
        else:
            self.query_one("#name", Input).focus()

    def values(self) -> dict:
        """Job args from the form, checked by the one validator of perf-profile settings
        (:func:`sparsify_tui.jobs.handlers.perf.perf_settings`); raises ``SparsifyError`` (one line)."""
        from sparsify_tui import settings

        name = self.query_one("#name", Input).value.strip() or "baseline"
        field = lambda key: self.query_one(f"#{key}", Input).value.strip()  # noqa: E731
        return {"name": name, "int8": self.query_one("#int8", TextCheckbox).value,
                **runtime_args(str(self.query_one("#runtime", Select).value)),
                "dims": self.defaults.get("dims") or {}, "data": settings.data_file(field("data"), "Sample data"),
                "batch_size": settings.batch_size(field("batch_size"), "Batch size"),
                "core_count": settings.core_count(field("core_count"), "Cores"),
                "warmup": settings.warmup(field("warmup"), "Warm-up runs"),
                "iterations": settings.iterations(field("iterations"), "Timed runs")}

    def action_run(self) -> None:
        if self.job is None:
            self.start_job("perf_profile", PerfJobSubmitted)

    @on(PerfJobSubmitted)
    def _submitted(self, message: PerfJobSubmitted) -> None:
        if message.job is None:
            self.query_one("#run", Button).disabled = False
            self.query_one("#error", Static).update(str(message.error))
        else:
            self._follow(message.job)

    def _follow(self, job: dict) -> None:
        self.job = job
        self.query_one("#form").display = False
        self.query_one("#run", Button).display = False
        self.query_one("#close", Button).label = "Hide (escape)"
        self.query_one("#progress").mount(JobProgress(job["id"], id="job-progress"),
                                          Static("c: cancel the job · escape: hide (it keeps running)",
                                                 classes="hint"))
        self.query_one("#close", Button).focus()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "cancel_job":
            return self.job is not None and not self.query_one("#job-progress", JobProgress).finished \
                if self.query("#job-progress") else False
        return True

    def action_cancel_job(self) -> None:
        progress = self.query("#job-progress")
        if progress:
            progress.first(JobProgress).cancel()

    def action_close(self) -> None:
        running = self.job is not None and self.query("#job-progress") and \
            not self.query_one("#job-progress", JobProgress).finished
        self.dismiss({"job": self.job} if running else None)

    def on_job_progress_finished(self, event) -> None:
        self.refresh_bindings()
        status = event.status
        if status == "completed":
            self.dismiss({"record_id": (event.job.get("result") or {}).get("record_id")})
        elif status == "error":
            self.query_one("#error", Static).update(f"The profile failed: {event.job.get('error') or 'see the job log'}")
        else:
            self.query_one("#error", Static).update(f"The profile job was {status}.")


def profile_defaults(project: dict, record: Optional[dict] = None) -> dict:
    """Form defaults of the dialog: the perf-profile job defaults for the project
    (:func:`sparsify_tui.jobs.handlers.perf.perf_settings`), or ``record``'s settings for a rerun;
    ``max_cores`` = the cores this process may use."""
    from sparsify_tui.services.job_settings import perf_settings
    from sparsify_tui.settings import available_cores

    d = perf_settings(project, {})
    d.update(d.pop("run").to_dict())
    d["max_cores"] = available_cores()
    if record:
        for k in ("name", "engine", "precision", "batch_size", "core_count", "warmup", "iterations", "dims", "data"):
            if record.get(k) is not None:
                d[k] = record[k]
        d["int8"] = bool(record.get("int8_enabled", record.get("int8_ms") is not None))
    return d


def rerun_args(defaults: dict, record_id: str) -> dict:
    """The ``perf_profile`` job args that measure record `record_id` again with its settings."""
    args = {k: defaults.get(k) for k in ("name", "engine", "precision", "batch_size", "core_count", "warmup",
                                         "iterations", "int8", "dims", "data")}
    args["record_id"] = record_id
    return args
