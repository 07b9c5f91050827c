"""Text fields: :class:`TextInput` (keys in typing order), :class:`SectionField` and :class:`SectionTextArea` (a field
in a section that takes the keys only while it is edited), :class:`FieldError` (the line under a field that says
what is wrong with its value).

Textual hands a key to the focused widget; the ``Input`` inserts a printable character at once, but its editing
keys (backspace, delete, arrows, home/end, enter) are bindings, which Textual runs only after the key has bubbled up
through every container to the App. Typed faster than the event loop turns (a fast typist over SSH, a paste,
``tmux send-keys``), "backspace ×4, chan15" into a name field then came out as "ch": the four backspaces ran after
the six characters (issue 24, bug 8). A ``TextInput`` takes every key in the order typed (:meth:`TextInput.takes_key`)
and runs the bindings of each when it reaches it: its own (editing keys), then those of its dialog, section and the
App (escape, ctrl+s). A printable key that reaches a field which cannot take it any more (its dialog was closed by
the escape typed before it, the focus moved, a section field is not being edited) runs the bindings it has where
the focus is now: "escape 5" typed at once closes a dialog and shows section 5 (issue 30, bug 4).

**One keyboard model in the sections** (issue 30): a field of a section (the Optimization settings, the project's
Settings, the LR modifiers) is a tab stop like any other widget, and while it is not being edited the section keys
and the app's keys work on it (``4 m 5`` showed Benchmarks' "5" typed into the Sparsity field). ``enter`` or a click
starts an edit (the text selected: typing replaces it); ``enter`` checks the value and keeps it (a bad one: one line
under the field, the edit goes on), ``escape`` puts back the value from before the edit. Fields of dialogs are forms
and take the keys at once (no section keys there).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from textual import events
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import Input, Static, TextArea
from textual.widgets.input import Selection


class TextInput(Input):
    """An ``Input`` whose keys take effect in typing order (module docstring)."""

    def takes_key(self, event: events.Key) -> bool:
        """Every key goes to the field first, so each takes effect in the order typed (module docstring)."""
        return True

    def update_node_styles(self, animate: bool = True) -> None:
        """Restyle the field on a class change, once it is in the DOM. Before (``compact`` and the validation classes
        are set in ``Input.__init__``), Textual restyled the lone field each time, then styled it again when it was
        mounted: 4 ms a field, most of building the Pruning tab's five (and every table's filter field)."""
        if self.is_attached:
            super().update_node_styles(animate)

    def can_type(self) -> bool:
        """The field takes printable keys now: it has the focus on the screen shown."""
        return self.has_focus and self.screen is self.app.screen

    async def _on_key(self, event: events.Key) -> None:
        if event.is_printable:
            if not self.can_type():  # typed before a dialog closed, the focus moved or the edit ended
                event.stop()
                event.prevent_default()
                await self.app._check_bindings(event.key, priority=True) or await self.app._check_bindings(event.key)
            return  # else Input._on_key inserts it (Textual calls each class's own handler)
        bindings = self._bindings.copy()
        if self.app._keymap:  # the user's keymap.json, as Textual applies it to the binding chain
            bindings.apply_keymap(self.app._keymap)
        for binding in bindings.key_to_bindings.get(event.key, ()):
            if binding.priority:
                continue  # the App ran it already
            if await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()  # nor Input's handler, nor the App's check of bindings
                return
        # not the field's own: the bindings of its dialog, section and the App, now, before the key typed next
        if await self.app._check_bindings(event.key):
            event.stop()
            event.prevent_default()

    def show_end(self, _wait: bool = True) -> None:
        """Put the cursor after the last character and scroll it into view (a long path shows its file name), now
        or, before the field has a size, after the next refresh."""
        self.cursor_position = len(self.value)
        if self.size.width:
            self.scroll_to(x=self.max_scroll_x, animate=False, immediate=True)
        elif _wait:
            self.call_after_refresh(self.show_end, False)


class FieldError(Static):
    """The line under a field (or a row of fields) that says what is wrong with the value typed; hidden while
    there is nothing to say. A :class:`SectionField` finds its own by id (``error_id``)."""

    DEFAULT_CSS = """
    FieldError { height: auto; color: $error; padding: 0 1; display: none; }
    FieldError.-shown { display: block; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", markup=False, **kwargs)

    def say(self, text: Optional[str]) -> None:
        """Show ``text`` (None or "": hide the line)."""
        self.update(text or "")
        self.set_class(bool(text), "-shown")

    @property
    def text(self) -> str:
        return str(self.render()) if self.has_class("-shown") else ""


_INPUT_ACTIONS = {b.action.split("(")[0] for b in Input.BINDINGS if isinstance(b, Binding)}


class SectionField(TextInput):
    """A one-line field of a section: a tab stop that takes the keys only while it is edited (module docstring).

    ``check(value) -> error text or None`` judges a value on ``enter`` (and when the focus leaves during an edit); a
    bad value is said on the :class:`FieldError` with id ``error_id`` (found in the field's ancestors), and the edit
    goes on. A good one ends the edit and posts ``Input.Submitted`` (only if it changed, when the focus left).
    """

    DEFAULT_CSS = """
    SectionField.-textual-compact:focus { text-style: reverse; }
    SectionField.-textual-compact.-editing:focus { text-style: underline; }
    """

    BINDINGS = [
        Binding("enter", "edit", "Edit", id="field.edit", tooltip="Edit this field (typing replaces its value)"),
        Binding("enter", "submit", "Keep", id="field.keep", tooltip="Check the value typed and keep it"),
        Binding("escape", "revert", "Revert", id="field.revert",
                tooltip="Put back the value from before this edit (and stop editing)"),
    ]

    editing: reactive[bool] = reactive(False, init=False)

    def __init__(self, *args: Any, check: Optional[Callable[[str], Optional[str]]] = None,
                 error_id: Optional[str] = None, **kwargs: Any) -> None:
        kwargs.setdefault("select_on_focus", False)
        super().__init__(*args, **kwargs)
        self.check = check
        self.error_id = error_id
        self._before = ""

    # -- which keys are the field's -------------------------------------------------------------------------
    def takes_key(self, event: events.Key) -> bool:
        return self.editing

    def can_type(self) -> bool:
        return self.editing and super().can_type()

    def check_consume_key(self, key: str, character: Optional[str]) -> bool:
        return self.editing and super().check_consume_key(key, character)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "edit":
            return not self.editing
        if action in ("submit", "revert"):
            return self.editing
        # the editing keys (backspace, arrows, ctrl+...) edit nothing until enter: the key goes on up the chain
        return self.editing if action in _INPUT_ACTIONS else True

    async def _on_key(self, event: events.Key) -> None:
        if not self.editing and not event.is_printable:
            return  # the App ran its bindings when it read it (takes_key), it goes on up unhandled
        await super()._on_key(event)  # a printable key typed before the edit ended goes back to the App

    # -- the edit ------------------------------------------------------------------------------------------
    def start_edit(self) -> None:
        """Start an edit: the value from before is kept for escape, the text is selected (typing replaces it)."""
        if not self.editing:
            self._before = self.value
            self.editing = True
        self.selection = Selection(0, len(self.value))

    def watch_editing(self, editing: bool) -> None:
        self.set_class(editing, "-editing")
        if editing:
            self._restart_blink()
        else:
            self._pause_blink(visible=False)
        self.refresh_bindings()

    def _restart_blink(self) -> None:
        if self.editing:
            super()._restart_blink()
        else:
            self._pause_blink(visible=False)  # no cursor until the edit starts

    def error_line(self) -> Optional[FieldError]:
        """The :class:`FieldError` of this field (``error_id`` among the ancestors' descendants), if any."""
        if not self.error_id:
            return None
        for ancestor in self.ancestors:
            found = ancestor.query(f"#{self.error_id}") if hasattr(ancestor, "query") else []
            if found:
                return found.first(FieldError)
        return None

    def say(self, text: Optional[str]) -> None:
        line = self.error_line()
        if line is not None:
            line.say(text)

    def problem(self) -> Optional[str]:
        """What is wrong with the value now (``check``), None when it is fine."""
        return self.check(self.value) if self.check is not None else None

    def action_edit(self) -> None:
        """enter, not editing: start an edit."""
        self.start_edit()

    async def action_submit(self) -> None:
        """enter in an edit: check the value: a bad one is said under the field (the edit goes on), a good one ends
        the edit (``Input.Submitted`` for the section)."""
        if not self.editing:
            self.start_edit()
            return
        problem = self.problem()
        self.say(problem)
        if problem:
            return
        self.editing = False
        await super().action_submit()

    def action_revert(self) -> None:
        """escape: the value from before the edit, and the edit ends."""
        if self.editing:
            self.value = self._before
            self.editing = False
            self.say(None)

    async def _on_mouse_down(self, event: events.MouseDown) -> None:
        if not self.editing:
            self._before = self.value
            self.editing = True  # a click starts an edit, the cursor where it was clicked

    def _on_blur(self, event: events.Blur) -> None:
        """The focus left during an edit (tab, a click elsewhere): a good changed value is kept as if enter was
        pressed; a bad one is put back, and the line under the field says why."""
        if not self.editing:
            return
        self.editing = False
        if self.value == self._before:
            return
        problem = self.problem()
        if problem:
            self.value = self._before
            self.say(f"{problem} (not kept)")
        else:
            self.say(None)
            self.post_message(self.Submitted(self, self.value, None))


class SectionTextArea(TextArea):
    """A text area of a section with the keys of a :class:`SectionField`: read-only, a tab stop the section keys
    work on, until ``enter`` or a click starts an edit; ``escape`` puts back the text from before."""

    BINDINGS = [
        Binding("enter", "edit", "Edit", id="textarea.edit", tooltip="Edit this text"),
        Binding("escape", "revert", "Revert", id="textarea.revert",
                tooltip="Put back the text from before this edit (and stop editing)"),
    ]

    editing: reactive[bool] = reactive(False, init=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(*args, **kwargs)
        self._before = ""

    def takes_key(self, event: events.Key) -> bool:
        """While edited: every key but escape and tab (the App's); else none (the section's keys work)."""
        return self.editing and event.key not in ("escape", "tab", "shift+tab")

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "edit":
            return not self.editing
        if action == "revert":
            return self.editing
        return True

    def action_edit(self) -> None:
        self._before = self.text
        self.editing = True

    def action_revert(self) -> None:
        if self.editing:
            self.load_text(self._before)
            self.editing = False

    def stop_edit(self) -> None:
        """The edit was applied (the section stored the text): back to read-only."""
        self.editing = False

    def watch_editing(self, editing: bool) -> None:
        self.read_only = not editing
        self.set_class(editing, "-editing")
        self.refresh_bindings()

    async def _on_mouse_down(self, event: events.MouseDown) -> None:
        if not self.editing:
            self.action_edit()
