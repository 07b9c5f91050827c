"""The add dialog of the Loss Profiles section: name, method, levels, data file, batches, INT8, metric."""

from __future__ import annotations

from typing import Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Select, Static

from sparsify_tui.tui.widgets.data_summary import DataSummary
from sparsify_tui.tui.widgets.dialogs import FormDialog, dialog_css, form_buttons
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.paths import PathInput
from sparsify_tui.tui.widgets.runtimes import runtime_args, runtime_row, runtime_value
from sparsify_tui.tui.widgets.toggles import TextCheckbox


class LossProfileDialog(FormDialog[Optional[dict]]):
    """New loss profile: name, method, the runtime one-shot runs on, levels, data file, batches, INT8, metric. Dismisses with the
    ``loss_profile`` job args, or None."""

    DEFAULT_CSS = dialog_css("LossProfileDialog")

    BINDINGS = [
        Binding("escape", "close", "Cancel", id="loss.dialog.cancel", tooltip="Close without running"),
        Binding("ctrl+r", "run", "Run", id="loss.dialog.run", tooltip="Start the loss profile job"),
    ]

    def __init__(self, defaults: Optional[dict] = None) -> None:
        super().__init__()
        self.defaults = {"name": "baseline", "method": "one-shot", "levels": "", "data": "", "batches": 2,
                         "int8": False, "metric": "auto", **(defaults or {})}

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Static("New loss profile: per-layer pruning sensitivity", classes="dialog-title")
            with Horizontal(classes="row"):
                yield Label("Name")
                yield TextInput(str(d["name"]), id="name", compact=True)
            with Horizontal(classes="row"):
                yield Label("Method")
                yield Select([("one-shot (run on data)", "one-shot"), ("weight magnitude", "magnitude")],
                             value=d["method"], allow_blank=False, id="method", compact=True)
            # one-shot runs the pruned model on this runtime (weight magnitude runs nothing)
            yield from runtime_row("runtime", runtime_value(d.get("engine"), d.get("precision")))
            with Horizontal(classes="row"):
                yield Label("Levels")
                yield TextInput(str(d["levels"] or ""), placeholder="default; e.g. 0.2,0.4,0.9", id="levels",
                                compact=True)
            with Horizontal(classes="row"):
                yield Label("Data file")
                yield PathInput(str(d["data"] or ""), placeholder="synthetic, or .npz/.npy: ctrl+b",
                                id="data", compact=True)
            yield DataSummary("#data")
            with Horizontal(classes="row"):
                yield Label("Batches")
                yield TextInput(str(d["batches"]), id="batches", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("Metric")
                yield Select([("auto (KL for classes, else NMSE)", "auto"), ("KL divergence of softmax", "kl"),
                              ("normalized MSE (also untrained models)", "nmse")],
                             value=d["metric"] or "auto", allow_blank=False, id="metric", compact=True)
            yield TextCheckbox("INT8 sensitivity per layer", bool(d["int8"]), id="int8", compact=True)
            yield from form_buttons("Run")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def values(self) -> dict:
        """The job args; raises ``ValueError``/``SparsifyError`` with a one-line message."""
        from sparsify_tui import settings
        from sparsify_tui.profiling.loss import parse_levels

        name = self.query_one("#name", Input).value.strip() or "baseline"
        levels_text = self.query_one("#levels", Input).value.strip()
        levels = parse_levels(levels_text) if levels_text else None
        batches = settings.loss_batches(self.query_one("#batches", Input).value.strip() or None, "Batches")
        data = settings.data_file(self.query_one("#data", Input).value.strip(), "Data file")
        metric = self.query_one("#metric", Select).value
        return {"name": name, "method": self.query_one("#method", Select).value, "levels": levels,
                "data": data, "batches": batches,
                "int8": bool(self.query_one("#int8", TextCheckbox).value),
                **runtime_args(str(self.query_one("#runtime", Select).value)),
                "metric": None if metric == "auto" else metric}

    def action_run(self) -> None:
        try:
            self.dismiss(self.values())
        except Exception as err:  # noqa: BLE001 - shown in the dialog
            self.query_one("#error", Static).update(str(err))
