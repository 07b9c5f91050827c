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
`S` reverse the sort, `o` back to the original order, `←`/`→` the previous/next columns when they do not
all fit. Clicking a header sorts by it (again: reverses). Selecting a row (enter) posts
`FilterableTable.RowChosen(table, row_dict)`.

**No cell is ever cut.** Every column is as wide as its widest cell (numbers always whole). When the columns
do not all fit, the table shows the leading *pinned* columns (``Column(pin=True)``: the row's index and
name) and then as many *whole* columns as fit; `←`/`→` page through the rest a column at a time, and the
status line says which are shown. A pinned text column is at most 40 % of the table wide: longer names are
shortened as chart labels are (:func:`sparsify_tui.tui.widgets.labels.shorten_labels`, distinct and keeping
their tail; the full text is in the row's record, and the filter searches it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from sparsify_tui.formatting import format_bytes, format_count, format_percent  # noqa: F401 (column formatters)
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.labels import abbreviate, fit_parts, shorten_labels


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
    aligned), `filter` (the `/` filter searches it), `fmt` (value -> display text), `pin` (stays on the
    left when the other columns page sideways), `width` (at most this many characters: a longer text
    keeps its head and tail)."""

    key: str
    label: str
    numeric: bool = False
    filter: bool = False
    fmt: Optional[Callable[[Any], str]] = None
    width: Optional[int] = None
    pin: bool = False
    #: how a text longer than ``width`` is cut: "name" keeps what tells names apart (their tail,
    #: :func:`sparsify_tui.tui.widgets.labels.shorten_labels`), "end" keeps the start (sentences, in whole words:
    #: :func:`sparsify_tui.tui.widgets.labels.abbreviate`)
    clip: str = "name"
    #: a mark after the value, from the whole row (``row -> str``): the override ``*`` of a layer's sparsity
    mark: Optional[Callable[[dict], str]] = None

    def row_text(self, row: dict) -> str:
        """The cell of ``row`` in this column: its value as :meth:`text` formats it, then the row's mark."""
        text = self.text(row.get(self.key))
        return text + self.mark(row) if self.mark is not None else text

    def text(self, value: Any) -> str:
        if self.fmt is not None:
            return self.fmt(value)
        if value is None:
            return ""
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)


def _cell_texts(texts: list, width: int, right: bool) -> list:
    """The cells of one column as the DataTable draws strings (Rich markup, made a ``Text`` only for the rows on
    screen): ``[`` escaped so a node id such as ``[layout conversion]`` is not read as markup, numbers padded to the
    column's width to stand right-aligned. Plain strings: making a ``Text`` of each of a 1,500-row table's 18,000
    cells up front took most of the time `l` took to show Layer Results."""
    from rich.markup import escape

    out = [escape(t) if "[" in t else t for t in texts]
    return [t.rjust(width) for t in out] if right else out


SORT_KEYS = "123456789abcdefghijklmnopqrtuvwxyz"
"""The keys of a :class:`SortMenu`'s columns, in order (no ``s``: it opened the menu)."""


class SortMenu(ModalScreen[Optional[str]]):
    """`s` in a table: every column with the key that sorts by it (``SORT_KEYS``: 1-9, then letters), the one sorted
    now marked; that key, or enter on the highlighted one, picks it (dismissed with the column's key); escape
    closes."""

    DEFAULT_CSS = """
    SortMenu { align: center middle; }
    SortMenu > Vertical { width: 44; max-width: 100%; height: auto; max-height: 100%; border: thick $primary;
                          background: $surface; padding: 0 1; }
    SortMenu .dialog-title { text-style: bold; height: auto; }
    SortMenu OptionList { height: auto; max-height: 20; }
    """

    BINDINGS = [Binding("escape", "close", "Close", id="table.sort_menu.close", tooltip="Close without sorting")]

    def __init__(self, columns: list[tuple[str, str]], current: Optional[str], reverse: bool = False) -> None:
        super().__init__()
        self.columns = columns[:len(SORT_KEYS)]
        self.current = current
        self.reverse = reverse

    def compose(self) -> ComposeResult:
        from textual.containers import Vertical
        from textual.widgets import OptionList
        from textual.widgets.option_list import Option

        def label(key: str, text: str) -> str:
            now = f"  (sorted {'desc' if self.reverse else 'asc'}: again reverses)" if key == self.current else ""
            return f"{text}{now}"

        with Vertical():
            yield Static("Sort by (its key, or enter · escape: close)", classes="dialog-title")
            yield OptionList(*(Option(f"{SORT_KEYS[i]}  {label(key, text)}", id=key)
                               for i, (key, text) in enumerate(self.columns)), id="sort-columns")

    def on_mount(self) -> None:
        from textual.widgets import OptionList

        menu = self.query_one(OptionList)
        keys = [key for key, _ in self.columns]
        menu.highlighted = keys.index(self.current) if self.current in keys else 0
        menu.focus()

    def on_key(self, event) -> None:
        if event.character and event.character in SORT_KEYS[:len(self.columns)]:
            event.stop()
            event.prevent_default()
            self.dismiss(self.columns[SORT_KEYS.index(event.character)][0])

    def on_option_list_option_selected(self, event) -> None:
        event.stop()
        self.dismiss(str(event.option.id))

    def action_close(self) -> None:
        self.dismiss(None)


class _Table(DataTable):
    """The DataTable of a FilterableTable: with a row cursor, `←`/`→` page the columns (never a partial
    column, see the module docstring) instead of scrolling by characters. Every column gets its width from the
    FilterableTable (the widest formatted cell), so no cell is measured again here: DataTable measures each
    new cell with Rich, 18,000 measurements for a 1,500-node Layer Results table."""

    def fill(self, rows: list, keys: list) -> None:
        """Add ``rows`` (lists of cells, in column order) with row keys ``keys`` at once: what ``add_row`` does
        for one row, without its per-row work (a reactive set, the column order sorted again, an idle check),
        which is most of the time a 1,500-row table takes to fill (the filter redraws it on every key)."""
        from textual.widgets._data_table import Row, RowKey

        if not rows:
            return
        column_keys = [column.key for column in self.ordered_columns]
        start = self.row_count
        locations, data, table_rows, new = self._row_locations, self._data, self.rows, self._new_rows
        for i, (cells, key) in enumerate(zip(rows, keys)):
            row_key = RowKey(key)
            locations[row_key] = start + i
            data[row_key] = dict(zip(column_keys, cells))
            table_rows[row_key] = Row(row_key, 1, None, False)
            new.add(row_key)
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if start == 0 and self.columns and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()
        self._update_count += 1
        self.check_idle()

    def _update_dimensions(self, new_rows) -> None:
        from textual.geometry import Size

        if any(column.auto_width for column in self.columns.values()):
            super()._update_dimensions(new_rows)
            return
        width = sum(column.get_render_width(self) for column in self.columns.values()) + self._row_label_column_width
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)

    def action_cursor_left(self) -> None:
        if self.cursor_type == "row" and isinstance(self.parent, FilterableTable):
            self.parent.shift_columns(-1)
        else:
            super().action_cursor_left()

    def action_cursor_right(self) -> None:
        if self.cursor_type == "row" and isinstance(self.parent, FilterableTable):
            self.parent.shift_columns(1)
        else:
            super().action_cursor_right()


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
        Binding("s", "next_sort", "Sort", show=False, id="table.sort",
                tooltip="Sort by a column: a menu of the columns, each with the key that picks it (again: reversed)"),
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
        self.col_offset = 0  # first unpinned column shown
        self._layout: tuple = ()  # (visible column indexes, their widths): what the DataTable holds now
        self._fitted: dict = {}  # column index -> its shortened texts, for every row (columns capped in width)
        self._texts: Optional[dict] = None  # column index -> every row's formatted cell (None: rows changed)
        self._position: dict = {}  # id(row dict) -> its index in the rows
        self._text_widths: dict = {}  # column index -> its widest formatted cell
        self._fit_cache: dict = {}
        self._cell_cache: dict = {}  # "columns": every row's cell of each visible column, in the current layout
        self._stale = False  # rows set while the table was not on screen: drawn when it is shown

    def compose(self) -> ComposeResult:
        filter_input = TextInput(placeholder="filter (substring, any case); enter: apply, escape: clear",
                                 id="filter-input", compact=True)
        filter_input.can_focus = False  # only while filtering (never auto-focused)
        yield filter_input
        table: DataTable = _Table(cursor_type="row", zebra_stripes=True, id="table")
        yield table
        if self.show_status:
            yield Static("", classes="table-status")

    def on_mount(self) -> None:
        self._stale = True  # drawn when shown (on_show), with its real width

    def on_resize(self) -> None:
        if not self._stale and (self._rows or self._layout):
            self._draw(force=False)
        self._update_status()

    @property
    def data_table(self) -> DataTable:
        return self.query_one("#table", DataTable)

    def focus(self, scroll_visible: bool = True) -> "FilterableTable":
        self.data_table.focus(scroll_visible)
        return self

    # -- data -----------------------------------------------------------------------------
    def set_columns(self, columns: list[Column]) -> None:
        """Replace the columns (rows are redrawn; a sort by a column that is gone is dropped)."""
        self.columns = list(columns)
        self.col_offset = 0
        self._texts = None
        if self.sort_key is not None and all(c.key != self.sort_key for c in self.columns):
            self.sort_key, self.sort_reverse = None, False
        if self.is_mounted:
            self._refresh()

    def set_rows(self, rows: list[dict]) -> None:
        """Replace the rows (keeps the current sort and filter). A table that is not on screen (a hidden tab)
        draws them when it is shown: a 1,500-row table costs a few hundred ms to fill."""
        self._rows = list(rows)
        self._texts = None
        if self.is_mounted and self.region.width > 0:
            self._refresh()
        else:
            self._stale = True

    def on_show(self) -> None:
        if self._stale:
            self._refresh()

    def rows_shown(self) -> list[dict]:
        """The row dicts currently displayed (or to be, for a table not drawn yet), in display order."""
        return self._visible_rows() if self._stale else list(self._shown)

    @property
    def all_rows(self) -> list[dict]:
        return list(self._rows)

    def _label(self, col: Column) -> str:
        if col.key == self.sort_key:
            return col.label + (" ▼" if self.sort_reverse else " ▲")
        return col.label

    def _format_all(self) -> None:
        """New rows or columns: forget their formatted cells and the caches built on them. Each column's cells are
        formatted once, for every row, the first time the column is laid out (:meth:`_column_texts`): a filter or a
        sort then only picks rows, and columns paged out of view are not formatted until they are shown (half of a
        1,500-row Layer Results table's 21,000 cells at 120 columns)."""
        self._texts = {}
        self._position = {id(r): i for i, r in enumerate(self._rows)}
        self._text_widths = {}
        self._fit_cache = {}
        self._cell_cache = {}

    def _column_texts(self, j: int) -> list:
        """Every row's formatted cell of column ``j`` (in row order), formatted on first use."""
        if self._texts is None:
            self._format_all()
        texts = self._texts.get(j)
        if texts is None:
            col = self.columns[j]
            texts = self._texts[j] = [col.row_text(r) for r in self._rows]
            self._text_widths[j] = max((len(t) for t in texts), default=0)
        return texts

    def column_layout(self) -> tuple[list[int], list[int]]:
        """(indexes of the columns shown, their widths in characters) for the current width and column
        offset: every column as wide as its widest cell (over all rows, so a filter does not move them),
        pinned ones first, then whole columns while they fit."""
        if self._texts is None:
            self._format_all()
        n = len(self.columns)
        width = self.size.width or 80
        room = width - 2  # the vertical scrollbar
        pinned = [j for j, _c in zip(range(n), self.columns) if all(c.pin for c in self.columns[: j + 1])]
        self._fitted = {}
        widths: dict = {}

        def column_width(j: int) -> int:  # its widest cell (shortened to its cap, if it has one)
            col = self.columns[j]
            texts = self._column_texts(j)
            widths[j] = max(len(self._label(col)), self._text_widths[j])
            cap = col.width or (max(12, int(width * 0.4) - 2) if j in pinned else None)
            if cap is not None and widths[j] > max(cap, len(self._label(col))):
                room_j = max(cap, len(self._label(col)))
                if (j, room_j) not in self._fit_cache:
                    self._fit_cache[(j, room_j)] = (
                        shorten_labels(texts, room_j) if col.clip == "name"
                        else [abbreviate(t, room_j) for t in texts])
                fitted = self._fit_cache[(j, room_j)]
                self._fitted[j] = fitted
                widths[j] = max([len(self._label(col))] + [len(t) for t in fitted])
            return widths[j]

        used = sum(column_width(j) + 2 for j in pinned)
        rest = [j for j in range(n) if j not in pinned]
        self.col_offset = max(0, min(self.col_offset, max(0, len(rest) - 1)))
        shown = list(pinned)
        for k, j in enumerate(rest[self.col_offset:]):
            if used + column_width(j) + 2 > room and (k > 0 or pinned):
                break
            shown.append(j)
            used += widths[j] + 2
        return shown, [widths[j] for j in shown]

    def shift_columns(self, step: int) -> None:
        """`←`/`→`: page the unpinned columns by one (nothing happens at either end)."""
        rest = sum(1 for c in self.columns if not c.pin) if self.columns else 0
        shown, _ = self.column_layout()
        unpinned_shown = sum(1 for j in shown if not self.columns[j].pin)
        if step > 0 and self.col_offset + unpinned_shown >= rest:
            return
        if step < 0 and self.col_offset == 0:
            return
        self.col_offset = max(0, self.col_offset + step)
        self._draw(force=False)
        self._update_status()

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
        """Filter and sort the rows, then draw them (:meth:`_draw`)."""
        self._stale = False
        if self._texts is None:
            self._format_all()
        self._shown = self._visible_rows()
        self._draw(force=True)
        self._update_status()

    def _draw(self, force: bool) -> None:
        """Put the visible columns and the rows in the DataTable; ``force=False`` only redraws when the
        column layout changed (a resize, `←`/`→`)."""
        if self._texts is None:  # rows or columns replaced since the last draw: pick the rows again
            self._format_all()
            self._shown = self._visible_rows()
            force = True
        shown, widths = self.column_layout()
        layout = (tuple(shown), tuple(widths), tuple(self._label(self.columns[j]) for j in shown))
        if not force and layout == self._layout:
            return
        table = self.data_table
        cursor_row = table.cursor_row
        if layout != self._layout:
            table.clear(columns=True)
            for j, w in zip(shown, widths):
                table.add_column(self._label(self.columns[j]), key=self.columns[j].key, width=w)
            self._layout = layout
            self._cell_cache = {}  # cells are per layout (columns, their fitted texts)
        else:
            table.clear()
        # per visible column: the cells of every row (long names shortened, keeping them distinct), made once per
        # column layout
        if not self._cell_cache:
            self._cell_cache = {"columns": [
                _cell_texts(self._fitted.get(j) or self._column_texts(j), w, self.columns[j].numeric)
                for j, w in zip(shown, widths)]}
        columns = self._cell_cache["columns"]
        positions = [self._position[id(r)] for r in self._shown]
        rows = list(zip(*[[col[p] for p in positions] for col in columns])) if columns else []
        table.fill(rows, [str(r.get("_key", i)) for i, r in enumerate(self._shown)])
        if self._shown:
            table.move_cursor(row=min(cursor_row, len(self._shown) - 1), animate=False)

    def _update_status(self) -> None:
        if not self.show_status:
            return
        parts = [f"{len(self._shown)} of {len(self._rows)} rows"]
        if self.filter_text:
            parts.append(f"filter: {self.filter_text!r}")
        if self.sort_key:
            label = next(c.label for c in self.columns if c.key == self.sort_key)
            parts.append(f"sorted by {label} {'desc' if self.sort_reverse else 'asc'}")
        shown, _ = self.column_layout() if self._layout else ([], [])
        if self._layout and len(shown) < len(self.columns):
            rest = [j for j, c in enumerate(self.columns) if not c.pin]
            visible = [j for j in shown if not self.columns[j].pin]
            if visible:
                a, b = rest.index(visible[0]) + 1, rest.index(visible[-1]) + 1
                parts.append(f"←→ columns {a}–{b} of {len(rest)}")
        parts += ["/ filter", "s sort", "S reverse", "o original order"]
        status = self.query_one(".table-status", Static)
        # what fits, in whole parts (the keys are also in ? and in the footer): never "… S reverse · o original"
        status.update(fit_parts(parts, status.content_region.width or self.size.width))

    # -- sorting --------------------------------------------------------------------------
    def sort_by(self, key: Optional[str], reverse: bool = False) -> None:
        """Sort by column `key` (None = original order)."""
        self.sort_key = key
        self.sort_reverse = reverse
        self._refresh()

    def action_next_sort(self) -> None:
        """`s`: the :class:`SortMenu` of the columns; the column picked sorts the rows (numbers largest first), the
        column sorted already is reversed. Sorting by ms took three presses of `s` (it cycled the columns)."""
        def picked(key: Optional[str]) -> None:
            if key is None:
                return
            if key == self.sort_key:
                self.sort_by(key, not self.sort_reverse)
            else:
                col = next(c for c in self.columns if c.key == key)
                self.sort_by(key, reverse=col.numeric)  # numbers read best largest first

        self.app.push_screen(SortMenu([(c.key, c.label) for c in self.columns], self.sort_key, self.sort_reverse),
                             picked)

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
        """The row dict under the cursor, or None when the table is empty. A table whose rows are not drawn yet (a
        tab opened by the key just before, :meth:`set_rows` while hidden) answers with the row the cursor will be
        on once they are: a key typed right after the one that opened the table acts on it as on a drawn one."""
        row = self.data_table.cursor_row
        shown = self.rows_shown()
        if self._stale and shown:
            row = min(max(row, 0), len(shown) - 1)
        return shown[row] if 0 <= row < len(shown) else None

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
        # debounce: fast typing redraws once per pause (50 ms), not per key
        if self._filter_timer is not None:
            self._filter_timer.stop()
        value = event.value
        self._filter_timer = self.set_timer(0.05, lambda: self.set_filter(value))

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


