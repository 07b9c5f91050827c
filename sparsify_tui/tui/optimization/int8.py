"""The INT8 card of the Optimization section: the accuracy-controlled INT8 search of the selected optimization.

* **Budget and metric**: ``max_drop`` with what it means, the metric and why it was chosen, the data and the
  calibration (method, batches), the status.
* **Trials**: every quantized candidate (FP32 groups, FP32 nodes, metric, within budget, measured ms and speedup,
  note), and a plotext chart of metric against measured speedup, the budget as a line, the chosen config marked.
* **Layers**: per layer its INT8 sensitivity, FP32 or INT8, and why.
* **Applied vs benchmark**: apply's output difference (metric, top-1 agreement, accuracy with labels) next to the
  newest benchmark's measured speedup of this optimization, and the estimate next to that measurement.

It sits in the section's Quant tab, under the layers kept FP32. `I` opens the INT8 search dialog (a background
``int8_search`` job that creates a new optimization; its progress shows in the section's job pane, `c` cancels it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import SelectionList, Static

from sparsify_tui.formatting import format_fixed
from sparsify_tui.text.optimization import applied_facts, runtime_text
from sparsify_tui.text import markup_lines
from sparsify_tui.text.searches import int8_search_facts, metric_name
from sparsify_tui.tui.optimization.pane import (HINTS, PaneContext, RecordPane, ScheduleEdited, facts_markup,
                                                plot_search, show_trials)
from sparsify_tui.tui.widgets.charts import Plot
from sparsify_tui.tui.optimization.dialogs import SearchDialog, search_keys
from sparsify_tui.tui.widgets.dialogs import dialog_css
from sparsify_tui.tui.widgets.labels import elide_middle
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.widgets.toggles import TextCheckbox, TextSelectionList

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import Optimization


TRIAL_COLUMNS = [
    Column("index", "#", numeric=True),
    Column("groups", "FP32 grp", numeric=True),
    Column("excluded_count", "FP32 nodes", numeric=True),
    Column("metric_value", "Metric", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),  # named per search
    Column("within", "Fits"),
    Column("median_ms", "ms", numeric=True, fmt=lambda v: format_fixed(v, ".3f", "")),
    Column("speedup", "Speedup", numeric=True, fmt=lambda v: format_fixed(v) + "×" if v else ""),
    Column("note", "Note", filter=True),
]
LAYER_COLUMNS = [
    Column("node_id", "Layer", filter=True, width=22),
    Column("sensitivity", "INT8 sens.", numeric=True, fmt=lambda v: format_fixed(v, ".3g", "-")),
    Column("state", "Runs", filter=True),
    Column("why", "Why", filter=True),
]


def summary_text(rec: Optimization) -> str:
    """The card's head: budget, metric and why, data, calibration, status, timing."""
    s = rec.quantization.search
    if s is None:
        return ("No INT8 search for this optimization: its FP32 layers come from the loss profile's "
                "INT8-sensitivity outliers (Quant tab).\nPress [b]I[/b] to search the fastest INT8 config "
                "within an accuracy budget.")
    return "\n".join(markup_lines(int8_search_facts(s)))


def trial_rows(rec: Optimization) -> list[dict]:
    s = rec.quantization.search
    return [{"_key": t.index, "index": t.index, "groups": t.groups, "excluded_count": t.excluded_count,
             "metric_value": t.metric_value, "within": "yes" if t.within_budget else "no", "median_ms": t.median_ms,
             "speedup": t.speedup, "note": ("▶ " if t.index == s.chosen else "") + (t.note or "")}
            for t in (s.trials if s is not None else [])]


def layer_rows(rec: Optimization) -> list[dict]:
    from sparsify_tui.optimization.int8_search import layer_states

    return [{"_key": r["weight_name"], **r} for r in layer_states(rec.quantization, rec.layers)]


class Int8Card(Widget):
    """The INT8 tab of the Optimization section (module docstring). ``show(rec, bench)`` fills it."""

    DEFAULT_CSS = """
    Int8Card { height: auto; }
    Int8Card > Vertical { height: auto; }
    Int8Card #i8-summary, Int8Card #i8-applied { height: auto; padding: 0 1; }
    Int8Card #i8-plot { height: 12; }
    Int8Card FilterableTable { height: auto; max-height: 14; }
    Int8Card FilterableTable > DataTable { height: auto; max-height: 12; }
    Int8Card .i8-title { text-style: bold; padding: 0 1; height: 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="i8-summary")
            yield Static("", id="i8-applied")
            yield Static("Metric vs measured speedup (● trials, ◆ chosen, — budget)", classes="i8-title")
            yield Plot(id="i8-plot")
            yield Static("Trials (in the order tried)", classes="i8-title")
            yield FilterableTable(TRIAL_COLUMNS, show_status=False, id="i8-trials")
            yield Static("Layers: INT8 sensitivity, FP32 or INT8, and why", classes="i8-title")
            yield FilterableTable(LAYER_COLUMNS, show_status=False, id="i8-layers")

    def show(self, rec: Optimization) -> None:
        self.query_one("#i8-summary", Static).update(summary_text(rec))
        # the applied model's output difference and its measured speedup next to the estimate, worded as on the
        # Pruning tab's summary card and by `optimization show` (sparsify_tui.text.optimization)
        self.query_one("#i8-applied", Static).update(facts_markup(applied_facts(rec, HINTS)))
        show_trials(self.query_one("#i8-trials", FilterableTable), TRIAL_COLUMNS, rec.quantization.search,
                    trial_rows(rec))
        self.query_one("#i8-layers", FilterableTable).set_rows(layer_rows(rec))
        self._plot(rec)

    def _plot(self, rec: Optimization) -> None:
        s = rec.quantization.search
        plot_search(self.query_one("#i8-plot", Plot), s, (str(s.metric_label or "metric") if s.user_metric else
                    metric_name(s.metric) + (", points" if s.metric == "top1" else "")) if s is not None else "",
                    lambda timed: [(timed, "●", "trials")])


class QuantPane(RecordPane):
    """The Quant tab: the INT8 quantization modifier (``[x]``/``[ ]`` on/off, layers kept FP32, ordered by INT8
    sensitivity), then the :class:`Int8Card`. Edits go to the section as :class:`ScheduleEdited`."""

    TAB_ID = "tab-quant"
    TITLE = "Quant"
    FOCUS = "#q-enabled"

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield TextCheckbox("INT8 quantization modifier", id="q-enabled")
            yield Static("", id="q-info", classes="hint")
            yield TextSelectionList(id="q-excluded")
            yield Int8Card(id="int8-card")

    def render_record(self, rec: Optimization, context: PaneContext) -> None:
        q = rec.quantization
        self.query_one("#q-enabled", TextCheckbox).value = bool(q.enabled)
        self.query_one("#q-info", Static).update(
            f"Checked layers stay FP32 (default: INT8-sensitivity outliers). QAT from epoch "
            f"{q.start_epoch}. Apply (section 5) quantizes for {runtime_text(rec)} (static QDQ, one .onnx).")
        sl = self.query_one("#q-excluded", SelectionList)
        sl.clear_options()
        excluded = set(q.excluded or [])
        order = sorted(rec.layers, key=lambda l: -(l.int8_sensitivity or 0))
        sl.add_options([(f"{elide_middle(l.weight_name, 40)}  {format_fixed(l.int8_sensitivity, '.3g', '-')}",
                         l.node_id, l.node_id in excluded) for l in order])
        self.query_one("#int8-card", Int8Card).show(rec)

    @on(TextCheckbox.Changed, "#q-enabled")
    def _quant_toggled(self, event: TextCheckbox.Changed) -> None:
        if self.quiet or self.rec is None or bool(self.rec.quantization.enabled) == event.value:
            return
        self.post_message(ScheduleEdited({"quantization": {"enabled": event.value}}))

    @on(SelectionList.SelectedChanged, "#q-excluded")
    def _excluded_changed(self, event: SelectionList.SelectedChanged) -> None:
        if self.quiet or self.rec is None:
            return
        selected = list(event.selection_list.selected)
        current = list(self.rec.quantization.excluded or [])
        layer_ids = {l.node_id for l in self.rec.layers}
        if set(selected) == {x for x in current if x in layer_ids}:
            return  # the list shows layers only: the INT8 search's other FP32 nodes are not a change
        kept = [x for x in current if x not in layer_ids]
        self.post_message(ScheduleEdited({"quantization": {"excluded": kept + selected}}))


class Int8SearchDialog(SearchDialog):
    """Ask for an INT8 search: name, budget, sample data and its labels key, metric, calibration. The budget and the
    data file are checked here (one line under the fields; the dialog stays open), the rest by
    :func:`sparsify_tui.services.job_settings.int8_settings` in the section's worker. Dismisses with the job arguments, or
    None. One-line fields, so it fits 80x24; `ctrl+r` runs, `escape` closes."""

    PREFIX = "i8d"
    TITLE = "INT8 search within an accuracy budget (a job; makes an optimization)"
    DATA_HINT = "synthetic, or .npz of inputs + labels; ctrl+b"
    JOB_TYPE = "int8_search"
    DEFAULT_CSS = dialog_css("Int8SearchDialog")
    BINDINGS = search_keys("optimization.int8", "INT8 search")

    def more_selects(self) -> list[tuple[str, str, list, str]]:
        from sparsify_tui.tui.widgets.runtimes import runtime_choices, runtime_value

        return [("Calibration", "calibration", [(m, m) for m in ("minmax", "entropy", "percentile")], "minmax"),
                ("Runtime", "runtime", runtime_choices(), runtime_value(None, None))]

    def values(self) -> dict:
        """The job arguments (the INT8 model is timed and quantized for the runtime chosen: each engine's own
        activation type); raises ``SparsifyError`` (one line) for a bad budget or data file."""
        from sparsify_tui.tui.widgets.runtimes import runtime_args

        return {**self.search_values(), "calibration": self.choice("calibration"),
                **runtime_args(str(self.choice("runtime")))}


__all__ = ["Int8Card", "QuantPane", "Int8SearchDialog", "summary_text", "trial_rows", "layer_rows"]
