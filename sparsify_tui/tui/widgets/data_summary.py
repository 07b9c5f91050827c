"""`DataSummary`: one line under a sample-data field saying what the typed file holds.

Once a path is typed into the field (and the typing has paused for :attr:`DataSummary.DELAY` seconds), a thread worker
reads the file's summary (:func:`sparsify_tui.analysis.sample_sets.summary_line`: items, each array's dtype, shape and
value range, the labels; or the one-line problem: no such file, not an .npz...) and shows it, the line
``sparsify-tui data show`` prints first. An empty field shows nothing. A dialog adds it with one line after its
field::

    yield DataSummary("#data")
"""

from __future__ import annotations

from typing import Optional

from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, Static

from sparsify_tui.tui.workers import app_work, post_result


class DataSummarized(Message):
    """The summary of ``path`` (a worker's result): ``line``."""

    def __init__(self, path: str, line: str) -> None:
        super().__init__()
        self.path, self.line = path, line


class DataSummary(Static):
    """The summary line of the sample-data field ``field`` (a CSS selector in the same screen; module docstring)."""

    DEFAULT_CSS = """
    DataSummary { color: $text-muted; height: 1; padding: 0 0 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    DataSummary.-empty { display: none; }
    """
    DELAY = 0.3
    """Seconds of no typing before the file is read."""

    def __init__(self, field: str, *, id: Optional[str] = None) -> None:
        super().__init__("", id=id, classes="-empty", markup=False)  # file names are text, never markup
        self.field = field
        self.path = ""
        self._timer: Optional[Timer] = None

    def on_mount(self) -> None:
        self.call_after_refresh(self._follow)

    def _follow(self) -> None:
        self.watch(self.screen.query_one(self.field, Input), "value", self._typed, init=True)

    def _typed(self, value: str) -> None:
        if self._timer is not None:
            self._timer.stop()
        self.path = value.strip()
        if not self.path:
            self.update("")
            self.add_class("-empty")
            return
        self._timer = self.set_timer(self.DELAY, lambda: self._summarize(self.path))

    @app_work(group="data-summary", description="read a sample data file's summary")
    def _summarize(self, path: str) -> None:
        from sparsify_tui.analysis.sample_sets import summary_line

        post_result(self, DataSummarized(path, summary_line(path)))

    def on_data_summarized(self, message: DataSummarized) -> None:
        message.stop()
        if message.path != self.path:
            return  # typed on since
        self.update(message.line)
        self.tooltip = message.line  # the whole line when the field is narrower than it
        self.set_class(not message.line, "-empty")
