"""View of one measured performance profile.

`PerfProfileView(project_id, record_id)` is mounted by `sparsify_tui.tui.perf.section.PerfSection` when a
measured profile is selected. Tabs (keys m / l / g, or `<` / `>`, from the section):

* **Summary**: Model Summary (batch, cores, instruction sets; measured ms/batch and items/s; *estimated*
  pruned ms/batch and speedup at the chosen level; measured INT8 ms/batch and speedup; how the per-node
  times were scaled and the profiler's overhead; noise warnings with the offer to rerun) and Layer
  Summaries: a bar chart of time per op type. `y` cycles the Summary Type (Baseline ms, Pruned s ms
  (est.) for each level, INT8 ms (measured)); `v` (chart) cycles values / % / log; `t` shows the table.
* **Layer Results**: every node in graph order (index, node id, op type, weight, ms: its median over the profiled
  runs, its mean and interquartile range over them, raw profiled ms, % of total, FLOPs, GFLOP/s, est. pruned ms
  at the chosen level, INT8 ms), sortable (`s`) and filterable (`/`,
  on node id, op type and weight); `[` / `]` change the pruned level; `enter` or `i` shows a row's full record.
* **Top Layers**: chart of the top N nodes by ms (`+` / `-`: 10, 20, 50, all); clicking a bar shows its record.

Per-node times are **scaled to the unprofiled median** (:meth:`sparsify_tui.profiling.perf.PerfProfile.node_ms`):
the profiled pass inflates them (a few µs per kernel), so the rows add up to the measured latency and the
raw profiled figure is its own column. Pruned times are estimates for a sparse-kernel runtime: onnxruntime
gains nothing from unstructured sparsity, and the view says so. The add / rerun / delete actions are
PerfSection's; the add dialog is `perf.dialogs.PerfProfileDialog`.
"""

from __future__ import annotations

from typing import Optional

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static, TabPane

from sparsify_tui.formatting import format_ms
from sparsify_tui.text import markup_lines
from sparsify_tui.text.perf import summary_facts
from sparsify_tui.tui import messages
from sparsify_tui.tui.perf.messages import PerfProfileLoaded
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import RecordDialog, analysis_fields
from sparsify_tui.tui.widgets.records import RecordView
from sparsify_tui.tui.widgets.tables import (
    Column,
    FilterableTable,
    format_count,
    format_percent,
)
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.workers import app_work, post_result

LEVELS = ("0.4", "0.6", "0.7", "0.8", "0.85", "0.9", "0.95", "0.975", "0.99")
DEFAULT_LEVEL = "0.9"
TOP_N_CHOICES = (10, 20, 50, 0)  # 0 = all
TABLE = "perf_profiles"
TABS = ("summary", "layers", "top")
CONTROL_FLOW = ("If", "Loop", "Scan")


def summary_types(has_int8: bool) -> list[tuple[str, str]]:
    """(key, label) of the Summary Type choices: baseline, each pruned level (est.), INT8 (measured)."""
    out = [("baseline", "Baseline ms")]
    out += [(lv, f"Pruned {lv} ms (est.)") for lv in LEVELS]
    if has_int8:
        out.append(("int8", "INT8 ms (measured)"))
    return out


def op_label(op: str) -> str:
    """The op-type summary's label: a control-flow node's row holds its own time only (its body's nodes are
    counted under their own op types), and says so."""
    return f"{op} (own time)" if op in CONTROL_FLOW else op


def node_rows(profile, level: str) -> list[dict]:
    """Table rows (graph order, special rows last) for the Layer Results table: times scaled to the median (each
    node's median over the profiled runs, its mean and interquartile range), the raw profiled time next to them."""
    rows = []
    for n in profile.nodes:
        rows.append({
            "_key": n.index, "index": n.index, "id": n.id, "op_type": n.op_type, "weight_name": n.weight_name or "",
            "time_ms": profile.node_ms(n), "mean_ms": profile.node_ms(n, "mean"),
            "iqr_ms": profile.node_ms(n, "spread"), "raw_ms": n.time_ms, "share": n.share, "flops": n.flops,
            "gflops": n.gflops_per_s, "est_ms": profile.node_ms(n, level), "int8_ms": profile.node_ms(n, "int8"),
            "fused_into": n.fused_into or "",
        })
    return rows


def model_summary_text(profile, level: str) -> str:
    """The Model Summary block (Rich markup)."""
    lines = markup_lines(summary_facts(profile, level))
    note = lines.pop()  # the warnings go before the closing note on sparsity and onnxruntime
    lines += [f"[b reverse] ! [/] [b]{escape(str(w))}[/b] [dim](r: rerun)[/dim]" for w in profile.warnings or []]
    return "\n".join(lines + [note])


def node_record(profile, node, analysis_node: Optional[dict]) -> list:
    """Every field of one node of a perf profile (with the analysis' weight and shapes) for RecordDialog."""
    fields = analysis_fields(analysis_node) or [("Node id", node.id), ("Op type", node.op_type)]
    fields += [
        ("ms (median over the profiled runs, scaled to the median latency)", profile.node_ms(node)),
        ("Mean ms over the profiled runs (scaled)", profile.node_ms(node, "mean")),
        ("IQR ms over the profiled runs (p75 − p25, scaled)", profile.node_ms(node, "spread")),
        ("ms (raw, profiled pass)", node.time_ms),
        ("% of total", f"{node.share * 100:.2f}%"),
        ("GFLOP/s", node.gflops_per_s),
        ("Fused into", node.fused_into),
        ("Kernels", node.kernels),
        ("INT8 ms (scaled)", profile.node_ms(node, "int8")),
        ("INT8 ms (raw)", node.int8_time_ms),
        ("INT8 kernels", node.int8_kernels),
    ]
    fields += [(f"Est. pruned {lv} ms", profile.node_ms(node, lv)) for lv in LEVELS]
    return fields


class PerfProfileView(RecordView):
    """One measured perf profile: Summary, Layer Results and Top Layers tabs."""

    DEFAULT_CSS = """
    PerfProfileView { height: 1fr; }
    PerfProfileView #perf-summary { height: auto; padding: 0 1; }
    PerfProfileView .perf-line { height: auto; padding: 0 1; color: $text-muted; }  /* a hint wraps at a word */
    PerfProfileView FilterableTable { height: 1fr; }
    """

    BINDINGS = [
        Binding("y", "cycle_summary_type", "Type", show=False, id="perfprofile.summary_type",
                tooltip="Layer Summaries: baseline ms, pruned ms (est.) at each level, INT8 ms (measured)"),
        *keys.top_n("perfprofile", "top_n", "Top Layers: more nodes (10, 20, 50, all)", "Top Layers: fewer nodes"),
    ]

    def __init__(self, project_id: str, record_id: Optional[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.record_id = record_id
        self.profile = None
        self._shown_id: Optional[str] = None
        self._coming = False  # set_record() got its data before the view was mounted
        # no profile chosen yet (mounted with the section before its list came): a plain flag, not a CSS class,
        # since changing a class restyles the view's every descendant (~70 ms of opening a project)
        self._unset = record_id is None
        self.level = DEFAULT_LEVEL
        self.summary_type = "baseline"
        self.top_n = 20

    def compose(self) -> ComposeResult:
        # the Layer Results and Top Layers panes are built when first opened (ViewTabs lazy): _render_tab fills them
        with ViewTabs(initial="summary", lazy=True, on_build=self._render_tab):
            with TabPane("Summary (m)", id="summary"):
                with VerticalScroll():
                    yield Static("Loading the profile…", id="perf-summary")
                    yield Static("", id="summary-type", classes="perf-line")
                    yield BarChart(title="Layer Summaries", unit="ms", id="op-chart")
            with TabPane("Layer Results (l)", id="layers"):
                yield Static("", id="level-line", classes="perf-line")
                yield FilterableTable(self._columns(), id="layer-table")
            with TabPane("Top Layers (g)", id="top"):
                with Vertical():  # the chart scrolls itself: no second tab stop around it
                    yield BarChart(title="Top layers by ms", unit="ms", id="top-chart")

    def _columns(self) -> list[Column]:
        # the times first: at 80 columns they show next to the node id, the rest pages in with → (or wide)
        return [
            Column("index", "#", numeric=True, pin=True),
            Column("id", "Node id", filter=True, pin=True),
            Column("time_ms", "ms", numeric=True, fmt=format_ms),
            Column("share", "%", numeric=True, fmt=format_percent),
            Column("est_ms", "Est. ms", numeric=True, fmt=format_ms),
            Column("int8_ms", "INT8 ms", numeric=True, fmt=format_ms),
            Column("mean_ms", "Mean ms", numeric=True, fmt=format_ms),
            Column("iqr_ms", "IQR ms", numeric=True, fmt=format_ms),
            Column("raw_ms", "Raw ms", numeric=True, fmt=format_ms),
            Column("op_type", "Op type", filter=True),
            Column("weight_name", "Weight", filter=True),
            Column("flops", "FLOPs", numeric=True, fmt=format_count),
            Column("gflops", "GFLOP/s", numeric=True, fmt=lambda v: "-" if v is None else f"{v:.1f}"),
            Column("fused_into", "Fused into"),
        ]

    def on_mount(self) -> None:
        if self.record_id is not None and not self._unset and not self._coming:
            self._load()

    def focus_default(self) -> None:
        self.action_tab(self.query_one(ViewTabs).active or "summary")

    def set_record(self, record_id: str, *, refresh: bool = False, loaded: Optional[PerfProfileLoaded] = None) -> None:
        """Show another measured profile (or, with ``refresh``, read this one again: a rerun replaced its numbers).
        ``loaded``: its data, already read (:meth:`read`, with the section's list). The view stays mounted: its
        tab, level and Summary Type are kept."""
        if record_id == self.record_id and not refresh and self.record_id_shown_or_coming():
            return
        self.record_id = record_id
        self._unset = False
        if loaded is not None and loaded.record_id == record_id and not refresh:
            self._coming = not self.is_mounted
            self.when_mounted(lambda: self._loaded(loaded))
        elif self.is_mounted:
            if self.profile is None or self.profile_id != record_id:
                self.profile = None
                self.query_one("#perf-summary", Static).update("Loading the profile…")
            self._load()

    def record_id_shown_or_coming(self) -> bool:
        """A profile is shown, or being read (the view is not waiting for one)."""
        return self.record_id is not None and not self._unset

    @staticmethod
    def read(ws, project_id: str, record_id: str) -> PerfProfileLoaded:
        """Read a measured profile (in a thread): what the view shows. The model analysis' nodes a row's record adds
        are read when a record is first asked for (:meth:`RecordView.with_analysis_nodes`)."""
        from sparsify_tui.services.profiles import load_perf_profile

        return PerfProfileLoaded(record_id, load_perf_profile(ws, project_id, record_id))

    @property
    def profile_id(self) -> Optional[str]:
        """The record id of the profile shown (None while the first one loads)."""
        return self._shown_id

    @app_work(group="perf-profile", description="read perf profile")
    def _load(self) -> None:
        post_result(self, self.read(self.app.workspace, self.project_id, self.record_id))

    @on(PerfProfileLoaded)
    def _loaded(self, message: PerfProfileLoaded) -> None:
        if message.record_id == self.record_id:
            self.analysis_nodes = None  # read again for the next record asked for
            self._shown_id = message.record_id
            self.show_profile(message.profile)

    @on(messages.WorkFailed)
    def _load_failed(self) -> None:
        self.query_one("#perf-summary", Static).update("Could not read this profile.")

    # -- rendering -------------------------------------------------------------------------------
    def show_profile(self, profile) -> None:
        self.profile = profile
        for tab in TABS:
            self._render_tab(tab)

    def _built(self, tab: str) -> bool:
        """Whether pane ``tab`` is built (a lazy pane is built when first opened, then :meth:`_render_tab` fills it)."""
        return self.query_one(ViewTabs).built(tab)

    def _render_tab(self, tab: str) -> None:
        """Fill pane ``tab`` from the profile shown (nothing for a pane not built yet: built, it is filled then)."""
        if self.profile is None or not self._built(tab):
            return
        if tab == "summary":
            self._render_summary()
            self._render_op_chart()
        elif tab == "layers":
            self._render_table()
        elif tab == "top":
            self._render_top()

    def _has_int8(self) -> bool:
        return bool(self.profile and self.profile.int8.ok)

    def _render_summary(self) -> None:
        self.query_one("#perf-summary", Static).update(model_summary_text(self.profile, self.level))

    def _render_op_chart(self) -> None:
        types = dict(summary_types(self._has_int8()))
        label = types.get(self.summary_type, "Baseline ms")
        totals = self.profile.op_type_totals(self.summary_type)
        # op types with no time of their own (fused into a neighbour, or no Q/DQ in an FP32 model) are no bars
        items = sorted(((k, v) for k, v in totals.items() if v > 0), key=lambda kv: -kv[1])
        idle = sorted(k for k, v in totals.items() if not v > 0)
        note = f"; no time of their own: {', '.join(idle)}" if idle else ""
        self.query_one("#summary-type", Static).update(f"Summary type: {label}  (y: change){note}")
        self.query_one("#op-chart", BarChart).set_data(
            [op_label(k) for k, _ in items], [v for _, v in items], keys=[k for k, _ in items],
            title=f"Layer Summaries: {label} per op type")

    def _render_table(self) -> None:
        self.query_one("#level-line", Static).update(
            f"Est. ms: pruned {self.level} (est.) · \\[ ]: level · enter/i: record")
        self.query_one("#layer-table", FilterableTable).set_rows(node_rows(self.profile, self.level))

    def _render_top(self) -> None:
        prof = self.profile
        nodes = sorted((n for n in prof.nodes if n.time_ms > 0), key=lambda n: -n.time_ms)
        if self.top_n:
            nodes = nodes[: self.top_n]
        title = (f"Top {self.top_n} nodes by ms" if self.top_n else "All nodes by ms")
        self.query_one("#top-chart", BarChart).set_data(
            [n.id for n in nodes], [prof.node_ms(n) for n in nodes], keys=[n.index for n in nodes],
            title=title + " [dim](+/-: top N · click: record)[/dim]", total=prof.latency_ms.median)

    # -- actions -----------------------------------------------------------------------------------
    def action_cycle_summary_type(self) -> None:
        if self.profile is None:
            return
        keys_ = [k for k, _ in summary_types(self._has_int8())]
        i = keys_.index(self.summary_type) if self.summary_type in keys_ else -1
        self.summary_type = keys_[(i + 1) % len(keys_)]
        self._render_tab("summary")

    def action_level(self, step: int) -> None:
        if self.profile is None:
            return
        i = LEVELS.index(self.level) if self.level in LEVELS else 0
        self.level = LEVELS[max(0, min(len(LEVELS) - 1, i + step))]
        self._render_tab("summary")
        self._render_tab("layers")

    def action_top_n(self, step: int) -> None:
        if self.profile is None:
            return
        i = TOP_N_CHOICES.index(self.top_n) if self.top_n in TOP_N_CHOICES else 0
        self.top_n = TOP_N_CHOICES[max(0, min(len(TOP_N_CHOICES) - 1, i + step))]
        self._render_tab("top")

    def current_tab(self) -> str:
        return self.query_one(ViewTabs).active or "summary"

    def action_tab(self, tab: str) -> None:
        tabs = self.query_one(ViewTabs)
        tabs.active = tab
        target = {"summary": "#op-chart", "layers": "#layer-table", "top": "#top-chart"}[tab]
        tabs.after_build(tab, lambda: self.query_one(target).focus(scroll_visible=False))

    def action_inspect(self) -> None:
        """`i`: the record of the Layer Results row under the cursor."""
        if self.profile is None:
            return
        if self.current_tab() != "layers":
            self.action_tab("layers")
            self.notify("Pick a row, then i (or enter) shows its record; a click on a bar does too.", timeout=3)
            return
        row = self.query_one("#layer-table", FilterableTable).current_row()
        if row is not None:
            self.show_record(row["index"])

    def show_record(self, index: int) -> None:
        node = next((n for n in self.profile.nodes if n.index == index), None) if self.profile else None
        if node is not None:
            profile = self.profile
            self.with_analysis_nodes(self.project_id, lambda nodes: self.app.show_dialog(RecordDialog(
                f"{node.id} · {node.op_type}", node_record(profile, node, nodes.get(node.id)))))

    @on(FilterableTable.RowChosen, "#layer-table")
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.show_record(event.row["index"])

    @on(BarChart.Inspect, "#top-chart")
    def _bar_chosen(self, event: BarChart.Inspect) -> None:
        event.stop()
        self.show_record(event.key)
