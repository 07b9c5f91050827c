"""Modal dialogs shared by every section: errors and yes/no confirmations.

Usage from any widget::

    self.app.push_screen(ErrorDialog("Model file is truncated: ..."))
    self.app.push_screen(ConfirmDialog("Delete project 'resnet'?"), callback)  # callback(bool)
    ok = await self.app.push_screen_wait(ConfirmDialog(...))                    # inside a worker
"""

from __future__ import annotations

from typing import Generic, TypeVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

ResultT = TypeVar("ResultT")


def error_message(error: BaseException) -> str:
    """One-line text for an exception: SparsifyError messages as is, others prefixed with their type."""
    from sparsify_tui.errors import SparsifyError

    if isinstance(error, SparsifyError):
        return str(error)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"Unexpected error ({type(error).__name__}): {text}" if text else f"Unexpected error: {type(error).__name__}"


class ErrorDialog(ModalScreen[None]):
    """Shows one error message; `enter`/`escape` closes it. The app stays up."""

    DEFAULT_CSS = """
    ErrorDialog { align: center middle; }
    ErrorDialog > Vertical {
        width: 70; max-width: 95%; height: auto; max-height: 90%;
        border: thick $error; background: $surface; padding: 0 1;
    }
    ErrorDialog .dialog-title { text-style: bold; color: $error; padding: 0 0 1 0; }
    ErrorDialog VerticalScroll { height: auto; max-height: 14; }
    ErrorDialog Horizontal { height: auto; align: right middle; padding-top: 1; }
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
            with Horizontal():
                yield Button("OK", variant="error", id="ok")

    def on_mount(self) -> None:
        self.query_one("#ok", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """Asks a yes/no question; dismisses with True (`y`, confirm button) or False (`n`, `escape`)."""

    DEFAULT_CSS = """
    ConfirmDialog { align: center middle; }
    ConfirmDialog > Vertical {
        width: 60; max-width: 95%; height: auto;
        border: thick $warning; background: $surface; padding: 0 1;
    }
    ConfirmDialog #question { padding: 1 0; }
    ConfirmDialog Horizontal { height: auto; align: right middle; }
    ConfirmDialog Button { margin-left: 1; }
    """

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
            with Horizontal():
                yield Button("Cancel (n)", id="no")
                yield Button(f"{self.confirm_label} (y)", variant="error", id="yes")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


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
