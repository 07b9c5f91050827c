"""`TextInput`: Textual's ``Input`` that handles the keys typed into it in the order they were typed.

Textual hands a key to the focused widget; the ``Input`` inserts a printable character at once, but its editing
keys (backspace, delete, arrows, home/end, enter) are bindings, which Textual runs only after the key has bubbled up
through every container to the App. Typed faster than the event loop turns (a fast typist over SSH, a paste,
``tmux send-keys``), "backspace ×4, chan15" into a name field then came out as "ch": the four backspaces ran after
the six characters (issue 24, bug 8). A ``TextInput`` runs its own bindings when the key reaches it, so every key
is applied in order; the keys it has no binding for bubble up as before (the dialog's escape, the app's keys).
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class TextInput(Input):
    """An ``Input`` whose editing keys take effect in typing order (module docstring)."""

    async def _on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return  # Input._on_key inserts it (Textual calls each class's own handler)
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

    def show_end(self, _wait: bool = True) -> None:
        """Put the cursor after the last character and scroll it into view (a long path shows its file name), now
        or, before the field has a size, after the next refresh."""
        self.cursor_position = len(self.value)
        if self.size.width:
            self.scroll_to(x=self.max_scroll_x, animate=False, immediate=True)
        elif _wait:
            self.call_after_refresh(self.show_end, False)
