"""`ViewTabs`: a view's tabs as one line of text over a ``ContentSwitcher``, in place of Textual's ``TabbedContent``.

``TabbedContent`` builds a ``Tabs`` bar with a widget per tab and an animated ``Underline`` (placed after a refresh,
from the active tab's region: a view whose content came from a worker was laid out later, and the underline stayed
at width 0), three or more widgets per tab to style and draw each time a section is built or shown. ``ViewTabs`` is
one ``Static`` (the labels, the active one reversed and bold, which reads without colour too; a click on a label
opens it) and the switcher: the panes are the same ``TabPane`` widgets, written the same way::

    with ViewTabs(initial="summary", id="loss-tabs"):
        with TabPane("Summary (m)", id="summary"):
            yield Static(...)

``active`` (get/set), ``hide_tab`` / ``show_tab`` and the :class:`ViewTabs.TabActivated` message are what the views
used of ``TabbedContent``. The bar takes no focus: tabs switch with ``<`` / ``>`` and the letter keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from rich.markup import escape
from textual.app import ComposeResult
from textual.message import Message
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Static, TabPane


class _TabBar(Static):
    """The labels; a click opens a tab (``@click`` markup)."""

    def action_open(self, tab: str) -> None:
        self.parent.active = tab  # type: ignore[union-attr]


class ViewTabs(Widget):
    """Tabs over panes (module docstring)."""

    DEFAULT_CSS = """
    ViewTabs { height: 1fr; }
    ViewTabs > _TabBar { height: 1; background: $panel; }
    ViewTabs > ContentSwitcher { height: 1fr; }
    ViewTabs > ContentSwitcher > TabPane { height: 1fr; padding: 0; }
    """

    @dataclass
    class TabActivated(Message):
        """Tab ``tab`` (a pane id) was opened, by a key, a click or by setting ``active``."""

        view_tabs: "ViewTabs"
        tab: str

        @property
        def control(self) -> "ViewTabs":
            return self.view_tabs

    def __init__(self, *, initial: str = "", id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._initial = initial
        self._panes: list[TabPane] = []
        self._hidden: set[str] = set()

    def compose_add_child(self, widget: Widget) -> None:
        self._panes.append(widget)  # type: ignore[arg-type]

    def compose(self) -> ComposeResult:
        yield _TabBar("")
        yield ContentSwitcher(*self._panes, initial=self._initial or (self._panes[0].id if self._panes else None))

    def on_mount(self) -> None:
        self._draw()

    @property
    def active(self) -> str:
        """The id of the pane shown."""
        switcher = self.query_children(ContentSwitcher)
        return (switcher.first().current if switcher else self._initial) or ""

    @active.setter
    def active(self, tab: str) -> None:
        switcher = self.query_children(ContentSwitcher)
        if not switcher:
            self._initial = tab
            return
        if switcher.first().current != tab:
            switcher.first().current = tab
            self._draw()
            self.post_message(self.TabActivated(self, tab))

    def panes(self) -> list[TabPane]:
        """Every pane, shown or hidden."""
        return list(self.query_children(ContentSwitcher).first().query_children(TabPane))

    def hide_tab(self, tab: str) -> None:
        """Leave tab ``tab`` out of the bar (the next shown one opens if it was active)."""
        self._hidden.add(tab)
        if self.active == tab:
            shown = [p.id for p in self.panes() if p.id not in self._hidden]
            if shown:
                self.active = shown[0]
        self._draw()

    def show_tab(self, tab: str) -> None:
        """Put tab ``tab`` back in the bar."""
        self._hidden.discard(tab)
        self._draw()

    def tab_ids(self) -> list[str]:
        """The ids of the tabs in the bar (not hidden), in order."""
        return [str(p.id) for p in self.panes() if p.id not in self._hidden]

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        bars = self.query_children(_TabBar)
        if not bars:
            return
        active = self.active
        titles = [(str(p.id), str(p._title)) for p in self.panes() if p.id not in self._hidden]
        # " A "  " B " with a space between; when that does not fit, one space around each label only
        roomy = sum(len(t) + 3 for _i, t in titles) - 1 <= (bars.first().size.width or self.app.size.width)
        pad, sep = (" ", " ") if roomy else ("", " ")
        parts = []
        for tab_id, title in titles:
            label = f"{pad}{escape(title)}{pad}"
            parts.append(f"[reverse b]{label}[/]" if tab_id == active else f"[@click=open({tab_id!r})]{label}[/]")
        bars.first().update(sep.join(parts))


def pane_of(widget: Any) -> Optional[str]:
    """The id of the ``TabPane`` ``widget`` is in, or None."""
    for ancestor in widget.ancestors_with_self:
        if isinstance(ancestor, TabPane):
            return ancestor.id
    return None
