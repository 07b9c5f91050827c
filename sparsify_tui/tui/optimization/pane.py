"""What a tab of the Optimization section is: a :class:`RecordPane` renders the selected optimization (the typed
:class:`~sparsify_tui.optimization.record.Optimization`) and asks the section for edits with Messages; a
:class:`StructurePane` is the one tab that depends on the pruning structure (its rows, and the texts the section
shows for that structure: list line, the Target input; the header and the estimate cards come from
:mod:`sparsify_tui.text.optimization`, in the record's structure's words).

**Adding a pane**: a module here with a :class:`RecordPane` subclass (``TAB_ID``, ``TITLE``, ``FOCUS``, ``show``)
and one line in :data:`sparsify_tui.tui.optimization.section.PANES`. **A structure's pane**: a
:class:`StructurePane` subclass with ``STRUCTURE`` and ``CREATE_CHOICES`` set (its own ``TAB_ID`` and ``TABLE_ID``:
every structure's pane is composed), and one line in :data:`sparsify_tui.tui.optimization.section.STRUCTURE_PANES`;
the section shows the pane of the selected record's structure and hides the others, and the create dialog offers the
``CREATE_CHOICES`` of every registered pane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, List, Optional, Tuple

from rich.markup import escape
from textual.message import Message
from textual.widget import Widget

from sparsify_tui.text import Fact, markup_lines
from sparsify_tui.text.optimization import Hints, estimate_facts, header_facts, inline, profiles_fact
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.widgets.charts import nice_ticks, tick_label

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import LayerRow, Optimization
    from sparsify_tui.tui.widgets.charts import Plot


@dataclass
class PaneContext:
    """What a pane may show besides the record: the project's training settings now (the Training pane compares
    them with the record's copy)."""

    project_training: Optional[Dict[str, Any]] = None


@dataclass
class ScheduleEdited(Message):
    """A pane asks the section to store schedule changes (:func:`sparsify_tui.services.optimizations.
    update_schedule` keywords: ``epochs``, ``quantization``, ``lr_modifiers``)."""

    changes: Dict[str, Any] = field(default_factory=dict)


class RecordPane(Widget):
    """One tab of the Optimization section. ``TAB_ID`` / ``TITLE``: the tab; ``FOCUS``: the selector of the widget
    that takes the focus when the tab is opened with its key."""

    TAB_ID: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    FOCUS: ClassVar[str] = ""

    DEFAULT_CSS = """
    RecordPane { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rec: Optional[Optimization] = None
        self.quiet = False  # True while show() sets values: the change events they fire are not edits

    @classmethod
    def shown_for(cls, rec: Optional[Optimization]) -> bool:
        """Whether the pane's tab is shown for ``rec`` (default: for every record; the Budget tab only for channel
        optimizations)."""
        return True

    def show(self, rec: Optimization, context: PaneContext) -> None:
        """Render ``rec``. Called on every selection and after every edit."""
        self.rec = rec
        self.quiet = True
        try:
            self.render_record(rec, context)
        finally:
            self.call_after_refresh(self._unquiet)

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        raise NotImplementedError

    def _unquiet(self) -> None:
        self.quiet = False


class StructurePane(RecordPane):
    """The rows of one pruning structure (``STRUCTURE``): a :class:`FilterableTable` (``TABLE_ID``, ``COLUMNS``,
    ``HINT``) the section's edit keys work on (enter edits the row's value, ``+``/``-`` step it, ``x`` releases the
    override, ``i`` shows the row's record), and the texts the section shows for a record of this structure."""

    STRUCTURE: ClassVar[str] = ""
    CREATE_CHOICES: ClassVar[List[Tuple[str, str, str]]] = []
    """The create dialog's Prune choices of this structure: ``(label, "structure[:target]", default value)``."""
    TABLE_ID: ClassVar[str] = ""
    COLUMNS: ClassVar[List[Column]] = []
    HINT: ClassVar[str] = ""
    ROW_NOUN: ClassVar[str] = "layer"

    DEFAULT_CSS = """
    StructurePane .hint { color: $text-muted; height: auto; padding: 0 1; }
    """

    def compose(self):
        from textual.widgets import Static

        yield Static(self.HINT, classes="hint", id=f"{self.TABLE_ID}-hint")
        yield FilterableTable(self.COLUMNS, id=self.TABLE_ID)

    @property
    def table(self) -> FilterableTable:
        return self.query_one(f"#{self.TABLE_ID}", FilterableTable)

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        table = self.table
        cursor = table.data_table.cursor_row if table.is_mounted else 0
        table.set_rows(self.rows(rec))
        if table.is_mounted and cursor is not None and 0 <= cursor < table.data_table.row_count:
            table.data_table.move_cursor(row=cursor)

    def current_layer(self) -> Optional[LayerRow]:
        """The record's row under the table's cursor, or None."""
        row = self.table.current_row()
        return self.rec.layer(row.get("layer")) if row is not None and self.rec is not None else None

    # -- what the section shows for a record of this structure ---------------------------------------------------
    HEADER_KIND: ClassVar[str] = ""
    """Shown after the record's name in the header (e.g. ``"channel · "``)."""

    @classmethod
    def rows(cls, rec: Optimization) -> List[Dict[str, Any]]:
        """The table's rows (``_key`` and ``layer``: the row's weight name / group id)."""
        raise NotImplementedError

    @classmethod
    def target(cls, rec: Optimization) -> Tuple[str, str]:
        """``(settings field, label)`` of the Target input of the Pruning tab."""
        return "sparsity", "Sparsity"

    @classmethod
    def header_text(cls, rec: Optimization) -> str:
        """Two lines: the name, the structure and the profiles; then the header's facts
        (:func:`sparsify_tui.text.optimization.header_facts`)."""
        return (f"[b]{escape(rec.name)}[/b] · {cls.HEADER_KIND}{escape(profiles_fact(rec).value)}\n"
                f"{escape(inline(header_facts(rec, HINTS)))}")

    @classmethod
    def chart_title(cls, rec: Optimization) -> str:
        return f"Sparsity per layer ({len(rec.layers)} layers)"

    @classmethod
    def estimate_texts(cls, rec: Optimization) -> Dict[str, str]:
        """Texts of the Summary / Performance / FLOPs / Params estimate cards
        (:func:`sparsify_tui.text.optimization.estimate_facts`, in the record's structure's words); the Summary
        ends with every warning."""
        texts = {key: facts_markup(facts) for key, facts in estimate_facts(rec, HINTS).items()}
        texts["summary"] += warnings_text(rec)
        return texts

    @classmethod
    def create_args(cls, ws, project_id: str, values: Dict[str, Any]) -> Tuple[Optional[dict], float, Optional[str]]:
        """``(settings, sparsity, loss)`` for ``create_optimization`` from the create dialog's ``values``. Default:
        this structure, the value as the target sparsity, the chosen loss profile."""
        return {"structure": cls.STRUCTURE}, values["sparsity"], values["loss"]

    @classmethod
    def list_text(cls, rec: Optimization) -> str:
        """The second line of the record in the section's list."""
        raise NotImplementedError

    @classmethod
    def layer_record(cls, rec: Optimization, layer: LayerRow) -> list:
        """Every field of one row for the ``i`` dialog: ``(label, value)`` pairs."""
        return [(k.replace("_", " "), v) for k, v in layer.to_dict().items()]


HINTS = Hints(apply="a in Benchmarks (5)", benchmark="n in Benchmarks (5)")
"""Where a TUI user applies and benchmarks an optimization (:mod:`sparsify_tui.text.optimization`)."""


def facts_markup(facts: List[Fact]) -> str:
    """Facts as card lines (:func:`~sparsify_tui.text.markup_lines`); a ``warning`` fact marked like
    :func:`warnings_text`."""
    return "\n".join(_warning(f.value) if f.label == "warning" else markup_lines([f])[0] for f in facts)


def _warning(text: str) -> str:
    return f"[b reverse] ! [/] [b]warning:[/b] {escape(text)}"


def warnings_text(rec: "Optimization") -> str:
    """Every warning about the record (:meth:`~sparsify_tui.optimization.record.Optimization.all_warnings`, as
    ``optimization show`` prints them), one line each, marked by a glyph as well as a colour (for the Summary
    card)."""
    return "".join(f"\n{_warning(w)}" for w in rec.all_warnings())


def metric_columns(columns: list, metric: Optional[str]) -> list:
    """A search's trial ``columns`` with its ``metric_value`` column named and formatted for ``metric``
    (:func:`sparsify_tui.text.searches.metric_name`): "Top-1 drop (points)" for top1 (the value is a drop of
    accuracy), else the metric ("Nmse")."""
    from dataclasses import replace

    from sparsify_tui.text.searches import metric_name

    out = []
    for col in columns:
        if col.key == "metric_value":
            if metric == "top1":
                col = replace(col, label="Top-1 drop (points)",
                              fmt=lambda v: "" if v is None else f"{float(v) * 100:.1f}")
            else:
                col = replace(col, label=metric_name(metric).upper() if metric in ("nmse", "kl") else
                              metric_name(metric).capitalize())
        out.append(col)
    return out


def show_trials(table: Any, columns: list, search: Any, rows: list) -> None:
    """Fill a search's trial table: its columns named for the search's metric (:func:`metric_columns`), its rows."""
    named = metric_columns(columns, getattr(search, "metric", None))
    if [c.label for c in table.columns] != [c.label for c in named]:
        table.set_columns(named)
    table.set_rows(rows)


def plot_search(plot: "Plot", search: Any, ylabel: str, groups: Callable[[list], list], *, fp32: bool = False) -> None:
    """Draw a search's trials (an INT8 or a budget search: ``trials`` with ``speedup``, ``metric_value``, ``index``;
    ``max_drop``, ``chosen``) on ``plot``: the metric against the measured speedup, the budget line, the FP32 point
    (``fp32``), each of ``groups(timed trials)`` (``(trials, marker, label)``) and the chosen trial (◆). The plot is
    hidden while no trial was timed."""
    timed = [t for t in (search.trials if search is not None else []) if t.speedup]
    plot.display = bool(timed)
    if not timed:
        return
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    xs = [float(t.speedup) for t in timed]
    scale = 100.0 if getattr(search, "metric", None) == "top1" else 1.0  # a top-1 drop in points, as the table
    # drawn in this order so the chosen config stays visible on the budget line's row
    lo, hi = min(xs + [1.0]), max(xs + [1.0])
    plt.plot([lo, hi], [float(search.max_drop or 0) * scale] * 2, label="budget")
    if fp32:
        plt.scatter([1.0], [0.0], marker="○", label="FP32")
    for trials, marker, label in groups(timed):
        if trials:
            plt.scatter([float(t.speedup) for t in trials], [float(t.metric_value) * scale for t in trials],
                        marker=marker, label=label)
    chosen = [t for t in timed if t.index == search.chosen]
    if chosen:
        plt.scatter([float(chosen[0].speedup)], [float(chosen[0].metric_value) * scale], marker="◆",
                    label="chosen")
    # round y ticks spanning every value drawn: a trial on a tick's value (a drop of 0) is drawn on its label's row
    ys = [float(search.max_drop or 0) * scale, 0.0] + [float(t.metric_value) * scale for t in timed]
    ticks = nice_ticks(min(ys), max(ys))
    plt.ylim(ticks[0], ticks[-1])
    plt.yticks(ticks, [tick_label(t, ticks) for t in ticks])
    plt.xlabel("measured speedup vs FP32 (×)")
    plt.ylabel(ylabel)  # what the y values are: a top-1 search plots the drop, not top-1
    plot.redraw()


__all__ = ["PaneContext", "ScheduleEdited", "RecordPane", "StructurePane", "metric_columns", "plot_search",
           "show_trials", "warnings_text", "facts_markup",
           "HINTS"]
