"""Loss Profiles section: the list of profiles ("Approximated", always there, plus measured ones), the
loss-profile jobs running or queued under it, and the selected profile's page (the newest measured one
when the section opens).

Profile page tabs: Summary (`m`: Model Summary with the method, its settings, the metric and any warning,
e.g. near-flat outputs), Sensitivity (`g`: bar chart per layer at a chosen sparsity, `[`/`]` change it, `y`
toggles pruning ↔ INT8 sensitivity), Params (bar chart of params per layer), Table (`l`: every number: one row
per layer, one column per level; `enter`/`i` shows a layer's full record). `n` adds a profile (a background
``loss_profile`` job with progress; `c` cancels it), `r` measures the selected one again (asks first; its
numbers are replaced), `d` deletes it. Keys: :mod:`sparsify_tui.tui.widgets.keys`.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static, TabPane
from textual.widgets.option_list import Option

from sparsify_tui.text import markup_lines
from sparsify_tui.text.loss import summary_facts
from sparsify_tui.tui import messages
from sparsify_tui.tui.loss.dialogs import LossProfileDialog
from sparsify_tui.tui.loss.messages import LossProfileLoaded
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import RecordDialog, analysis_fields, fresh_name
from sparsify_tui.tui.widgets.labels import fit_name
from sparsify_tui.tui.widgets.records import RecordListSection, RecordView, ViewKeys
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.workers import app_work, post_result

APPROX_ID = "approximated"
TABLE = "loss_profiles"
JOB_TYPE = "loss_profile"


# ----------------------------------------------------------------------------------------- pure helpers


def fmt_num(v: Any) -> str:
    """Sensitivity values: 4 significant digits, '' for None."""
    if v is None or v == "":
        return ""
    return f"{float(v):.4g}"


def summary_text(prof) -> str:
    """Model Summary (Rich markup) of a LossProfile (:mod:`sparsify_tui.text.loss`) and its warnings."""
    lines = markup_lines(summary_facts(prof))
    for warning in prof.warnings or []:
        lines.append(f"[b reverse] ! [/] [b]{escape(str(warning))}[/b] [dim](n: a new profile, metric nmse)[/dim]")
    return "\n".join(lines)


def table_columns(prof) -> list[Column]:
    # the values first: at 80 columns they show next to the layer, the rest pages in with →
    cols = [
        Column("index", "#", numeric=True, pin=True),
        Column("id", "Layer", filter=True, pin=True),
    ]
    for lv in prof.levels:
        cols.append(Column(f"s{lv:g}", f"@{lv:g}", numeric=True, fmt=fmt_num))
    cols += [
        Column("int8", "INT8", numeric=True, fmt=fmt_num),
        Column("params", "Params", numeric=True, fmt=format_count),
        Column("prunable", "Prunable", numeric=True, fmt=format_count),
        Column("sparsity", "Sparsity", numeric=True, fmt=format_percent),
        Column("op_type", "Op", filter=True),
        Column("weight_name", "Weight", filter=True),
    ]
    return cols


def table_rows(prof) -> list[dict]:
    from sparsify_tui.profiling.loss import level_key

    rows = []
    for i, layer in enumerate(prof.layers):
        row = {"_key": i, "index": i, "id": layer.id, "op_type": layer.op_type, "params": layer.params,
               "prunable": layer.prunable_params, "sparsity": layer.sparsity, "int8": layer.int8_sensitivity,
               "weight_name": layer.weight_name}
        for lv in prof.levels:
            row[f"s{lv:g}"] = layer.sensitivity.get(level_key(lv))
        rows.append(row)
    return rows


def chart_levels(prof) -> list[float]:
    """Levels offered by `[`/`]` (all but 0)."""
    return [float(x) for x in prof.levels if float(x) > 0] or [0.95]


def default_level(prof) -> float:
    levels = chart_levels(prof)
    return min(levels, key=lambda x: abs(x - 0.9))


# ------------------------------------------------------------------------------------------ profile page

TABS = ("summary", "sens", "params", "table")


def layer_record(prof, layer, analysis_node: Optional[dict]) -> list:
    """Every field of one layer of a loss profile (with the analysis' weight and shapes) for RecordDialog."""
    from sparsify_tui.profiling.loss import level_key

    fields = analysis_fields(analysis_node) or [("Node id", layer.id), ("Op type", layer.op_type)]
    fields += [
        ("Weight", layer.weight_name), ("Prunable params", layer.prunable_params),
        ("Current sparsity", f"{layer.sparsity * 100:.2f}%"),
        ("First layer", layer.first), ("Depthwise/grouped", layer.depthwise),
        ("Metric", prof.metric_description),
        ("INT8 sensitivity", layer.int8_sensitivity),
    ]
    fields += [(f"Sensitivity @{lv:g}", layer.sensitivity.get(level_key(lv))) for lv in prof.levels]
    return fields


class LossProfileView(RecordView):
    """One loss profile: Summary, Sensitivity chart, Params chart, Table."""

    DEFAULT_CSS = """
    LossProfileView { height: 1fr; }
    LossProfileView #sens-hint { color: $text-muted; height: auto; padding: 0 1; }
    """

    def __init__(self, project_id: str, ref: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.ref = ref
        self.profile = None
        self.level: float = 0.9
        self.show_int8 = False

    def compose(self) -> ComposeResult:
        # the Sensitivity, Params and Table panes are built when first opened (ViewTabs lazy): _render_tab fills them
        with ViewTabs(initial="summary", id="loss-tabs", lazy=True, on_build=self._render_tab):
            with TabPane("Summary (m)", id="summary"):
                with VerticalScroll(id="summary-scroll"):
                    yield Static("Loading the loss profile…", id="loss-summary")
            with TabPane("Sensitivity (g)", id="sens"):
                with Vertical():  # the chart scrolls itself: no second tab stop around it
                    yield Static("", id="sens-hint")
                    yield BarChart(title="Layer Sensitivities", id="sens-chart", modes=("values", "log"))
            with TabPane("Params", id="params"):
                with Vertical():
                    yield BarChart(title="Layer Params Counts", unit="params", id="params-chart")
            with TabPane("Table (l)", id="table"):
                yield FilterableTable([Column("id", "Layer", filter=True)], id="loss-table")

    def on_mount(self) -> None:
        self._load(self.ref)

    def set_ref(self, ref: str) -> None:
        """Show another profile (the widget is reused: no remove/mount while charts are mounting)."""
        self.ref = ref
        self.profile = None
        self._load(ref)

    @app_work(group="loss-view", description="read loss profile")
    def _load(self, ref: str) -> None:
        from sparsify_tui.services.profiles import load_loss_profile

        # the analysis' nodes a layer's record adds are read when a record is first asked for (with_analysis_nodes)
        post_result(self, LossProfileLoaded(ref, load_loss_profile(self.app.workspace, self.project_id, ref)))

    @on(LossProfileLoaded)
    def _loaded(self, message: LossProfileLoaded) -> None:
        if message.ref == self.ref:
            self.analysis_nodes = None  # read again for the next record asked for
            self.show_profile(message.profile)

    @on(messages.WorkFailed)
    def _load_failed(self) -> None:
        self.query_one("#loss-summary", Static).update("Could not read this loss profile.")

    def show_profile(self, prof) -> None:
        self.profile = prof
        self.level = default_level(prof)
        self.show_int8 = False
        for tab in TABS:
            self._render_tab(tab)

    def _render_tab(self, tab: str) -> None:
        """Fill pane ``tab`` from the profile shown (nothing for a pane not built yet: it is filled when built)."""
        prof = self.profile
        if prof is None or not self.query_one("#loss-tabs", ViewTabs).built(tab):
            return
        if tab == "summary":
            self.query_one("#loss-summary", Static).update(summary_text(prof))
        elif tab == "sens":
            self._show_sens()
        elif tab == "params":
            self.query_one("#params-chart", BarChart).set_data(
                [x.id for x in prof.layers], [x.params for x in prof.layers], keys=list(range(len(prof.layers))),
                title=f"Layer Params Counts ({format_count(prof.total_params)} total)", total=prof.total_params)
        elif tab == "table":
            table = self.query_one("#loss-table", FilterableTable)
            table.set_columns(table_columns(prof))
            table.set_rows(table_rows(prof))

    def _show_sens(self) -> None:
        prof = self.profile
        if prof is None or not self.query_one("#loss-tabs", ViewTabs).built("sens"):
            return
        chart = self.query_one("#sens-chart", BarChart)
        hint = self.query_one("#sens-hint", Static)
        labels = [x.id for x in prof.layers]
        positions = list(range(len(prof.layers)))
        flat = " [b]outputs nearly constant: these values mean nothing (see Summary)[/b]" if prof.outputs_flat else ""
        if self.show_int8:
            vals = [x.int8_sensitivity for x in prof.layers]
            if all(v is None for v in vals):
                hint.update("No INT8 sensitivity in this profile (add one with INT8 on).  [dim]y: pruning[/dim]")
                chart.set_data([], [], title="Layer INT8 Sensitivities")
                return
            if prof.method == "magnitude":
                what = "weight INT8 noise Σ(w−q)²/Σw²"
            else:
                what = f"only this layer in INT8 (weight + input) · {prof.metric_description}"
            hint.update(f"{what}{flat}  [dim]y: pruning · click: record[/dim]")
            chart.set_data(labels, [v or 0.0 for v in vals], keys=positions, title="Layer INT8 Sensitivities",
                           unit="", x_label="INT8 sensitivity")
        else:
            hint.update(f"Metric: {prof.metric_description}{flat}  [dim]\\[ ]: sparsity · y: INT8 · "
                        "click: record[/dim]")
            chart.set_data(labels, [x.value_at(self.level) for x in prof.layers], keys=positions,
                           title=f"Layer Sensitivities at sparsity {self.level:g}", unit="",
                           x_label=f"sensitivity @{self.level:g}")

    def action_level(self, step: int) -> None:
        if self.profile is None:
            return
        levels = chart_levels(self.profile)
        i = min(range(len(levels)), key=lambda k: abs(levels[k] - self.level))
        self.level = levels[max(0, min(len(levels) - 1, i + step))]
        self.show_int8 = False
        self.action_tab("sens")
        self._show_sens()

    def action_toggle_int8(self) -> None:
        self.show_int8 = not self.show_int8
        self.action_tab("sens")
        self._show_sens()

    def current_tab(self) -> str:
        return self.query_one("#loss-tabs", ViewTabs).active or "summary"

    def focus_default(self) -> None:
        self.action_tab(self.current_tab())

    def action_tab(self, tab: str) -> None:
        tabs = self.query_one("#loss-tabs", ViewTabs)
        tabs.active = tab
        target = {"summary": "#summary-scroll", "sens": "#sens-chart", "params": "#params-chart",
                  "table": "#loss-table"}[tab]
        tabs.after_build(tab, lambda: self.query_one(target).focus(scroll_visible=False))

    def action_inspect(self) -> None:
        if self.profile is None:
            return
        if self.current_tab() != "table":
            self.action_tab("table")
            self.notify("Pick a row, then i (or enter) shows its record; a click on a bar does too.", timeout=3)
            return
        row = self.query_one("#loss-table", FilterableTable).current_row()
        if row is not None:
            self.show_record(row["index"])

    def show_record(self, position: int) -> None:
        prof = self.profile
        if prof is not None and 0 <= position < len(prof.layers):
            layer = prof.layers[position]
            self.with_analysis_nodes(self.project_id, lambda nodes: self.app.show_dialog(RecordDialog(
                f"{layer.id} · {layer.op_type}", layer_record(prof, layer, nodes.get(layer.id)))))

    @on(FilterableTable.RowChosen, "#loss-table")
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.show_record(event.row["index"])

    @on(BarChart.Inspect)
    def _bar_chosen(self, event: BarChart.Inspect) -> None:
        event.stop()
        self.show_record(event.key)


# ------------------------------------------------------------------------------------------ the section


class LossSection(ViewKeys, RecordListSection):
    """Loss Profiles of one project: profile list (+ running jobs) on the left, the selected profile right (the
    list's life cycle: :class:`~sparsify_tui.tui.widgets.records.RecordListSection`)."""

    TABLE = TABLE
    SECTION = "loss"
    KIND = "loss profile"
    JOB_TYPES = (JOB_TYPE,)
    RERUN_JOB = JOB_TYPE
    LIST_ID = "loss-list"
    JOBS_ID = "loss-jobs"
    FIXED = (APPROX_ID, "Approximated")
    LIST_WIDTH = 22  # the list pane is 24 wide
    VIEW_TABS = TABS

    DEFAULT_CSS = """
    LossSection { height: 1fr; }
    LossSection #loss-pane { width: 24; height: 1fr; border-right: solid $primary-darken-2; }
    LossSection #loss-pane .pane-title { text-style: bold; padding: 0 1; }
    LossSection #loss-list { height: 1fr; }
    LossSection #loss-view { width: 1fr; height: 1fr; }
    """

    BINDINGS = [
        *keys.profile_list("loss", new_what="loss profile (background job)", record="loss profile",
                           records="loss profiles",
                           views=(("summary", "Summary", "Profile page: Model Summary"),
                                  ("table", "Table", "Profile page: table of every number"),
                                  ("sens", "Sensitivity", "Profile page: Layer Sensitivities chart")),
                           level_what="sparsity level of the Sensitivity chart"),
        Binding("y", "toggle_int8", "Pruning/INT8", show=False, id="loss.int8",
                tooltip="Sensitivity chart: pruning ↔ INT8 sensitivity"),
    ]

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="loss-pane", classes="list-pane"):
                yield Static("Loss profiles", classes="pane-title")
                yield from self.compose_list()
            yield Vertical(LossProfileView(self.project_id, APPROX_ID), id="loss-view")

    def current_view(self) -> Optional[LossProfileView]:
        views = self.query(LossProfileView)
        return views.first() if views else None

    def action_level(self, step: int) -> None:
        self._forward("level", step)

    def action_toggle_int8(self) -> None:
        self._forward("toggle_int8")

    def action_inspect(self) -> None:
        self._forward("inspect")

    # -- list ------------------------------------------------------------------------------------
    def record_option(self, record: dict) -> Option:
        from sparsify_tui.formatting import safe_line

        method = f" ({record.get('method', '?')})"
        return Option(fit_name(safe_line(record.get("name") or record["id"]), self.LIST_WIDTH - len(method)) + method,
                      id=str(record["id"]))

    def record_signature(self, record: dict) -> tuple:
        return super().record_signature(record) + (record.get("method"),)

    def select_profile(self, ref: str, force: bool = False) -> None:
        """Show the Approximated profile (``"approximated"``) or a stored one (record id)."""
        self.select(ref, refresh=force)

    def show_selected(self, selected: Optional[str], *, refresh: bool = False, focus: bool = False) -> None:
        view = self.current_view()
        if view is None:
            return
        if selected is not None and (selected != view.ref or refresh):
            view.set_ref(selected)
        if focus:
            view.when_mounted(view.focus_default)

    # -- new / rerun -----------------------------------------------------------------------------
    def action_new(self) -> None:
        def done(args: Optional[dict]) -> None:
            if args:
                self.submit_job(JOB_TYPE, args)

        name = fresh_name("baseline", (r.get("name") for r in self.records))
        self.app.push_screen(LossProfileDialog({"name": name}), done)

    def rerun_question(self, record: dict) -> str:
        name = record.get("name") or record["id"]
        return (f"Measure loss profile {name!r} again ({record.get('method')}, same settings)? Its numbers are "
                "replaced when it finishes.")

    def rerun_args(self, ws, record: dict) -> dict:
        s = record.get("settings") or {}
        return {"name": record.get("name"), "method": record.get("method"), "levels": s.get("levels"),
                "data": s.get("data"), "batches": s.get("batches", 2), "int8": bool(s.get("int8")),
                "metric": None if s.get("metric") in (None, "auto") else s.get("metric"),
                "record_id": str(record["id"])}
