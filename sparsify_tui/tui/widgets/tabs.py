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

**Lazy panes** (``ViewTabs(lazy=True, on_build=...)``, issue 30 item 9): a pane's widgets are mounted the first
time it is opened, not when the view is built (posting's lazy tabs). Mounting widgets (composing and styling
them) is most of what a section's first open costs, and most of a view's panes are never opened. The initial
pane is built with the view (``build_initial=False``: it too waits, for a view hidden at first, such as a
section's empty state, until :meth:`ViewTabs.build`). The owner fills a pane only once it is built
(:meth:`ViewTabs.built`), and ``on_build(tab)`` is called when a pane's widgets are mounted::

    with ViewTabs(initial="summary", lazy=True, on_build=self._render_tab):
        ...
    def _render_tab(self, tab):  # on_build, and for every built tab when the data changes
        if tab == "params" and tabs.built("params"): self.query_one("#params-chart").set_data(...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

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

    def __init__(self, *, initial: str = "", id: Optional[str] = None, classes: Optional[str] = None,
                 lazy: bool = False, build_initial: bool = True,
                 on_build: Optional[Callable[[str], None]] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._initial = initial
        self._panes: list[TabPane] = []
        self._hidden: set[str] = set()
        self.lazy = lazy
        self._build_initial = build_initial
        self._on_build = on_build
        self._unbuilt: dict[str, list[Widget]] = {}  # lazy: pane id -> its widgets, not mounted yet
        self._mounting: dict[str, list[Callable[[], Any]]] = {}  # pane id -> what runs once its widgets are mounted

    def compose_add_child(self, widget: Widget) -> None:
        first = not self._panes
        self._panes.append(widget)  # type: ignore[arg-type]
        initial = widget.id == self._initial or (first and not self._initial)
        if self.lazy and (not initial or not self._build_initial):
            # the pane's widgets (composed into it) wait until it is first opened
            self._unbuilt[str(widget.id)] = list(widget._pending_children)
            widget._pending_children.clear()

    def compose(self) -> ComposeResult:
        yield _TabBar("")
        yield ContentSwitcher(*self._panes, initial=self._initial or (self._panes[0].id if self._panes else None))

    def on_mount(self) -> None:
        self._draw()

    def built(self, tab: str) -> bool:
        """Whether pane ``tab``'s widgets are mounted: always, unless the view is lazy and the pane was never opened
        or its widgets are being mounted (:meth:`build`)."""
        return tab not in self._unbuilt and tab not in self._mounting

    def build(self, tab: Optional[str] = None) -> None:
        """Mount pane ``tab``'s widgets (default: the active pane's) if they are not yet; once they are mounted,
        ``on_build(tab)`` fills them, then what :meth:`after_build` asked for runs. Nothing before the view is
        mounted.

        Until they are mounted, the keys typed next wait (``App.keys_wait_for``, when the app has it): a key typed
        right after the one that opened the pane (`l` then `down`) reaches the pane's widget, as it did when every
        pane was built up front."""
        import asyncio

        tab = tab or self.active
        pane = next((p for p in self._panes if p.id == tab), None)
        if tab not in self._unbuilt or pane is None or not pane.is_attached:
            return
        mounting = pane.mount_all(self._unbuilt.pop(tab))
        self._mounting[tab] = []

        async def mounted() -> None:
            await mounting
            calls = self._mounting.pop(tab, [])
            if self._on_build is not None and self.is_attached:
                self._on_build(tab)
            for call in calls:
                call()

        task = asyncio.get_running_loop().create_task(mounted())
        keys_wait_for = getattr(self.app, "keys_wait_for", None)
        if callable(keys_wait_for):
            keys_wait_for(task)

    def after_build(self, tab: str, call: Callable[[], Any]) -> None:
        """Run ``call`` once pane ``tab``'s widgets are mounted and filled: now if they are (or the pane is not
        lazy), else right after :meth:`build` is done (a focus on a widget of a pane just opened)."""
        if tab in self._mounting:
            self._mounting[tab].append(call)
        else:
            call()

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
            self.build(tab)
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
