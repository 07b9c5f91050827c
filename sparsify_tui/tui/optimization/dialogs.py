"""Dialogs of the Optimization section: create, export, edit one layer's sparsity. All fit 80x24."""

from __future__ import annotations

from typing import ClassVar, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, TabbedContent, TabPane, TextArea

from sparsify_tui.tui.optimization.messages import ExportPreviewed, ExportWritten
from sparsify_tui.tui.widgets.dialogs import FormDialog, form_buttons
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.paths import PathInput
from sparsify_tui.tui.widgets.toggles import TextCheckbox
from sparsify_tui.tui.workers import app_work, post_result



FRAMEWORK_OPTIONS = [
    ("PyTorch + SparseML", "pytorch"),
    ("plain PyTorch (no SparseML)", "pytorch-plain"),
    ("Keras (tfmot)", "keras"),
    ("TensorFlow (custom loop)", "tensorflow"),
    ("recipe only", ""),
]

_DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 78; max-width: 100%; height: auto; max-height: 100%;
    border: thick $primary; background: $surface; padding: 0 1;
}}
{name} .dialog-title {{ text-style: bold; height: 1; }}
{name} .row {{ height: 3; }}
{name} .row Label {{ width: 10; padding: 1 0 0 0; }}
{name} .buttons {{ height: 3; align: right middle; }}
{name} .hint {{ color: $text-muted; height: auto; }}
{name} .msg {{ height: auto; max-height: 4; }}
"""


SEARCH_DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{ width: 74; max-width: 98%; height: auto; max-height: 100%;
    border: thick $accent; background: $surface; padding: 0 1; }}
{name} .dialog-title {{ text-style: bold; }}
{name} .row {{ height: 1; margin-top: 1; }}
{name} .row Label {{ width: 16; }}
{name} .row Input, {name} .row Select {{ width: 1fr; }}
{name} .dialog-error {{ color: $error; height: auto; }}
{name} .buttons {{ height: auto; align: right middle; margin-top: 1; }}
{name} .buttons Button {{ margin-left: 1; }}
"""
"""The layout of the dialogs that start a search job (INT8, budget): one-line fields, so they fit 80x24
(``.format(name=<the dialog class>)``)."""


METRIC_OPTIONS = [("auto (from outputs)", "auto"), ("top1", "top1"), ("nmse", "nmse"), ("kl", "kl"),
                  ("max_abs", "max_abs")]
"""The accuracy metrics a search dialog offers ("auto": the search picks it from the model's outputs)."""


def search_keys(prefix: str, job: str) -> list[Binding]:
    """The keys of a search dialog: ``escape`` closes, ``ctrl+r`` starts ``job`` (ids ``<prefix>.cancel`` / ``.run``)."""
    return [
        Binding("escape", "close", "Cancel", id=f"{prefix}.cancel", tooltip="Close without searching"),
        Binding("ctrl+r", "run", "Search", id=f"{prefix}.run", tooltip=f"Start the {job} job"),
    ]


class SearchDialog(FormDialog[Optional[dict]]):
    """Base of the dialogs that start a search job within an accuracy budget (INT8 search, budget search): a title,
    one-line text fields (name, max drop, sample data, labels key, then :meth:`more_fields`), the metric and
    :meth:`more_selects`, the error line and Search / Cancel; :attr:`SEARCH_DIALOG_CSS` layout, so it fits 80x24.
    Every widget id starts with :attr:`PREFIX` (``"i8d-name"``). The subclass gives :meth:`values` (the job
    arguments, from :meth:`search_values` and its own fields; raises a one-line error shown under the fields, the
    dialog staying open). ``ctrl+r`` runs, ``escape`` closes (the subclass's ``BINDINGS``)."""

    PREFIX: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    DATA_HINT: ClassVar[str] = ""
    INPUT: ClassVar[type[Input]] = TextInput

    def __init__(self, default_name: str, default_data: str = "") -> None:
        super().__init__()
        self.default_name = default_name
        self.default_data = default_data

    def more_fields(self) -> list[tuple[str, str, str, str]]:
        """The search's own text fields after the common ones: ``(label, id suffix, value, placeholder)``."""
        return []

    def more_selects(self) -> list[tuple[str, str, list, str]]:
        """The search's own selects after the metric: ``(label, id suffix, options, value)``."""
        return []

    def compose(self) -> ComposeResult:
        p = self.PREFIX
        with Vertical():
            yield Static(self.TITLE, classes="dialog-title")
            for label, key, value, hint in (
                    ("Name", "name", self.default_name, ""),
                    ("Max drop", "drop", "0.01", "in the metric's units, e.g. 0.01 = 1 point of top-1"),
                    ("Sample data", "data", self.default_data, self.DATA_HINT),
                    ("Labels key", "labels", "", "labels (if the .npz has it); or the key of the labels array"),
                    *self.more_fields()):
                with Horizontal(classes="row"):
                    yield Label(label)
                    if key == "data":  # completion and ctrl+b: the file browser, as the model field has
                        yield PathInput(value, placeholder=hint, id=f"{p}-{key}", compact=True)
                    else:
                        yield self.INPUT(value, placeholder=hint, id=f"{p}-{key}", compact=True)
            for label, key, options, value in (("Metric", "metric", METRIC_OPTIONS, "auto"), *self.more_selects()):
                with Horizontal(classes="row"):
                    yield Label(label)
                    yield Select(options, value=value, allow_blank=False, id=f"{p}-{key}", compact=True)
            yield from form_buttons("Search", f"{p}-ok", f"{p}-cancel")

    def on_mount(self) -> None:
        self.query_one(f"#{self.PREFIX}-name", Input).focus()

    def text(self, key: str) -> str:
        """The stripped text of field ``key`` (the id suffix)."""
        return self.query_one(f"#{self.PREFIX}-{key}", Input).value.strip()

    def choice(self, key: str):
        """The value of select ``key`` (the id suffix)."""
        return self.query_one(f"#{self.PREFIX}-{key}", Select).value

    def search_values(self) -> dict:
        """The common job arguments: ``name``, ``max_drop`` (checked), ``data`` (checked; None: synthetic),
        ``labels``, ``metric`` (None: auto). Raises ``SparsifyError`` (one line)."""
        from sparsify_tui import settings

        metric = self.choice("metric")
        return {"name": self.text("name"), "max_drop": settings.max_drop(self.text("drop"), "Max drop"),
                "data": settings.data_file(self.text("data"), "Sample data"),
                "labels": self.text("labels") or None, "metric": None if metric == "auto" else metric}

    def values(self) -> dict:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def action_run(self) -> None:
        try:
            self.dismiss(self.values())
        except Exception as err:  # noqa: BLE001 - shown in the dialog
            self.show_form_error(err)


def _float(text: str, name: str, lo: float = 0.0, hi: float = 1.0) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number between {lo} and {hi}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}")
    return v


class CreateOptimizationDialog(ModalScreen[Optional[dict]]):
    """Name, perf profile (or FLOPS), loss profile (or Approximated), structure (unstructured, or channel with its
    target), the value (sparsity, channel ratio R, or the target X), balance, quantize.

    Dismisses with ``{"name", "perf", "loss", "structure", "target", "sparsity", "balance", "quantize"}`` (``target``
    None for unstructured; ``sparsity`` is the value) or None. ``choices``: the Prune choices, ``(label,
    "structure[:target]", default value)`` (the ``CREATE_CHOICES`` of the structure panes), the first preselected.
    """

    DEFAULT_CSS = _DIALOG_CSS.format(name="CreateOptimizationDialog") + """
    CreateOptimizationDialog .row Input { width: 1fr; }
    CreateOptimizationDialog .row Select { width: 1fr; }
    CreateOptimizationDialog #create-sparsity, CreateOptimizationDialog #create-balance { width: 12; }
    CreateOptimizationDialog TextCheckbox { width: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="optimization.create.cancel", tooltip="Close without creating")]

    def __init__(self, perf_options: list[tuple[str, str]], loss_options: list[tuple[str, str]],
                 default_name: str = "optimization", calibrated_perf: Optional[str] = None, *,
                 choices: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.choices = choices
        self.default_values = {value: default for _label, value, default in choices}
        self.perf_options = perf_options
        self.loss_options = loss_options
        self.default_name = default_name
        self.calibrated_perf = calibrated_perf  # the perf profile a channel structure picks (its time model)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("New optimization", classes="dialog-title")
            with Horizontal(classes="row"):
                yield Label("Name")
                yield TextInput(self.default_name, id="create-name")
            with Horizontal(classes="row"):
                yield Label("Perf")
                yield Select(self.perf_options, value=self.perf_options[0][1], allow_blank=False, id="create-perf")
            with Horizontal(classes="row"):
                yield Label("Loss")
                yield Select(self.loss_options, value=self.loss_options[0][1], allow_blank=False, id="create-loss")
            with Horizontal(classes="row"):
                yield Label("Prune")
                yield Select([(label, value) for label, value, _default in self.choices], value=self.choices[0][1],
                             allow_blank=False, id="create-structure")
            with Horizontal(classes="row"):
                yield Label("Value")
                yield TextInput(self.choices[0][2], id="create-sparsity")
                yield Label(" Balance")
                yield TextInput("0.5", id="create-balance")
                yield TextCheckbox("INT8", id="create-quantize")
            yield Static("value: sparsity, ratio R or target X · balance: 0 = by time saved, 1 = by loss only",
                         classes="hint")
            yield Static("", classes="msg", id="create-msg")
            with Horizontal(classes="buttons"):
                yield Button("Create", variant="primary", id="create-ok")
                yield Button("Cancel", id="create-cancel")

    def on_mount(self) -> None:
        self.query_one("#create-name", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Select.Changed, "#create-structure")
    def _structure_changed(self, event: Select.Changed) -> None:
        inp = self.query_one("#create-sparsity", Input)
        if inp.value in self.default_values.values():  # not edited by hand: the new choice's default
            inp.value = self.default_values.get(str(event.value), inp.value)
        perf = self.query_one("#create-perf", Select)
        automatic = {self.perf_options[0][1], self.calibrated_perf}
        if perf.value in automatic:  # not chosen by hand: channel pruning takes the calibrated profile
            channel = str(event.value).startswith("channel")
            perf.value = self.calibrated_perf if channel and self.calibrated_perf else self.perf_options[0][1]

    def _submit(self) -> None:
        try:
            name = self.query_one("#create-name", Input).value.strip()
            if not name:
                raise ValueError("give the optimization a name")
            structure, _, target = str(self.query_one("#create-structure", Select).value).partition(":")
            text = self.query_one("#create-sparsity", Input).value
            value = _float(text, "the target", 1.0, 100.0) if target in ("speedup", "macs") else \
                _float(text, "the channel ratio" if target else "sparsity", 0.0, 0.99 if target else 1.0)
            values = {
                "name": name,
                "perf": self.query_one("#create-perf", Select).value,
                "loss": self.query_one("#create-loss", Select).value,
                "structure": structure,
                "target": target or None,
                "sparsity": value,
                "balance": _float(self.query_one("#create-balance", Input).value, "balance"),
                "quantize": self.query_one("#create-quantize", TextCheckbox).value,
            }
        except ValueError as err:
            self.query_one("#create-msg", Static).update(f"[b red]{err}[/]")
            return
        self.dismiss(values)

    @on(Input.Submitted)
    def _input_submitted(self) -> None:
        self._submit()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "create-ok":
            self._submit()
        else:
            self.dismiss(None)


class SparsityDialog(ModalScreen[Optional[str]]):
    """Edit one layer's sparsity: a number 0..0.99, or empty to release the override.

    Dismisses with the text typed ("" = release) or None when cancelled."""

    DEFAULT_CSS = _DIALOG_CSS.format(name="SparsityDialog") + """
    SparsityDialog > Vertical { width: 60; }
    SparsityDialog .row Input { width: 1fr; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="optimization.sparsity.cancel", tooltip="Close without change")]

    def __init__(self, layer: str, current: float) -> None:
        super().__init__()
        self.layer_name = layer
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Sparsity of {self.layer_name}", classes="dialog-title", markup=False)
            with Horizontal(classes="row"):
                yield Label("Sparsity")
                yield TextInput(f"{self.current:.3f}", id="sparsity-value")
            yield Static("0 to 0.99; kept when the optimization is re-evaluated. Empty: back to auto.",
                         classes="hint")
            yield Static("", classes="msg", id="sparsity-msg")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text:
            try:
                _float(text, "sparsity", 0.0, 0.99)
            except ValueError as err:
                self.query_one("#sparsity-msg", Static).update(f"[b red]{err}[/]")
                return
        self.dismiss(text)


class ExportDialog(ModalScreen[Optional[dict]]):
    """Export optimization `record_id`: recipe path (default ``<project>/recipes/<name>.yaml``), framework,
    preview, write. Writing calls ``optimization.export.export_optimization``, as ``sparsify-tui export``
    does. Dismisses with the write result (``recipe_path``, ``code_path``...) or None.
    """

    DEFAULT_CSS = _DIALOG_CSS.format(name="ExportDialog") + """
    ExportDialog > Vertical { height: 100%; }
    ExportDialog .row Input { width: 1fr; }
    ExportDialog .row Select { width: 1fr; }
    ExportDialog TabbedContent { height: 1fr; }
    ExportDialog TextArea { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Close", id="optimization.export.cancel", tooltip="Close the export dialog"),
        Binding("ctrl+s", "write", "Write files", id="optimization.export.write", tooltip="Write the recipe and code"),
    ]

    def __init__(self, project_id: str, record_id: str, default_path: str, framework: str = "pytorch-plain") -> None:
        super().__init__()
        self.project_id = project_id
        self.record_id = record_id
        self.default_path = default_path
        self.framework = framework
        self.result: Optional[dict] = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Export recipe and code", classes="dialog-title")
            with Horizontal(classes="row"):
                yield Label("Recipe")
                yield TextInput(self.default_path, id="export-path")
            with Horizontal(classes="row"):
                yield Label("Code")
                yield Select(FRAMEWORK_OPTIONS, value=self.framework, allow_blank=False, id="export-framework")
            with TabbedContent(id="export-preview"):
                with TabPane("recipe.yaml", id="preview-recipe"):
                    yield TextArea("", language="yaml", read_only=True, id="export-yaml")
                with TabPane("code", id="preview-code"):
                    yield TextArea("", language="python", read_only=True, id="export-code")
            yield Static("", classes="msg", id="export-msg")
            with Horizontal(classes="buttons"):
                yield Button("Write", variant="primary", id="export-write")
                yield Button("Close", id="export-close")

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()
        self._refresh_preview()

    def _values(self) -> tuple[str, str]:
        path = self.query_one("#export-path", Input).value.strip() or self.default_path
        fw = self.query_one("#export-framework", Select).value
        return path, (fw if isinstance(fw, str) else "")

    def _refresh_preview(self) -> None:
        path, fw = self._values()
        self._preview(path, fw)

    # the answers (texts or files, or why not) are shown in the dialog: errors come back in the messages
    @app_work(group="export-preview", description="render export preview")
    def _preview(self, path: str, fw: str) -> None:
        from sparsify_tui.services.optimizations import render_export

        try:
            out = render_export(self.app.workspace, self.project_id, self.record_id, recipe_path=path, framework=fw)
        except Exception as err:  # noqa: BLE001 - shown in the dialog
            post_result(self, ExportPreviewed(None, err))
            return
        post_result(self, ExportPreviewed(out))

    @app_work(group="export-write", description="write export")
    def _do_write(self, path: str, fw: str) -> None:
        from sparsify_tui.services.optimizations import export_optimization

        try:
            result = export_optimization(self.app.workspace, self.project_id, self.record_id, recipe_path=path,
                                         framework=fw or None, flags={"recipe_path": "Recipe path"})
        except Exception as err:  # noqa: BLE001 - shown in the dialog
            post_result(self, ExportWritten(None, err))
            return
        post_result(self, ExportWritten(result))

    def _show_error(self, error: BaseException) -> None:
        self.query_one("#export-msg", Static).update(f"[b red]{_escape(str(error))}[/]")

    @on(ExportPreviewed)
    def _previewed(self, message: ExportPreviewed) -> None:
        if message.export is None:
            self._show_error(message.error)
            return
        out = message.export
        self.query_one("#export-yaml", TextArea).load_text(out["recipe"])
        self.query_one("#export-code", TextArea).load_text(out["code"] or "# recipe only: no code")
        warn = out.get("warnings") or []
        self.query_one("#export-msg", Static).update(("[b yellow]warning:[/] " + _escape(warn[0])) if warn else "")

    @on(ExportWritten)
    def _written(self, message: ExportWritten) -> None:
        if message.result is None:
            self._show_error(message.error)
            return
        self.result = message.result
        paths = [self.result["recipe_path"]] + ([self.result["code_path"]] if self.result.get("code_path") else [])
        self.query_one("#export-msg", Static).update("[b green]written:[/] " + _escape("  ".join(paths)))
        self.app.notify("Exported " + "  ".join(paths), title="Export", timeout=8)

    @on(Select.Changed, "#export-framework")
    def _fw_changed(self) -> None:
        self._refresh_preview()

    @on(Input.Submitted, "#export-path")
    def _path_submitted(self) -> None:
        self._refresh_preview()

    def action_write(self) -> None:
        path, fw = self._values()
        self._do_write(path, fw)

    def action_cancel(self) -> None:
        self.dismiss(self.result)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "export-write":
            self.action_write()
        else:
            self.dismiss(self.result)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
