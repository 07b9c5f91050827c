"""Modal dialogs shared by every section: errors, yes/no confirmations, the full record of one row; and the one
dialog style every dialog uses (issue 30: three styles, two button orders).

**The dialog style** (:func:`dialog_css`): centred, one frame (thick ``$primary`` border), a bold title, one-line
fields in rows (a label 16 wide, the field in the rest: :func:`field_row`, :func:`select_row`), the one-line error
under the fields (``#error``, in ``$error``), then the buttons on the right, the action first and Cancel (or Close)
last, compact (one line each: :func:`form_buttons`). The footer of the screen under a dialog is hidden
(:class:`~sparsify_tui.tui.widgets.footer.KeysFooter`). A bad value is said on the error line and the dialog
stays open with everything typed. A new choice in a form is one line: ``yield from select_row(...)``.

Usage from any widget::

    self.app.push_screen(ErrorDialog("Model file is truncated: ..."))
    self.app.push_screen(ConfirmDialog("Delete project 'resnet'?"), callback)  # callback(bool)
    ok = await self.app.push_screen_wait(ConfirmDialog(...))                    # inside a worker
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Optional, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from sparsify_tui.tui.workers import app_work, post_result

ResultT = TypeVar("ResultT")

DIALOG_WIDTH = 74
"""Width of a dialog's frame (cells; never wider than the screen)."""


def dialog_css(name: str, width: int = DIALOG_WIDTH, border: str = "$primary") -> str:
    """The one dialog style (module docstring) for dialog class ``name``, ``width`` cells wide (``border``: the
    frame's colour; an error says it with ``$error``). A dialog adds its own rules after it."""
    return f"""
    {name} {{ align: center middle; }}
    {name} > Vertical {{ width: {width}; max-width: 100%; height: auto; max-height: 100%;
        border: thick {border}; background: $surface; padding: 0 1; }}
    {name} .dialog-title {{ text-style: bold; height: auto; margin-bottom: 1; }}
    {name} .row {{ height: 1; }}
    {name} .row > Label {{ width: 16; color: $text-muted; }}
    {name} .row > Input, {name} .row > Select {{ width: 1fr; }}
    {name} .hint {{ color: $text-muted; height: auto; }}
    {name} #error, {name} .dialog-error {{ color: $error; height: auto; }}
    {name} .buttons {{ height: auto; align-horizontal: right; padding: 1 0 0 0; }}
    {name} .buttons Button {{ margin-left: 2; min-width: 8; }}
    """


def field_row(label: str, field: Any) -> ComposeResult:
    """One row of a form: ``label`` (16 cells) and ``field`` (the rest). ``yield from field_row(...)``."""
    from textual.widgets import Label

    with Horizontal(classes="row"):
        yield Label(label)
        yield field


def select_row(label: str, select_id: str, options: list, value: Any) -> ComposeResult:
    """One row of a form with a choice: ``label`` and a compact ``Select`` of ``options`` (``(text, value)``
    pairs) set to ``value``, id ``select_id``. ``yield from select_row(...)``: a new choice is one line."""
    from textual.widgets import Select

    yield from field_row(label, Select(options, value=value, allow_blank=False, id=select_id, compact=True))


def error_message(error: BaseException) -> str:
    """One-line text for an exception: SparsifyError messages as is, others prefixed with their type."""
    from sparsify_tui.errors import SparsifyError

    if isinstance(error, SparsifyError):
        return str(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"Unexpected error ({type(error).__name__}): {text}" if text else f"Unexpected error: {type(error).__name__}"


class ErrorDialog(ModalScreen[None]):
    """Shows one error message; `enter`/`escape` closes it. The app stays up."""

    DEFAULT_CSS = dialog_css("ErrorDialog", 70, border="$error") + """
    ErrorDialog .dialog-title { color: $error; }
    ErrorDialog VerticalScroll { height: auto; max-height: 14; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="dialog.error.close", tooltip="Close this error message"),
    ]

    def __init__(self, message: str, title: str = "Error") -> None:
        super().__init__()
        self.message = message
        self.dialog_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.dialog_title, classes="dialog-title")
            with VerticalScroll():
                yield Static(self.message, id="error-message", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("OK", variant="error", id="ok", compact=True)

    def on_mount(self) -> None:
        self.query_one("#ok", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Asks a yes/no question; dismisses with True (`y`, confirm button) or False (`n`, `escape`)."""

    DEFAULT_CSS = dialog_css("ConfirmDialog", 60)

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="dialog.confirm.yes", tooltip="Confirm"),
        Binding("n,escape", "answer(False)", "No", id="dialog.confirm.no", tooltip="Cancel"),
    ]

    def __init__(self, question: str, confirm_label: str = "Delete", title: str = "Confirm") -> None:
        super().__init__()
        self.question = question
        self.confirm_label = confirm_label
        self.dialog_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.dialog_title, classes="dialog-title")
            yield Static(self.question, id="question", markup=False)
            with Horizontal(classes="buttons"):  # the action first, Cancel last (every dialog)
                yield Button(f"{self.confirm_label} (y)", variant="error", id="yes", compact=True)
                yield Button("Cancel (n)", id="no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class KeyBuffer(ModalScreen[None]):
    """Holds the keys typed while a dialog's data is read in a worker, for the dialog (``App.hold_keys`` /
    ``App.show_dialog``). Typed right after `n`, a name went to the section under the coming dialog ("2" even
    switched sections). It draws nothing; `escape` gives up the dialog; after ``TIMEOUT_S`` it steps aside."""

    DEFAULT_CSS = """
    KeyBuffer { background: transparent; }
    """

    TIMEOUT_S = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[tuple[str, Optional[str]]] = []
        self.cancelled = False

    def on_mount(self) -> None:
        self.set_timer(self.TIMEOUT_S, self.give_up)

    def on_key(self, event) -> None:
        event.stop()
        event.prevent_default()
        if event.key == "escape":
            self.give_up()
        else:
            self.keys.append((event.key, event.character))

    def give_up(self) -> None:
        """No dialog after all (escape, or it took too long): the keys are dropped, the screen below is back (at
        once, or when a dialog on top of this one closes)."""
        self.cancelled = True
        if self.is_current:
            self.dismiss(None)

    def on_screen_resume(self) -> None:
        # only while it is the top screen: a resume queued when it was pushed can arrive after show_dialog has
        # already replaced it with the dialog (a fast worker), and dismissing then closed the dialog instead
        if self.cancelled and self.is_current:
            self.dismiss(None)


class FormDialog(ModalScreen[ResultT], Generic[ResultT]):
    """Base of the modal forms that start work (add a profile, create a benchmark, apply an optimization).

    The subclass composes its fields, an ``Static#error`` line and buttons; the button whose id is
    :attr:`RUN_BUTTON_ID` runs :meth:`action_run`, any other button closes. ``enter`` in an Input runs,
    ``escape`` should be bound to ``close``. :meth:`show_form_error` puts a one-line problem on the form.
    """

    RUN_BUTTON_ID = "run"

    def action_run(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def action_close(self) -> None:
        self.dismiss(None)

    def show_form_error(self, message: object) -> None:
        self.query_one("#error", Static).update(str(message))

    def start_job(self, job_type: str, submitted: Callable[..., Message], **options: Any) -> bool:
        """Start the form's job: the subclass's ``values()`` (the job arguments; a ``SparsifyError`` is shown on the
        form and nothing starts), then :meth:`submit_job`, the run button disabled until the answer. Returns
        whether it was submitted."""
        from sparsify_tui.errors import SparsifyError

        try:
            args = self.values()  # type: ignore[attr-defined]
        except SparsifyError as err:
            self.show_form_error(err)
            return False
        self.show_form_error("")
        self.query_one(f"#{self.RUN_BUTTON_ID}", Button).disabled = True
        self.submit_job(job_type, args, submitted, **options)
        return True

    @app_work(group="form-submit", description="submit the form's job")
    def submit_job(self, job_type: str, args: dict, submitted: Callable[..., Message], **options: Any) -> None:
        """Submit job ``job_type`` with ``args`` for the dialog's ``project_id`` (in a worker thread;
        ``options`` go to :func:`sparsify_tui.jobs.submit`); posts ``submitted(job)``, or ``submitted(None, error)``
        when the job is refused (the form shows it)."""
        from sparsify_tui import jobs

        try:
            job = jobs.submit(self.app.workspace, self.project_id, job_type, args, **options)
        except Exception as err:  # noqa: BLE001 - refused job args: shown in the form
            post_result(self, submitted(None, err))
            return
        post_result(self, submitted(job))

    @on(Input.Submitted)
    def _form_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    @on(Button.Pressed)
    def _form_button(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == self.RUN_BUTTON_ID:
            self.action_run()
        else:
            self.action_close()


def form_buttons(run_label: str = "Run", run_id: str = "run", cancel_id: str = "cancel", *,
                 run_disabled: bool = False, cancel_label: str = "Cancel") -> ComposeResult:
    """The end of a :class:`FormDialog`'s form: its one-line error (``Static#error``) and the row of the run button
    (``run_id``, which :attr:`FormDialog.RUN_BUTTON_ID` names) and Cancel. ``yield from`` it inside the form."""
    yield Static("", id="error", classes="dialog-error")
    with Horizontal(classes="buttons"):
        yield Button(run_label, variant="primary", id=run_id, disabled=run_disabled, compact=True)
        yield Button(cancel_label, id=cancel_id, compact=True)


def format_field(value: object) -> str:
    """A record value as text, never cut: floats with 6 significant digits, lists/tuples joined with ", ",
    dicts as ``key=value`` pairs, None as "-"."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_field(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_field(v) for v in value) or "-"
    return str(value)


class RecordDialog(ModalScreen[None]):
    """The full record of one row (a layer, a node, a bar): every field on its own line, nothing cut (long
    values wrap); arrows/page keys scroll, `escape` or `enter` closes. ``fields``: (name, value) pairs in the
    order shown; values are formatted by :func:`format_field`."""

    DEFAULT_CSS = dialog_css("RecordDialog", 96) + """
    RecordDialog .dialog-title { margin-bottom: 0; }
    RecordDialog VerticalScroll { height: auto; max-height: 100%; }
    RecordDialog .hint { color: $text-muted; height: 1; }
    """

    BINDINGS = [
        Binding("escape,enter", "close", "Close", id="dialog.record.close", tooltip="Close the record"),
    ]

    #: the widest the field names' column gets (cells); longer names wrap (at 80 columns the values get the rest)
    NAME_WIDTH = 28

    def __init__(self, title: str, fields: list) -> None:
        super().__init__()
        self.dialog_title = title
        self.fields = [(str(k), format_field(v)) for k, v in fields]

    def compose(self) -> ComposeResult:
        from rich.table import Table

        table = Table.grid(padding=(0, 1))
        # a long field name wraps at its words (at most NAME_WIDTH cells): the values keep the rest of the width
        table.add_column(style="bold", max_width=self.NAME_WIDTH)
        table.add_column(overflow="fold")
        for name, value in self.fields:
            table.add_row(name, value)
        with Vertical():
            yield Static(self.dialog_title, classes="dialog-title", markup=False)
            with VerticalScroll(id="record-scroll"):
                yield Static(table, id="record-fields")
            yield Static("escape/enter: close · arrows: scroll", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#record-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def text(self) -> str:
        """Every field as ``name: value`` lines (for tests and logs)."""
        return "\n".join(f"{k}: {v}" for k, v in self.fields)


def analysis_fields(node: Optional[dict]) -> list:
    """The (name, value) fields of a node of the stored model analysis (``analyze --json`` node): what it is,
    its weight and shapes and its counts. [] when ``node`` is None."""
    if not node:
        return []
    from sparsify_tui.tui.widgets.tables import format_shape

    return [
        ("Node id", node.get("id")), ("Op type", node.get("op_type")),
        ("Graph", node.get("graph") or "main"),
        ("Weight", node.get("weight_name")), ("Weight shape", format_shape(node.get("weight_shape"))
                                               if node.get("weight_shape") else None),
        ("Bias", node.get("bias_name")),
        ("Input shapes", format_shape(node.get("input_shapes"))),
        ("Output shapes", format_shape(node.get("output_shapes"))),
        ("Params", node.get("params")), ("Zero params", node.get("zero_params")),
        ("Prunable layer", bool(node.get("prunable"))),
        ("MACs", node.get("macs")), ("FLOPs", node.get("flops")),
        ("Attributes", node.get("attrs") or None),
    ]


def fresh_name(base: str, taken) -> str:
    """``base`` if no record is named so, else the next free number: ``baseline`` -> ``baseline 2``,
    ``benchmark 1`` -> ``benchmark 2`` (add dialogs propose it, so a new record never repeats a name)."""
    import re

    taken = {str(t) for t in taken if t}
    if base not in taken:
        return base
    m = re.fullmatch(r"(.*?) (\d+)", base)
    stem, k = (m.group(1), int(m.group(2)) + 1) if m else (base, 2)
    while f"{stem} {k}" in taken:
        k += 1
    return f"{stem} {k}"
