"""`FilterableTable`: a DataTable with column sorting and a `/` substring filter.

Usage::

    table = FilterableTable(
        [Column("index", "#", numeric=True), Column("id", "Node id", filter=True),
         Column("flops", "FLOPs", numeric=True, fmt=format_count)],
        id="layers",
    )
    ...
    table.set_rows(rows)          # list of dicts keyed by Column.key; optional "_key" = row key
    table.rows_shown()            # the dicts currently displayed, in display order

Keys (when the table has focus): `/` filter, `escape` clear the filter, `s` sort by the next column,
`S` reverse the sort, `o` back to the original order. Clicking a header sorts by it (again: reverses).
Selecting a row (enter) posts `FilterableTable.RowChosen(table, row_dict)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from sparsify_tui.formatting import format_bytes, format_count  # noqa: F401 (column formatters)


def format_percent(value: Any) -> str:
    """Fraction 0..1 as a percentage with two decimals ('12.34%')."""
    if value is None or value == "":
        return ""
    return f"{float(value) * 100:.2f}%"


def format_shape(value: Any) -> str:
    """[1, 3, 48, 192] -> '1×3×48×192'; lists of shapes are joined with ', '; None -> '?'."""
    if value is None:
        return "?"
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, type(None))):
        return ", ".join(format_shape(v) for v in value)
    if isinstance(value, (list, tuple)):
        return "×".join("?" if d is None else str(d) for d in value) or "scalar"
    return str(value)


@dataclass
class Column:
    """One table column: `key` in the row dicts, header `label`, `numeric` (sort as number, right
    aligned), `filter` (the `/` filter searches it), `fmt` (value -> display text)."""

    key: str
    label: str
    numeric: bool = False
    filter: bool = False
    fmt: Optional[Callable[[Any], str]] = None
    width: Optional[int] = None

    def text(self, value: Any) -> str:
        if self.fmt is not None:
            return self.fmt(value)
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)


class FilterableTable(Widget):
    """A sortable, `/`-filterable DataTable over a list of row dicts."""

    DEFAULT_CSS = """
    FilterableTable { height: 1fr; }
    FilterableTable > Input { display: none; height: 1; }
    FilterableTable.-filtering > Input { display: block; }
    FilterableTable > DataTable { height: 1fr; }
    FilterableTable > .table-status { height: 1; color: $text-muted; }
    """

    BINDINGS = [
        Binding("slash", "start_filter", "Filter", id="table.filter", tooltip="Filter rows (substring, case-insensitive)"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="table.clear_filter", tooltip="Clear the filter"),
        Binding("s", "next_sort", "Sort", id="table.sort", tooltip="Sort by the next column"),
        Binding("S", "reverse_sort", "Reverse", show=False, id="table.reverse", tooltip="Reverse the sort order"),
        Binding("o", "original_order", "Original order", show=False, id="table.original_order",
                tooltip="Back to the original (graph) order"),
    ]

    @dataclass
    class RowChosen(Message):
        """Posted when the user selects (enter/click) a row; `row` is the row dict."""

        table: 'FilterableTable'
        row: dict

        @property
        def control(self) -> "FilterableTable":
            return self.table

    def __init__(self, columns: list[Column], *, show_status: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.columns = list(columns)
        self.show_status = show_status
        self._rows: list[dict] = []
        self._shown: list[dict] = []
        self.filter_text = ""
        self.sort_key: Optional[str] = None
        self.sort_reverse = False
        self._filter_timer = None

    def compose(self) -> ComposeResult:
        filter_input = Input(placeholder="filter (substring, any case); enter: apply, escape: clear",
                             id="filter-input", compact=True)
        filter_input.can_focus = False  # only while filtering (never auto-focused)
        yield filter_input
        table: DataTable = DataTable(cursor_type="row", zebra_stripes=True, id="table")
        yield table
        if self.show_status:
            yield Static("", classes="table-status")

    def on_mount(self) -> None:
        self._setup_columns()
        self._refresh()

    @property
    def data_table(self) -> DataTable:
        return self.query_one("#table", DataTable)

    def focus(self, scroll_visible: bool = True) -> "FilterableTable":
        self.data_table.focus(scroll_visible)
        return self

    # -- data -----------------------------------------------------------------------------
    def set_rows(self, rows: list[dict]) -> None:
        """Replace the rows (keeps the current sort and filter)."""
        self._rows = list(rows)
        if self.is_mounted:
            self._refresh()

    def rows_shown(self) -> list[dict]:
        """The row dicts currently displayed, in display order."""
        return list(self._shown)

    @property
    def all_rows(self) -> list[dict]:
        return list(self._rows)

    def _setup_columns(self) -> None:
        table = self.data_table
        table.clear(columns=True)
        for col in self.columns:
            label = col.label
            if col.key == self.sort_key:
                label += " ▼" if self.sort_reverse else " ▲"
            table.add_column(label, key=col.key, width=col.width)

    def _visible_rows(self) -> list[dict]:
        rows = self._rows
        needle = self.filter_text.strip().lower()
        if needle:
            keys = [c.key for c in self.columns if c.filter] or [c.key for c in self.columns]
            rows = [r for r in rows if any(needle in str(r.get(k) or "").lower() for k in keys)]
        if self.sort_key is not None:
            col = next(c for c in self.columns if c.key == self.sort_key)

            def key(r: dict):
                v = r.get(col.key)
                if col.numeric:
                    try:
                        return (0, float(v))
                    except (TypeError, ValueError):
                        return (1, 0.0)  # blanks last
                return (0 if v not in (None, "") else 1, str(v or "").lower())

            rows = sorted(rows, key=key, reverse=self.sort_reverse)
            if self.sort_reverse:  # keep blanks last when reversed too
                rows = [r for r in rows if key(r)[0] == 0] + [r for r in rows if key(r)[0] == 1]
        return rows

    def _refresh(self) -> None:
        from rich.text import Text

        table = self.data_table
        self._shown = self._visible_rows()
        cursor_row = table.cursor_row
        table.clear()
        for i, r in enumerate(self._shown):
            cells = []
            for c in self.columns:
                text = c.text(r.get(c.key))
                cells.append(Text(text, justify="right") if c.numeric else Text(text))
            table.add_row(*cells, key=str(r.get("_key", i)))
        if self._shown:
            table.move_cursor(row=min(cursor_row, len(self._shown) - 1), animate=False)
        if self.show_status:
            parts = [f"{len(self._shown)} of {len(self._rows)} rows"]
            if self.filter_text:
                parts.append(f"filter: {self.filter_text!r}")
            if self.sort_key:
                label = next(c.label for c in self.columns if c.key == self.sort_key)
                parts.append(f"sorted by {label} {'desc' if self.sort_reverse else 'asc'}")
            parts.append("/ filter · s sort · S reverse · o original order")
            self.query_one(".table-status", Static).update(" · ".join(parts))

    # -- sorting --------------------------------------------------------------------------
    def sort_by(self, key: Optional[str], reverse: bool = False) -> None:
        """Sort by column `key` (None = original order)."""
        self.sort_key = key
        self.sort_reverse = reverse
        self._setup_columns()
        self._refresh()

    def action_next_sort(self) -> None:
        keys = [c.key for c in self.columns]
        if self.sort_key is None:
            nxt = keys[0]
        else:
            i = keys.index(self.sort_key) + 1
            nxt = keys[i] if i < len(keys) else None
        # numbers read best largest first
        col = next((c for c in self.columns if c.key == nxt), None)
        self.sort_by(nxt, reverse=bool(col and col.numeric))

    def action_reverse_sort(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, not self.sort_reverse)

    def action_original_order(self) -> None:
        self.sort_by(None)

    @on(DataTable.HeaderSelected)
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = event.column_key.value
        if key == self.sort_key:
            self.sort_by(key, not self.sort_reverse)
        else:
            col = next(c for c in self.columns if c.key == key)
            self.sort_by(key, reverse=col.numeric)

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._shown):
            self.post_message(self.RowChosen(self, self._shown[event.cursor_row]))

    def current_row(self) -> Optional[dict]:
        """The row dict under the cursor, or None when the table is empty."""
        row = self.data_table.cursor_row
        return self._shown[row] if 0 <= row < len(self._shown) else None

    # -- filtering ------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """Show only rows whose filter columns contain `text` (case-insensitive)."""
        self.filter_text = text
        self._refresh()

    def action_start_filter(self) -> None:
        self.add_class("-filtering")
        inp = self.query_one("#filter-input", Input)
        inp.can_focus = True
        inp.value = self.filter_text
        inp.focus()

    def action_clear_filter(self) -> None:
        inp = self.query_one("#filter-input", Input)
        had_filter = bool(self.filter_text) or self.has_class("-filtering")
        inp.value = ""
        self.remove_class("-filtering")
        inp.can_focus = False
        if self.filter_text:
            self.set_filter("")
        if had_filter:
            self.data_table.focus()

    @on(Input.Changed, "#filter-input")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        # debounce: typing in a filter over thousands of rows redraws once per pause, not per key
        if self._filter_timer is not None:
            self._filter_timer.stop()
        value = event.value
        self._filter_timer = self.set_timer(0.15, lambda: self.set_filter(value))

    @on(Input.Submitted, "#filter-input")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self.set_filter(event.value)
        if not event.value:
            self.remove_class("-filtering")
            event.input.can_focus = False
        self.data_table.focus()

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "clear_filter":
            return bool(self.filter_text) or self.has_class("-filtering")
        return True


def format_timestamp(value: Any) -> str:
    """ISO 8601 UTC timestamp -> local 'YYYY-MM-DD HH:MM' ('' when missing or unparsable)."""
    from datetime import datetime

    if not value:
        return ""
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone()
    return stamp.strftime("%Y-%m-%d %H:%M")


