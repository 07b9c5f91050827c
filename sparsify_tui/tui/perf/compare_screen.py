"""Perf profile comparison: mark two profiles in the Performance Profiles list (`space`), then `=`.

:class:`PerfCompareScreen` shows :func:`sparsify_tui.services.comparisons.compare_perf_profiles` (the same call as
``sparsify-tui compare PROJECT A B``):

* a header with both sides (profile, FP32 or INT8, batch, cores, measured median and p90 latency) and the totals
  (Σ rows: the sums of each side's rows, which every row adds up to; the B/A of the measured latencies; how many
  rows are unmatched);
* **Op types** (`m`): a diverging bar chart of B − A ms (or log2 B/A, `v`) per op type;
* **Top layers** (`g`): the same for the nodes with the most time on either side (`+`/`-`: 10, 20, 50, all);
* **Table** (`l`): every row (id, op type, A ms, B ms, B/A, shares, status: matched, fused differently, removed,
  only in A/B, not a node), filterable (`/`), sorted by B/A, largest first (`S` reverses, `s` sorts by the next
  column, `o` restores graph order).

`<` / `>` move between the tabs (the keys of the sections: `m` main view, `l` table, `g` chart).

`a` / `b` switch a side between the profile's FP32 times and the times of its measured INT8 model; `x` swaps A and
B. Which two profiles: the two marked ones; one marked and another highlighted: those two; otherwise the
highlighted profile's FP32 vs its INT8.
"""

from __future__ import annotations

from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TabPane

from sparsify_tui.text import markup_lines
from sparsify_tui.text.comparison import comparison_facts
from sparsify_tui.tui import messages
from sparsify_tui.tui.perf.messages import PerfComparisonLoaded
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.diverging import DivergingBarChart
from sparsify_tui.tui.widgets.footer import KeysFooter
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_percent
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.workers import app_work, post_result

TOP_N_CHOICES = (10, 20, 50, 0)  # 0 = all
TABS = ("ops", "top", "rows")
MARKS = ("A", "B")


def spec(record_id: str, view: str) -> str:
    """The compare spec of a profile side: ``"<record id>"`` or ``"<record id>:int8"``."""
    return record_id + (":int8" if view == "int8" else "")


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}×"


def comparison_rows(cmp) -> list[dict]:
    """Table rows (A's graph order, then B's extra rows, then special rows) of a ``PerfComparison``."""
    return [{"_key": i, "index": i, "id": r.id, "op_type": r.op_type, "a_ms": r.a_ms, "b_ms": r.b_ms,
             "ratio": r.ratio, "a_share": r.a_share, "b_share": r.b_share,
             "status": "" if r.matched else r.status} for i, r in enumerate(cmp.rows)]


class PerfCompareScreen(ModalScreen[None]):
    """Two perf profiles side by side per node (module docstring)."""

    DEFAULT_CSS = """
    PerfCompareScreen { background: $background; }
    PerfCompareScreen > Vertical { width: 100%; height: 100%; }
    PerfCompareScreen .cmp-line { height: auto; padding: 0 1; }
    PerfCompareScreen #cmp-title { text-style: bold; background: $panel; }
    PerfCompareScreen #cmp-notes { color: $text-muted; }
    PerfCompareScreen ViewTabs { height: 1fr; }
    PerfCompareScreen TabPane { padding: 0; }
    PerfCompareScreen FilterableTable { height: 1fr; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="perfcompare.close", tooltip="Back to the Performance Profiles"),
        Binding("a", "toggle_view('a')", "A FP32/INT8", id="perfcompare.view_a",
                tooltip="Side A: the profile's FP32 times, or the times of its measured INT8 model"),
        Binding("b", "toggle_view('b')", "B FP32/INT8", id="perfcompare.view_b",
                tooltip="Side B: the profile's FP32 times, or the times of its measured INT8 model"),
        Binding("x", "swap", "Swap", id="perfcompare.swap", tooltip="Swap A and B"),
        *keys.tabs("perfcompare"),
        Binding("m", "tab('ops')", "Op types", show=False, id="perfcompare.tab_ops", tooltip="Chart per op type"),
        Binding("g", "tab('top')", "Top", show=False, id="perfcompare.tab_top", tooltip="Chart of the top layers"),
        Binding("l", "tab('rows')", "Table", show=False, id="perfcompare.tab_rows",
                tooltip="Every row, sorted by B/A (S reverses)"),
        *keys.top_n("perfcompare", "cycle_top_n", "Top layers: more rows (10, 20, 50, all)",
                    "Top layers: fewer rows (all, 50, 20, 10)"),
        Binding("question_mark", "app.help", "Help", id="perfcompare.help", tooltip="List every key"),
    ]

    def __init__(self, project_id: str, a: tuple[str, str], b: tuple[str, str]) -> None:
        """``a`` / ``b``: ``(perf profile record id, view)`` with view "fp32" or "int8"."""
        super().__init__()
        self.project_id = project_id
        self.a, self.b = tuple(a), tuple(b)
        self._shown: tuple = (self.a, self.b)
        self.comparison = None
        self.top_n = 20

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Compare perf profiles  [dim](escape: back)[/dim]", id="cmp-title", classes="cmp-line")
            yield Static("Loading the comparison…", id="cmp-sides", classes="cmp-line")
            yield Static("", id="cmp-totals", classes="cmp-line")
            yield Static("", id="cmp-notes", classes="cmp-line")
            with ViewTabs(initial="ops"):
                with TabPane("Op types (m)", id="ops"):
                    with Vertical():  # the chart scrolls itself: no second tab stop around it
                        yield DivergingBarChart(title="Per op type", id="cmp-ops")
                with TabPane("Top layers (g)", id="top"):
                    with Vertical():
                        yield DivergingBarChart(title="Top layers", id="cmp-top")
                with TabPane("Table (l)", id="rows"):
                    yield FilterableTable([
                        Column("index", "#", numeric=True),
                        Column("id", "Node id", filter=True),
                        Column("op_type", "Op type", filter=True),
                        Column("a_ms", "A ms", numeric=True, fmt=_ms),
                        Column("b_ms", "B ms", numeric=True, fmt=_ms),
                        Column("ratio", "B/A", numeric=True, fmt=_x),
                        Column("a_share", "A %", numeric=True, fmt=format_percent),
                        Column("b_share", "B %", numeric=True, fmt=format_percent),
                        Column("status", "Unmatched", filter=True),
                    ], id="cmp-table")
            yield KeysFooter()

    def on_mount(self) -> None:
        self._load()

    @app_work(group="perf-compare", description="compare perf profiles")
    def _load(self) -> None:
        from sparsify_tui.services.comparisons import compare_perf_profiles

        specs = (self.a, self.b)
        cmp = compare_perf_profiles(self.app.workspace, self.project_id, spec(*self.a), spec(*self.b))
        post_result(self, PerfComparisonLoaded(cmp, specs))

    @on(PerfComparisonLoaded)
    def _loaded(self, message: PerfComparisonLoaded) -> None:
        if message.specs != (self.a, self.b):
            return  # a newer toggle is on its way
        self._shown = message.specs
        self.show_comparison(message.comparison)

    @on(messages.WorkFailed)
    def _failed(self, message: messages.WorkFailed) -> None:
        self.a, self.b = self._shown  # e.g. INT8 asked of a profile without it: keep what was shown
        if self.comparison is None:
            self.query_one("#cmp-sides", Static).update("Could not compare these profiles.")

    # -- rendering ------------------------------------------------------------------------------
    def show_comparison(self, cmp) -> None:
        self.comparison = cmp
        lines = markup_lines(comparison_facts(cmp))
        self.query_one("#cmp-sides", Static).update("\n".join(lines[:2]))
        self.query_one("#cmp-totals", Static).update(lines[2])
        self.query_one("#cmp-notes", Static).update("\n".join(f"note: {n}" for n in cmp.notes))
        groups = [g for g in cmp.groups if g.a_ms or g.b_ms]
        self.query_one("#cmp-ops", DivergingBarChart).set_data(
            [g.name for g in groups], [g.a_ms for g in groups], [g.b_ms for g in groups],
            title=f"Per op type ({len(groups)})")
        table = self.query_one("#cmp-table", FilterableTable)
        table.set_rows(comparison_rows(cmp))
        table.sort_by("ratio", reverse=True)
        self._render_top()

    def _render_top(self) -> None:
        if self.comparison is None:
            return
        rows = [r for r in self.comparison.top_rows(self.top_n) if (r.a_ms or 0) > 0 or (r.b_ms or 0) > 0]
        label = f"Top {self.top_n} rows by time" if self.top_n else "Every row with time"
        self.query_one("#cmp-top", DivergingBarChart).set_data(
            [r.id for r in rows], [r.a_ms for r in rows], [r.b_ms for r in rows], title=f"{label} (+/-: more/fewer)")

    # -- actions ----------------------------------------------------------------------------------
    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle_view(self, side: str) -> None:
        rec, view = getattr(self, side)
        setattr(self, side, (rec, "fp32" if view == "int8" else "int8"))
        self._load()

    def action_swap(self) -> None:
        self.a, self.b = self.b, self.a
        self._load()

    def action_tab(self, tab: str) -> None:
        self.query_one(ViewTabs).active = tab
        target = {"ops": "#cmp-ops", "top": "#cmp-top", "rows": "#cmp-table"}[tab]
        self.query_one(target).focus()

    def action_cycle_tab(self, step: int) -> None:
        self.action_tab(keys.cycle(list(TABS), self.query_one(ViewTabs).active, step))

    def action_cycle_top_n(self, step: int) -> None:
        """`+` / `-`: more or fewer top layers (10, 20, 50, all), stopping at either end."""
        i = TOP_N_CHOICES.index(self.top_n) if self.top_n in TOP_N_CHOICES else 1
        self.top_n = TOP_N_CHOICES[max(0, min(len(TOP_N_CHOICES) - 1, i + step))]
        self._render_top()


# ------------------------------------------------------------------------------ marking in the profile list
def marked_label(label: str, record_id: str, marked: list) -> str:
    """A profile list label with its compare mark: ``"A▸ b1 (b1, 2c)"`` for the first marked profile."""
    if record_id in marked:
        return f"{MARKS[marked.index(record_id)]}▸ {label}"
    return label


def toggle_mark(marked: list, record_id: str) -> list:
    """``marked`` with ``record_id`` added (as B; the oldest mark goes when there would be three) or removed."""
    if record_id in marked:
        return [m for m in marked if m != record_id]
    return (list(marked) + [record_id])[-2:]


def compare_pair(marked: list, highlighted: Optional[str]) -> Optional[tuple]:
    """The ``(A, B)`` sides ``=`` compares (module docstring), each ``(record id, view)``; None when there is
    nothing to compare (no mark and no measured profile highlighted)."""
    if len(marked) >= 2:
        return (marked[0], "fp32"), (marked[1], "fp32")
    if len(marked) == 1 and highlighted and highlighted != marked[0]:
        return (marked[0], "fp32"), (highlighted, "fp32")
    one = marked[0] if marked else highlighted
    return ((one, "fp32"), (one, "int8")) if one else None
