"""Keep tab underlines under their active tab.

Textual places a ``Tabs`` underline after a refresh, from the active tab's region at that moment. A view whose
content arrives from a worker (a profile read from disk) can be laid out after that moment, and the underline
then stays at width 0 until the next resize: the active tab shows no highlight. :func:`place_tab_underlines`
places them again once the view has its content.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Tabs


def place_tab_underlines(root: Widget) -> None:
    """After the next refresh, move the underline of every ``Tabs`` under ``root`` to its active tab."""

    def place() -> None:
        for tabs in root.query(Tabs):
            tabs._highlight_active(animate=False)  # Textual's own placement (it runs it on resize)

    root.call_after_refresh(place)
