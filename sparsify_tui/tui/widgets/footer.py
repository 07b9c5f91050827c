"""`KeysFooter`: the footer as one line of text: the keys the focused widget and its sections offer, each clickable.

Textual's ``Footer`` composes a widget per key (and one per group label) again every time the bindings change, that
is on nearly every key: some 25 widgets mounted, styled and drawn each time the focus moved, a good part of what a
section switch cost. This one is a single ``Static`` that writes the same keys (a binding with ``show``; one per
action; a compact group such as ``<>`` Tab as one entry) as markup, and only when they changed. A key that would
not fit is left out whole, from the end: the line never stops inside a word.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, NamedTuple

from rich.markup import escape
from textual.widgets import Static

from sparsify_tui.tui.widgets.labels import fit_parts


class FooterEntry(NamedTuple):
    """One key of the footer: ``text`` as shown (``"n New"``), ``markup`` (bold key, clickable, dim when its action
    is disabled now)."""

    text: str
    markup: str


def footer_entries(app: Any, active_bindings: dict) -> list[FooterEntry]:
    """The footer's keys, in binding order: a binding with ``show``, one per action; the keys of a compact group
    (``<`` and ``>``) share one entry with the group's name. A click on an entry presses its (first) key."""
    by_action: dict = {}
    for _node, binding, enabled, _tooltip in active_bindings.values():
        if binding.show and binding.action not in by_action:
            by_action[binding.action] = (binding, enabled)
    out = []
    for group, items in groupby(by_action.values(), lambda item: item[0].group):
        items = list(items)
        if group is not None and len(items) > 1:
            display = ("" if group.compact else " ").join(app.get_key_display(b) for b, _e in items)
            entries = [(display, group.description, items[0][0].key, all(e for _b, e in items))]
        else:
            entries = [(app.get_key_display(b), b.description, b.key, e) for b, e in items]
        for display, description, key, enabled in entries:
            key = key.split(",")[0].strip()
            markup = f"[@click=app.simulate_key({key!r})][b]{escape(display)}[/b] {escape(description)}[/]"
            out.append(FooterEntry(f"{display} {description}", markup if enabled else f"[dim]{markup}[/dim]"))
    return out


class KeysFooter(Static):
    """The app's footer: one line of keys (module docstring). It follows the bindings of the screen it is on."""

    DEFAULT_CSS = """
    KeysFooter { dock: bottom; height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", markup=True, **kwargs)
        self._shown: str = ""
        self.text = ""
        """The keys shown, as plain text (``"n New r Rerun d Del <> Tab j Jobs ? Help q Quit ^p Palette"``)."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.app.screen_change_signal.subscribe(self, self.screen_changed)
        self.bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)
        self.app.screen_change_signal.unsubscribe(self)

    def screen_changed(self, top: Any) -> None:
        """Shown only while its own screen is on top: under a dialog its keys do not work, and a footer of the
        wrong keys under a dialog read as the dialog's (issue 30). The transparent key buffer that holds the keys
        typed before a dialog shows (``App.hold_keys``) does not hide it."""
        from sparsify_tui.tui.widgets.dialogs import KeyBuffer

        self.display = top is self.screen or isinstance(top, KeyBuffer)

    def on_resize(self) -> None:
        self.bindings_changed(self.screen)

    def bindings_changed(self, screen: Any) -> None:
        if screen is not self.screen or not self.is_attached:
            return
        entries = footer_entries(self.app, screen.active_bindings)
        plain = fit_parts([e.text for e in entries], self.content_region.width or self.app.size.width, sep=" ")
        markup = " ".join(e.markup for e in _fitting(entries, plain))
        if markup != self._shown:
            self._shown, self.text = markup, plain
            self.update(markup)


def _fitting(entries: list[FooterEntry], plain: str):
    """The entries ``plain`` (the fitted line) begins with."""
    used = 0
    for entry in entries:
        used += len(entry.text) + (1 if used else 0)
        if used > len(plain):
            return
        yield entry
