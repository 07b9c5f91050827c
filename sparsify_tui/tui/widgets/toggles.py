"""Check boxes that read as text: ``[x]`` when on, ``[ ]`` when off.

Textual's ``Checkbox`` and ``SelectionList`` draw "▐X▌" in both states and tell them apart by colour only;
under ``NO_COLOR`` that is grey 232 against grey 250, and users ran jobs without INT8 believing it was on.
These draw a different glyph per state, so the state survives any colour system::

    yield TextCheckbox("Also quantize to INT8 and measure it", True, id="int8", compact=True)
    yield TextSelectionList[str](("baseline", "b", True), ("opt1", "o1", False), id="models")
"""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.strip import Strip
from textual.widgets import Checkbox, OptionList, SelectionList
from textual.widgets.option_list import OptionDoesNotExist

ON, OFF = "[x]", "[ ]"
ValueT = TypeVar("ValueT")


class TextCheckbox(Checkbox):
    """A Checkbox drawn ``[x] label`` / ``[ ] label``."""

    @property
    def _button(self) -> Content:
        return Content.styled(ON if self.value else OFF, self.get_visual_style("toggle--button"))


class TextSelectionList(SelectionList[ValueT], Generic[ValueT]):
    """A SelectionList whose options start with ``[x]`` / ``[ ]``."""

    def render_line(self, y: int) -> Strip:
        line = OptionList.render_line(self, y)
        _, scroll_y = self.scroll_offset
        index = scroll_y + y
        try:
            selection = self.get_option_at_index(index)
        except OptionDoesNotExist:
            return line
        underlying = next(iter(line)).style or self.rich_style
        style = (underlying or Style()) + Style(meta={"option": index})
        mark = ON if selection.value in self._selected else OFF
        return Strip([Segment(mark + " ", style=style), *line])
