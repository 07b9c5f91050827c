"""View of one measured performance profile.

`PerfProfileView(project_id, record_id)` is mounted by `sparsify_tui.tui.perf.section.PerfSection` when a
measured profile is selected. Tabs (keys m / l / g from the section):

* **Summary**: Model Summary (batch, cores, instruction sets; measured ms/batch and items/s; *estimated*
  pruned ms/batch and speedup at the chosen level; measured INT8 ms/batch and speedup) and Layer
  Summaries: a bar chart of time per op type. `y` cycles the Summary Type (Baseline ms, Pruned s ms
  (est.) for each level, INT8 ms (measured)); `v` (chart) cycles values / % / log; `t` shows the table.
* **Layer Results**: every node in graph order (index, node id, op type, weight, baseline ms, % of total,
  FLOPs, GFLOP/s, est. pruned ms at the chosen level, INT8 ms), sortable (`s`) and filterable (`/`);
  `k` changes the pruned level.
* **Top Layers**: chart of the top N nodes by baseline ms (`n`: 10, 20, 50, all).

Pruned times are estimates for a sparse-kernel runtime: onnxruntime gains nothing from unstructured
sparsity, and the view says so. The add / rerun / delete actions are PerfSection's; the add dialog is
`perf.dialogs.PerfProfileDialog`.
"""

from __future__ import annotations

from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane

from sparsify_tui.tui import messages
from sparsify_tui.tui.perf.messages import PerfProfileLoaded
from sparsify_tui.tui.widgets.tabs import place_tab_underlines
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent
from sparsify_tui.tui.workers import app_work, post_result

LEVELS = ("0.4", "0.6", "0.7", "0.8", "0.85", "0.9", "0.95", "0.975", "0.99")
DEFAULT_LEVEL = "0.9"
TOP_N_CHOICES = (10, 20, 50, 0)  # 0 = all
TABLE = "perf_profiles"


def summary_types(has_int8: bool) -> list[tuple[str, str]]:
    """(key, label) of the Summary Type choices: baseline, each pruned level (est.), INT8 (measured)."""
    out = [("baseline", "Baseline ms")]
    out += [(lv, f"Pruned {lv} ms (est.)") for lv in LEVELS]
    if has_int8:
        out.append(("int8", "INT8 ms (measured)"))
    return out


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3f}"


def node_rows(profile, level: str) -> list[dict]:
    """Table rows (graph order, special rows last) for the Layer Results table."""
    rows = []
    for n in profile.nodes:
        rows.append({
            "_key": n.index, "index": n.index, "id": n.id, "op_type": n.op_type, "weight_name": n.weight_name or "",
            "time_ms": n.time_ms, "share": n.share, "flops": n.flops, "gflops": n.gflops_per_s,
            "est_ms": n.est_pruned_ms.get(level, n.time_ms), "int8_ms": n.int8_time_ms,
            "fused_into": n.fused_into or "",
        })
    return rows


def model_summary_text(profile, level: str) -> str:
    """The Model Summary block (Rich markup)."""
    p = profile
    lat = p.latency_ms or {}
    isets = ", ".join(p.instruction_sets) or "unknown"
    lines = [
        f"[b]{p.name}[/b] · batch {p.batch_size} · {p.core_count} cores · onnxruntime {p.ort_version or '?'}",
        f"Instruction sets: {isets}",
        f"[b]Measured[/b] {_ms(lat.get('median'))} ms/batch (p90 {_ms(lat.get('p90'))}) · "
        f"{p.items_per_second:.1f} items/s",
    ]
    est_ms = p.estimated_ms(level)
    lv = (p.pruned_estimate.get("levels") or {}).get(level) or {}
    if est_ms is not None:
        lines.append(f"[b]Est. pruned {level}[/b] {est_ms:.3f} ms/batch · {lv.get('speedup') or 1:.2f}× (est., "
                     f"sparse-kernel runtime)")
    i8 = p.int8 or {}
    if i8.get("error"):
        lines.append(f"[b]INT8[/b] failed: {i8['error']}")
    elif i8.get("enabled"):
        lines.append(f"[b]INT8 measured[/b] {_ms((i8.get('latency_ms') or {}).get('median'))} ms/batch · "
                     f"{(i8.get('speedup') or 0):.2f}×")
    else:
        lines.append("[b]INT8[/b] not measured")
    lines.append("[dim]onnxruntime gets no speedup from unstructured sparsity (1.0×): pruned times are "
                 "estimates for a sparse-kernel runtime, calibrated on measured DeepSparse speedups.[/dim]")
    return "\n".join(lines)


class PerfProfileView(Widget):
    """One measured perf profile: Summary, Layer Results and Top Layers tabs."""

    DEFAULT_CSS = """
    PerfProfileView { height: 1fr; }
    PerfProfileView #perf-summary { height: auto; padding: 0 1; }
    PerfProfileView .perf-line { height: 1; padding: 0 1; color: $text-muted; }
    PerfProfileView FilterableTable { height: 1fr; }
    """

    BINDINGS = [
        Binding("y", "cycle_summary_type", "Summary type", id="perfprofile.summary_type",
                tooltip="Layer Summaries: baseline ms, pruned ms (est.) at each level, INT8 ms (measured)"),
        Binding("k", "cycle_level", "Pruned level", id="perfprofile.level",
                tooltip="Sparsity level of the estimated pruned times (0.4 … 0.99)"),
        Binding("n", "cycle_top_n", "Top N", show=False, id="perfprofile.top_n",
                tooltip="Top layers: 10, 20, 50 or all"),
    ]

    def __init__(self, project_id: str, record_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.record_id = record_id
        self.profile = None
        self.level = DEFAULT_LEVEL
        self.summary_type = "baseline"
        self.top_n = 20

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="summary"):
            with TabPane("Summary", id="summary"):
                with VerticalScroll():
                    yield Static("Loading the profile…", id="perf-summary")
                    yield Static("", id="summary-type", classes="perf-line")
                    yield BarChart(title="Layer Summaries", unit="ms", id="op-chart")
            with TabPane("Layer Results", id="layers"):
                yield Static("", id="level-line", classes="perf-line")
                yield FilterableTable(self._columns(), id="layer-table")
            with TabPane("Top Layers", id="top"):
                with VerticalScroll():
                    yield BarChart(title="Top layers by baseline ms", unit="ms", id="top-chart")

    def _columns(self) -> list[Column]:
        return [
            Column("index", "#", numeric=True),
            Column("id", "Node id", filter=True),
            Column("op_type", "Op type", filter=True),
            Column("weight_name", "Weight", filter=True),
            Column("time_ms", "ms", numeric=True, fmt=_ms),
            Column("share", "%", numeric=True, fmt=format_percent),
            Column("flops", "FLOPs", numeric=True, fmt=format_count),
            Column("gflops", "GFLOP/s", numeric=True, fmt=lambda v: "-" if v is None else f"{v:.1f}"),
            Column("est_ms", "Est. ms", numeric=True, fmt=_ms),
            Column("int8_ms", "INT8 ms", numeric=True, fmt=_ms),
            Column("fused_into", "Fused into", filter=True),
        ]

    def on_mount(self) -> None:
        self._load()

    def focus_default(self) -> None:
        self.query_one(TabbedContent).query_one("Tabs").focus()

    @app_work(group="perf-profile", description="read perf profile")
    def _load(self) -> None:
        from sparsify_tui.services.profiles import load_perf_profile

        profile = load_perf_profile(self.app.workspace, self.project_id, self.record_id)
        post_result(self, PerfProfileLoaded(self.record_id, profile))

    @on(PerfProfileLoaded)
    def _loaded(self, message: PerfProfileLoaded) -> None:
        if message.record_id == self.record_id:
            self.show_profile(message.profile)

    @on(messages.WorkFailed)
    def _load_failed(self) -> None:
        self.query_one("#perf-summary", Static).update("Could not read this profile.")

    # -- rendering -------------------------------------------------------------------------------
    def show_profile(self, profile) -> None:
        self.profile = profile
        place_tab_underlines(self)
        self._render_summary()
        self._render_op_chart()
        self._render_table()
        self._render_top()

    def _has_int8(self) -> bool:
        i8 = (self.profile.int8 or {}) if self.profile else {}
        return bool(i8.get("enabled") and not i8.get("error"))

    def _render_summary(self) -> None:
        self.query_one("#perf-summary", Static).update(model_summary_text(self.profile, self.level))

    def _render_op_chart(self) -> None:
        types = dict(summary_types(self._has_int8()))
        label = types.get(self.summary_type, "Baseline ms")
        totals = self.profile.op_type_totals(self.summary_type)
        items = sorted(totals.items(), key=lambda kv: -kv[1])
        self.query_one("#summary-type", Static).update(f"Summary type: {label}  (y: change)")
        self.query_one("#op-chart", BarChart).set_data(
            [k for k, _ in items], [v for _, v in items], title=f"Layer Summaries: {label} per op type")

    def _render_table(self) -> None:
        self.query_one("#level-line", Static).update(
            f"Est. ms: pruned to {self.level} (est.; onnxruntime: no gain) · k: level")
        self.query_one("#layer-table", FilterableTable).set_rows(node_rows(self.profile, self.level))

    def _render_top(self) -> None:
        nodes = sorted((n for n in self.profile.nodes if n.time_ms > 0), key=lambda n: -n.time_ms)
        if self.top_n:
            nodes = nodes[: self.top_n]
        title = (f"Top {self.top_n} nodes by baseline ms" if self.top_n else "All nodes by baseline ms")
        self.query_one("#top-chart", BarChart).set_data(
            [n.id for n in nodes], [n.time_ms for n in nodes], title=title + " [dim](n: top N)[/dim]",
            total=self.profile.total_node_ms or None)

    # -- actions -----------------------------------------------------------------------------------
    def action_cycle_summary_type(self) -> None:
        if self.profile is None:
            return
        keys = [k for k, _ in summary_types(self._has_int8())]
        i = keys.index(self.summary_type) if self.summary_type in keys else -1
        self.summary_type = keys[(i + 1) % len(keys)]
        self._render_op_chart()

    def action_cycle_level(self) -> None:
        if self.profile is None:
            return
        i = LEVELS.index(self.level) if self.level in LEVELS else -1
        self.level = LEVELS[(i + 1) % len(LEVELS)]
        self._render_summary()
        self._render_table()

    def action_cycle_top_n(self) -> None:
        if self.profile is None:
            return
        i = TOP_N_CHOICES.index(self.top_n) if self.top_n in TOP_N_CHOICES else 0
        self.top_n = TOP_N_CHOICES[(i + 1) % len(TOP_N_CHOICES)]
        self._render_top()

    def action_tab(self, tab: str) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = tab
        target = {"summary": "#op-chart", "layers": "#layer-table", "top": "#top-chart"}[tab]
        widget = self.query_one(target)
        if isinstance(widget, FilterableTable):
            widget.focus()
        else:
            widget.query_one("VerticalScroll").focus()
