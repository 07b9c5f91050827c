"""Dialogs of the Benchmarks section: create a benchmark, apply/export an optimized .onnx."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from sparsify_tui.tui.widgets.data_summary import DataSummary
from sparsify_tui.tui.widgets.dialogs import FormDialog, dialog_css, form_buttons
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.paths import PathInput
from sparsify_tui.tui.widgets.runtimes import OWN, runtime_args, runtime_row
from sparsify_tui.tui.widgets.labels import elide_middle
from sparsify_tui.tui.widgets.toggles import TextSelectionList


def _dialog_css(cls: str) -> str:
    """The one dialog style (:func:`~sparsify_tui.tui.widgets.dialogs.dialog_css`), 72 wide."""
    return dialog_css(cls, 72) + f"""
    {cls} .bench-dialog-title {{ text-style: bold; height: auto; margin-bottom: 1; }}
    """


class BenchmarkDialog(FormDialog[Optional[dict]]):
    """Create a benchmark: models (baseline always, plus the chosen optimizations), the runtimes (each
    optimization's own by default; every runtime here; or one), batch sizes, core counts, warm-up, iterations and
    sample data. Dismisses with the ``benchmark`` job args, or None."""

    DEFAULT_CSS = _dialog_css("BenchmarkDialog") + """
    BenchmarkDialog TextSelectionList { height: auto; max-height: 8; margin-bottom: 1; }
    BenchmarkDialog .dialog-error { margin-top: 1; }
    """

    BINDINGS = [
        Binding("escape", "close", "Cancel", id="benchmarks.dialog.cancel", tooltip="Close without running"),
        Binding("ctrl+r", "run", "Run", id="benchmarks.dialog.run", tooltip="Start the benchmark job"),
    ]

    def __init__(self, optimizations: list[dict], *, name: str = "benchmark", batch_sizes: str = "1",
                 core_counts: str = "1", warmup: int = 5, iterations: int = 30,
                 selected: Optional[list[str]] = None) -> None:
        super().__init__()
        self.optimizations = optimizations
        self.defaults = dict(name=name, batch_sizes=batch_sizes, core_counts=core_counts, warmup=warmup,
                             iterations=iterations)
        self.selected = set(selected if selected is not None else [o["id"] for o in optimizations])

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Static("New benchmark: baseline vs optimizations, measured on this machine", classes="bench-dialog-title")
            with Horizontal(classes="row"):
                yield Label("Name")
                yield TextInput(d["name"], id="name", compact=True)
            yield Static("Models: baseline (always) +" + ("" if self.optimizations else
                         " no optimizations yet (create one in Optimize, 4)"), classes="hint")
            if self.optimizations:
                yield TextSelectionList[str](
                    *[(o.get("name") or o["id"], o["id"], o["id"] in self.selected) for o in self.optimizations],
                    id="models")
            # each optimization on the runtime it targets (and the reference), or every runtime here, or one
            yield from runtime_row("runtime", OWN, many=True, own=True, label="Runtimes")
            with Horizontal(classes="row"):
                yield Label("Batch sizes")
                yield TextInput(d["batch_sizes"], placeholder="e.g. 1,8", id="batch_sizes", compact=True)
            with Horizontal(classes="row"):
                yield Label("Core counts")
                yield TextInput(d["core_counts"], placeholder="e.g. 1,2", id="core_counts", compact=True)
            with Horizontal(classes="row"):
                yield Label("Warm-up runs")
                yield TextInput(str(d["warmup"]), id="warmup", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("Timed runs")
                yield TextInput(str(d["iterations"]), id="iterations", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("Sample data")
                yield PathInput("", placeholder="synthetic, or .npz/.npy: ctrl+b", id="data",
                                compact=True)
            yield DataSummary("#data")
            yield from form_buttons("Run")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def values(self) -> dict:
        """The job args from the form, checked by :mod:`sparsify_tui.settings` (the CLI's rules); raises
        ``SparsifyError`` with a one-line message."""
        from sparsify_tui import settings

        name = self.query_one("#name", Input).value.strip() or self.defaults["name"]
        opts = list(self.query_one("#models", TextSelectionList).selected) if self.optimizations else []
        field = lambda key: self.query_one(f"#{key}", Input).value  # noqa: E731
        data = settings.data_file(field("data").strip(), "Sample data")
        return {"name": name, "optimizations": opts, **({"data": data} if data else {}),
                **runtime_args(str(self.query_one("#runtime", Select).value), many=True),
                "batch_sizes": settings.whole_list(field("batch_sizes"), settings.batch_size, "Batch sizes"),
                "core_counts": settings.whole_list(field("core_counts"), settings.core_count, "Core counts"),
                "warmup": settings.warmup(field("warmup") or None, "Warm-up runs"),
                "iterations": settings.iterations(field("iterations") or None, "Timed runs")}

    def action_run(self) -> None:
        from sparsify_tui.errors import SparsifyError

        try:
            args = self.values()
        except SparsifyError as err:
            self.query_one("#error", Static).update(str(err))
            return
        self.dismiss(args)





class ApplyDialog(FormDialog[Optional[dict]]):
    """Apply an optimization and export the optimized .onnx: choose the optimization, the path and the sample
    data INT8 calibrates on. Dismisses with ``{"optimization": id, "out_path": path or None, "data": path or
    None}`` (out_path None = only the project copy; data None = synthetic calibration data)."""

    RUN_BUTTON_ID = "apply"

    DEFAULT_CSS = _dialog_css("ApplyDialog") + """
    ApplyDialog OptionList { height: auto; max-height: 7; margin-bottom: 1; }
    """

    BINDINGS = [
        Binding("escape", "close", "Cancel", id="benchmarks.apply.cancel", tooltip="Close without applying"),
    ]

    def __init__(self, optimizations: list[dict], default_paths: dict[str, str],
                 applied: Optional[dict[str, Any]] = None) -> None:
        super().__init__()
        self.optimizations = optimizations
        self.default_paths = default_paths
        self.applied = applied or {}
        self._auto_path = True

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Apply and export the optimized .onnx (pruned exactly; INT8 when the optimization "
                         "quantizes)", classes="bench-dialog-title")
            if not self.optimizations:
                yield Static("No optimizations yet: create one in Optimize (4) first.", classes="hint")
            else:
                yield OptionList(*[Option(self._label(o), id=o["id"]) for o in self.optimizations], id="opts")
            with Horizontal(classes="row"):
                yield Label("Export to")
                yield TextInput("", placeholder="path of the .onnx to write", id="out_path", compact=True)
            with Horizontal(classes="row"):
                yield Label("Sample data")
                yield PathInput("", placeholder="INT8 calibration: synthetic, or .npz: ctrl+b",
                                id="data", compact=True)
            yield DataSummary("#data")
            yield Static("", id="status", classes="hint")
            yield from form_buttons("Apply", "apply", run_disabled=not self.optimizations)

    def _label(self, o: dict) -> str:
        q = (o.get("quantization") or {}).get("enabled")
        state = self.applied.get(o["id"])
        return f"{o.get('name') or o['id']}  ({'INT8, ' if q else ''}{state or 'not applied'})"

    def on_mount(self) -> None:
        if self.optimizations:
            opts = self.query_one("#opts", OptionList)
            opts.highlighted = 0
            opts.focus()
            self._show(self.optimizations[0]["id"])

    def _show(self, opt_id: str) -> None:
        path = self.default_paths.get(opt_id, "")
        if self._auto_path:
            out = self.query_one("#out_path", TextInput)
            out.value = path
            out.show_end()  # the file name shows, not the start of a long folder
            self._auto_path = True
        status = self.query_one("#status", Static)
        room = (status.content_region.width or 60) - len("Project copy: ")
        status.update(Text.assemble("Project copy: ", elide_middle(path, room),
                                    "\nAnother path there also exports it."))

    @on(OptionList.OptionHighlighted, "#opts")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id:
            self._show(event.option.id)

    @on(OptionList.OptionSelected, "#opts")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#out_path", Input).focus()

    @on(Input.Changed, "#out_path")
    def _edited(self, event: Input.Changed) -> None:
        opts = self.query("#opts")
        if opts and opts.first().highlighted is not None:
            oid = self.optimizations[opts.first().highlighted]["id"]
            self._auto_path = event.value == self.default_paths.get(oid, "")

    def current(self) -> Optional[dict]:
        if not self.optimizations:
            return None
        idx = self.query_one("#opts", OptionList).highlighted or 0
        oid = self.optimizations[idx]["id"]
        from sparsify_tui import settings

        path = self.query_one("#out_path", Input).value.strip()
        if not path:
            raise ValueError("Give the path of the .onnx to write")
        if not path.endswith(".onnx"):
            raise ValueError("The export path must end in .onnx")
        data = settings.data_file(self.query_one("#data", Input).value.strip(), "Sample data")
        return {"optimization": oid, "out_path": None if path == self.default_paths.get(oid) else path,
                "data": data}

    def action_run(self) -> None:
        self.action_apply()

    def action_apply(self) -> None:
        from sparsify_tui.errors import SparsifyError

        try:
            result = self.current()
        except (ValueError, SparsifyError) as err:
            self.query_one("#error", Static).update(str(err))
            return
        if result is not None:
            self.dismiss(result)



