"""Dialogs of the Optimization section: create, export, edit one layer's sparsity. All fit 80x24."""

from __future__ import annotations

from typing import ClassVar, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Select, Static, TabbedContent, TabPane, TextArea

from sparsify_tui.settings import METRICS
from sparsify_tui.tui.optimization.messages import ExportPreviewed, ExportWritten, SearchSubmitted
from sparsify_tui.tui.widgets.data_summary import DataSummary
from sparsify_tui.tui.widgets.dialogs import (FormDialog, dialog_css, error_message, field_row, form_buttons,
                                              select_row)
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


def _dialog_css(name: str, width: int = 78) -> str:
    """The one dialog style (:func:`~sparsify_tui.tui.widgets.dialogs.dialog_css`) and a message line."""
    return dialog_css(name, width) + f"""
    {name} .msg {{ height: auto; max-height: 4; }}
    """


METRIC_HINT = "auto; top1, nmse, kl, max_abs or FILE.py:FUNCTION (yours)"
"""What a search dialog's Metric field takes: "auto" (the search picks it from the model's outputs), a built-in
metric (suggested as it is typed), or a metric of the user's own (``--metric FILE.py:FUNCTION``)."""


def search_keys(prefix: str, job: str) -> list[Binding]:
    """The keys of a search dialog: ``escape`` closes, ``ctrl+r`` starts ``job`` (ids ``<prefix>.cancel`` / ``.run``)."""
    return [
        Binding("escape", "close", "Cancel", id=f"{prefix}.cancel", tooltip="Close without searching"),
        Binding("ctrl+r", "run", "Search", id=f"{prefix}.run", tooltip=f"Start the {job} job"),
    ]


class SearchDialog(FormDialog[Optional[dict]]):
    """Base of the dialogs that start a search job within an accuracy budget (INT8 search, budget search): a title,
    one-line text fields (name, max drop, sample data with its summary line, labels key, the metric: a built-in one
    or the user's own ``FILE.py:FUNCTION``, then :meth:`more_fields`), :meth:`more_selects`, the error line and
    Search / Cancel in the one dialog style, so it fits 80x24. Every widget id starts with :attr:`PREFIX`
    (``"i8d-name"``). The subclass gives :meth:`values` (the job arguments, from :meth:`search_values` and its own
    fields). ``ctrl+r`` runs: the arguments are checked (here, then by the job kind's settings and the job's own
    check, in a worker) and the job submitted; any refusal is said on the error line and the dialog stays open with
    what was typed (a refusal closed the budget dialog and dropped the path). Dismisses with the job submitted, or
    None."""

    PREFIX: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    DATA_HINT: ClassVar[str] = ""
    JOB_TYPE: ClassVar[str] = ""
    INPUT: ClassVar[type[Input]] = TextInput

    def __init__(self, project_id: str, default_name: str, default_data: str = "") -> None:
        super().__init__()
        self.project_id = project_id
        self.default_name = default_name
        self.default_data = default_data

    @property
    def RUN_BUTTON_ID(self) -> str:  # noqa: N802 - FormDialog's name
        return f"{self.PREFIX}-ok"

    def more_fields(self) -> list[tuple[str, str, str, str]]:
        """The search's own text fields after the common ones: ``(label, id suffix, value, placeholder)``."""
        return []

    def more_selects(self) -> list[tuple[str, str, list, str]]:
        """The search's own selects after the text fields: ``(label, id suffix, options, value)``."""
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
                    ("Metric", "metric", "", METRIC_HINT), *self.more_fields()):
                # the data file: completion and ctrl+b, the file browser, as the model field has
                if key == "data":
                    field = PathInput(value, placeholder=hint, id=f"{p}-{key}", compact=True)
                else:
                    field = self.INPUT(value, placeholder=hint, id=f"{p}-{key}", compact=True,
                                       suggester=SuggestFromList(("auto", *METRICS)) if key == "metric" else None)
                yield from field_row(label, field)
                if key == "data":
                    yield DataSummary(f"#{p}-data")
            for label, key, options, value in self.more_selects():
                yield from select_row(label, f"{p}-{key}", options, value)
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

        return {"name": self.text("name"), "max_drop": settings.max_drop(self.text("drop"), "Max drop"),
                "data": settings.data_file(self.text("data"), "Sample data"),
                "labels": self.text("labels") or None, "metric": settings.metric(self.text("metric"), "Metric")}

    def values(self) -> dict:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def action_run(self) -> None:
        from sparsify_tui.errors import SparsifyError

        try:
            values = self.values()
        except SparsifyError as err:
            self.show_form_error(err)
            return
        self.show_form_error("")
        self.query_one(f"#{self.RUN_BUTTON_ID}", Button).disabled = True
        self._submit_search(values)

    @app_work(group="opt-search-submit", description="submit a search job")
    def _submit_search(self, values: dict) -> None:
        """The job kind's settings (:mod:`sparsify_tui.services.job_settings`), a free name, and the job's own check
        of the data and labels (``jobs.submit``); posts :class:`SearchSubmitted` with the job or the refusal."""
        from sparsify_tui.jobs import submit
        from sparsify_tui.services.job_settings import budget_settings, int8_settings
        from sparsify_tui.services.optimizations import check_name_free

        ws = self.app.workspace
        validate = {"int8_search": int8_settings, "budget_search": budget_settings}[self.JOB_TYPE]
        try:
            s = validate(ws.get_project(self.project_id), values)
            check_name_free(ws, self.project_id, s.get("name"))
            args = {k: v for k, v in s.items() if k != "dims" and v is not None}
            post_result(self, SearchSubmitted(self.JOB_TYPE, submit(ws, self.project_id, self.JOB_TYPE, args)))
        except Exception as err:  # noqa: BLE001 - the answer to the form: said on it, the dialog stays open
            post_result(self, SearchSubmitted(self.JOB_TYPE, None, err))

    @on(SearchSubmitted)
    def _search_submitted(self, message: SearchSubmitted) -> None:
        message.stop()
        if message.job is None:
            self.query_one(f"#{self.RUN_BUTTON_ID}", Button).disabled = False
            self.show_form_error(error_message(message.error))
            return
        self.dismiss(message.job)


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
    ``loss_structures``: the structure each loss profile measured (by id): the Loss choice offers only the profiles
    of the chosen structure (and Approximated), so an unstructured optimization is never built on channel groups.
    """

    DEFAULT_CSS = _dialog_css("CreateOptimizationDialog") + """
    CreateOptimizationDialog #create-sparsity, CreateOptimizationDialog #create-balance { width: 12; }
    CreateOptimizationDialog .row > Label.inline { width: auto; margin: 0 1 0 2; }
    CreateOptimizationDialog TextCheckbox { width: auto; margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="optimization.create.cancel", tooltip="Close without creating")]

    def __init__(self, perf_options: list[tuple[str, str]], loss_options: list[tuple[str, str]],
                 default_name: str = "optimization", calibrated_perf: Optional[str] = None, *,
                 choices: list[tuple[str, str, str]], loss_structures: Optional[dict] = None) -> None:
        super().__init__()
        self.loss_structures = dict(loss_structures or {})
        self.choices = choices
        self.default_values = {value: default for _label, value, default in choices}
        self.perf_options = perf_options
        self.loss_options = loss_options
        self.default_name = default_name
        self.calibrated_perf = calibrated_perf  # the perf profile a channel structure picks (its time model)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("New optimization", classes="dialog-title")
            yield from field_row("Name", TextInput(self.default_name, id="create-name", compact=True))
            yield from select_row("Perf profile", "create-perf", self.perf_options, self.perf_options[0][1])
            self._loss_shown = self._loss_options_for(self.choices[0][1])
            yield from select_row("Loss profile", "create-loss", self._loss_shown, self._loss_shown[0][1])
            yield from select_row("Prune", "create-structure",
                                  [(label, value) for label, value, _default in self.choices], self.choices[0][1])
            with Horizontal(classes="row"):
                yield Label("Value")
                yield TextInput(self.choices[0][2], id="create-sparsity", compact=True)
                yield Label("Balance", classes="inline")
                yield TextInput("0.5", id="create-balance", compact=True)
                yield TextCheckbox("INT8", id="create-quantize", compact=True)
            yield Static("value: sparsity, ratio R or target X · balance: 0 = by time saved, 1 = by loss only",
                         classes="hint")
            yield Static("", classes="msg", id="create-msg")
            with Horizontal(classes="buttons"):
                yield Button("Create", variant="primary", id="create-ok", compact=True)
                yield Button("Cancel", id="create-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#create-name", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _loss_options_for(self, choice: str) -> list[tuple[str, str]]:
        """The loss profiles a choice ``structure[:target]`` can read: those that measured its structure, and
        Approximated (an option whose structure is unknown stays)."""
        structure = str(choice).partition(":")[0]
        return [(label, value) for label, value in self.loss_options
                if self.loss_structures.get(value, structure) == structure]

    @on(Select.Changed, "#create-structure")
    def _structure_changed(self, event: Select.Changed) -> None:
        loss = self.query_one("#create-loss", Select)
        shown = self._loss_options_for(str(event.value))
        if shown != self._loss_shown:
            keep = loss.value
            self._loss_shown = shown
            loss.set_options(shown)
            loss.value = keep if any(v == keep for _label, v in shown) else shown[0][1]
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

    DEFAULT_CSS = _dialog_css("SparsityDialog", 60) + """
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
            yield from field_row("Sparsity", TextInput(f"{self.current:.3f}", id="sparsity-value", compact=True))
            yield Static("0 to 0.99; kept when the optimization is re-evaluated. Empty: back to auto.",
                         classes="hint")
            yield Static("", classes="msg", id="sparsity-msg")
            with Horizontal(classes="buttons"):
                yield Button("Set (enter)", variant="primary", id="sparsity-ok", compact=True)
                yield Button("Cancel", id="sparsity-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "sparsity-ok":
            self._set(self.query_one("#sparsity-value", Input).value)
        else:
            self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self._set(event.value)

    def _set(self, value: str) -> None:
        text = value.strip()
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

    DEFAULT_CSS = _dialog_css("ExportDialog") + """
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
            yield from field_row("Recipe", TextInput(self.default_path, id="export-path", compact=True))
            yield from select_row("Code", "export-framework", FRAMEWORK_OPTIONS, self.framework)
            with TabbedContent(id="export-preview"):
                with TabPane("recipe.yaml", id="preview-recipe"):
                    yield TextArea("", language="yaml", read_only=True, id="export-yaml")
                with TabPane("code", id="preview-code"):
                    yield TextArea("", language="python", read_only=True, id="export-code")
            yield Static("", classes="msg", id="export-msg")
            with Horizontal(classes="buttons"):
                yield Button("Write", variant="primary", id="export-write", compact=True)
                yield Button("Close", id="export-close", compact=True)

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
