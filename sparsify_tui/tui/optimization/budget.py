"""The Budget tab of the Optimization section: the budget search that chose the selected optimization's channel
target and INT8 (:mod:`sparsify_tui.optimization.budget_search`).

* **Budget and metric**: ``max_drop`` with what it means, the metric and why, the data file, the calibration and
  held-out items by name, the status, and the chosen configuration with its measured speedup.
* **Chart**: every trial's held-out metric against its measured speedup vs FP32 (● thinned, ▲ thinned + INT8),
  the budget as a line, FP32 at (1, 0) and the chosen trial (◆).
* **Trials**: every trial in the order tried (target, INT8 groups kept FP32, channels kept, metric, within budget,
  measured ms and speedup, note).

`B` opens the search dialog (a background ``budget_search`` job that creates a new optimization; its progress shows
in the section's job pane, `c` cancels it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from sparsify_tui.formatting import format_fixed
from sparsify_tui.text import markup_lines
from sparsify_tui.text.searches import budget_search_facts, metric_name
from sparsify_tui.tui.optimization.pane import PaneContext, RecordPane, plot_search, show_trials
from sparsify_tui.tui.widgets.charts import Plot
from sparsify_tui.tui.optimization.dialogs import SearchDialog, search_keys
from sparsify_tui.tui.widgets.dialogs import dialog_css
from sparsify_tui.tui.widgets.tables import Column, FilterableTable

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


TRIAL_COLUMNS = [
    Column("index", "#", numeric=True),
    Column("target", "Target", numeric=True, fmt=lambda v: format_fixed(v) + "×"),
    Column("int8", "INT8"),
    Column("kept", "Kept ch"),
    Column("metric_value", "Metric", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),  # named per search
    Column("within", "Fits"),
    Column("median_ms", "ms", numeric=True, fmt=lambda v: format_fixed(v, ".3f", "")),
    Column("speedup", "Speedup", numeric=True, fmt=lambda v: format_fixed(v) + "×" if v else ""),
    Column("runtime", "Runtime", filter=True),
    Column("note", "Note", filter=True),
]


def summary_text(rec: Optimization) -> str:
    """The card's head: budget, metric and why, data and the split, status, the choice."""
    s = rec.search
    if s is None:
        return ("No budget search made this optimization: its channel target is the one you set.\nPress [b]B[/b] to "
                "search the fastest model within an accuracy budget (channels, reconstruction, INT8), measured.")
    return "\n".join(markup_lines(budget_search_facts(s)))


def trial_rows(rec: Optimization) -> list[dict]:
    s = rec.search
    return [{"_key": t.index, "index": t.index, "target": t.target, "runtime": t.runtime_text,
             "int8": f"yes ({t.fp32_groups} FP32)" if t.quantized else "no",
             "kept": f"{t.kept_channels}/{t.channels}" if t.channels else "all",
             "metric_value": t.metric_value, "within": "yes" if t.within_budget else "no", "median_ms": t.median_ms,
             "speedup": t.speedup, "note": ("▶ " if t.index == s.chosen else "") + (t.note or "")}
            for t in (s.trials if s is not None else [])]


class BudgetCard(Vertical):
    """The budget search of one optimization (module docstring). ``show(rec)`` fills it."""

    DEFAULT_CSS = """
    BudgetCard { height: auto; }
    BudgetCard #bs-summary { height: auto; padding: 0 1; }
    BudgetCard #bs-plot { height: 12; }
    BudgetCard FilterableTable { height: auto; max-height: 14; }
    BudgetCard FilterableTable > DataTable { height: auto; max-height: 12; }
    BudgetCard .bs-title { text-style: bold; padding: 0 1; height: auto; }  /* wraps at a word at 80 columns */
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="bs-summary")
        yield Static("Held-out metric vs measured speedup (● thinned, ▲ + INT8, ◆ chosen, — budget)",
                     classes="bs-title")
        yield Plot(id="bs-plot")
        yield Static("Trials (in the order tried)", classes="bs-title")
        yield FilterableTable(TRIAL_COLUMNS, show_status=False, id="bs-trials")

    def show(self, rec: Optimization) -> None:
        self.query_one("#bs-summary", Static).update(summary_text(rec))
        show_trials(self.query_one("#bs-trials", FilterableTable), TRIAL_COLUMNS, rec.search, trial_rows(rec))
        self.query_one("#bs-trials", FilterableTable).display = rec.search is not None
        self._plot(rec)

    def _plot(self, rec: Optimization) -> None:
        s = rec.search
        plot_search(self.query_one("#bs-plot", Plot), s, f"{s.metric_label} worsening (held out)" if s is not None and s.user_metric else
                    f"{metric_name(s.metric)}{', points' if s.metric == 'top1' else ''} (held out)" if s is not None else "",
                    lambda timed: [([t for t in timed if t.quantized == quantized], marker, label)
                                   for quantized, marker, label in ((False, "●", "thinned"), (True, "▲", "+ INT8"))],
                    fp32=True)


class BudgetPane(RecordPane):
    """The Budget tab: the :class:`BudgetCard` of the selected optimization."""

    TAB_ID = "tab-budget"
    TITLE = "Budget"
    FOCUS = "#bs-trials"

    @classmethod
    def shown_for(cls, rec: Optional[Optimization]) -> bool:
        """Channel optimizations (the search makes them; one set by hand says how to run it)."""
        return rec is not None and rec.settings.structure == "channel"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield BudgetCard(id="budget-card")

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        self.query_one("#budget-card", BudgetCard).show(rec)


class BudgetSearchDialog(SearchDialog):
    """Ask for a budget search: name, budget, sample data (required: the reconstruction fits real items) and its
    labels key, metric, calibration items, INT8. The budget and the data file are checked here (one line under the
    fields; the dialog stays open), the rest by :func:`sparsify_tui.services.job_settings.budget_settings` and the job's
    check in the section's worker. Dismisses with the job arguments, or None. One-line fields, so it fits 80x24;
    `ctrl+r` runs, `escape` closes."""

    PREFIX = "bsd"
    TITLE = "Fastest model within an accuracy budget (a job: a new optimization)"
    DATA_HINT = "a .npz of inputs + labels (required); ctrl+b"
    INPUT = Input
    JOB_TYPE = "budget_search"
    DEFAULT_CSS = dialog_css("BudgetSearchDialog")
    BINDINGS = search_keys("optimization.budget", "budget search")

    def more_fields(self) -> list[tuple[str, str, str, str]]:
        return [("Calib. items", "cal", "", "64 (at most half the items); the rest score")]

    def more_selects(self) -> list[tuple[str, str, list, str]]:
        from sparsify_tui.tui.widgets.runtimes import EVERY, runtime_choices

        return [("INT8", "int8", [("no: channels only", "no"), ("yes: INT8 on the best candidates", "yes")], "no"),
                ("Runtimes", "runtime", runtime_choices(many=True), EVERY)]

    def values(self) -> dict:
        """The job arguments; raises ``SparsifyError`` (one line) for a bad budget, a missing data file or a bad
        item count."""
        from sparsify_tui import settings
        from sparsify_tui.errors import SparsifyError
        from sparsify_tui.tui.widgets.runtimes import runtime_args

        if settings.data_file(self.text("data"), "Sample data") is None:
            raise SparsifyError("Sample data: the budget search needs a .npz of real items (the reconstruction fits "
                                "them and the rest score each trial)")
        cal = self.text("cal")
        return {**self.search_values(),
                "calibration_size": settings.calibration_size(cal, "Calib. items") if cal else None,
                "quantize": self.choice("int8") == "yes", **runtime_args(str(self.choice("runtime")), many=True)}


__all__ = ["BudgetCard", "BudgetPane", "BudgetSearchDialog", "summary_text", "trial_rows"]
