"""Performance Profiles section: a list of profiles (FLOPS, always there, plus the measured ones), the
perf-profile jobs running or queued under it, and the selected profile's view.

The FLOPS profile view is computed from the graph (no run): Model Summary, Layer Summaries (FLOPs per op
type) and Layer Results (every node in graph order, sortable, `/`-filterable) with a chart of the top
layers. A measured profile is shown by `perf.profile.PerfProfileView(project_id, record_id)`; the section
opens on the newest one. `n` adds one (`perf.dialogs.PerfProfileDialog`), `r` measures the selected one
again (after a confirmation), `d` deletes it, `c` cancels a running profile (keys: :mod:`sparsify_tui.tui.widgets.keys`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import ContentSwitcher, Static
from textual.widgets.option_list import Option

from sparsify_tui.formatting import plural
from sparsify_tui.tui import messages
from sparsify_tui.tui.fleet import FleetDialog
from sparsify_tui.tui.perf import compare_screen as compare
from sparsify_tui.tui.perf.dialogs import PerfProfileDialog, profile_defaults, rerun_args
from sparsify_tui.tui.perf.messages import FlopsAnalysisLoaded, PerfDialogReady
from sparsify_tui.tui.perf.profile import TABLE, TABS, PerfProfileView
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog, RecordDialog, analysis_fields, fresh_name
from sparsify_tui.tui.widgets.labels import fit_name
from sparsify_tui.tui.widgets.records import RecordListSection, RecordView, ViewKeys, newest
from sparsify_tui.tui.widgets.tables import (Column, FilterableTable, format_count, format_percent,
                                             format_shape)
from sparsify_tui.tui.workers import app_work, post_result

FLOPS_ID = "flops"
TOP_N_CHOICES = (10, 20, 50, 0)  # 0 = all


def node_rows(analysis: dict) -> list[dict]:
    """Layer Results rows from an `analyze --json` dict: one per node in graph order."""
    nodes = analysis.get("nodes") or []
    total = float((analysis.get("totals") or {}).get("flops") or 0) or float(sum(n.get("flops") or 0 for n in nodes))
    rows = []
    for i, n in enumerate(nodes):
        flops = n.get("flops") or 0
        rows.append({
            "_key": i,
            "index": n.get("index", i),
            "id": n.get("id", ""),
            "op_type": n.get("op_type", ""),
            "weight_name": n.get("weight_name") or "",
            "output_shape": n.get("output_shapes"),
            "params": n.get("params") or 0,
            "macs": n.get("macs") or 0,
            "flops": flops,
            "share": (flops / total) if total else 0.0,
        })
    return rows


def record_label(record: dict, width: int = 0) -> str:
    """The profile list label of a measured profile record: ``"b1 (b1, 2c)"`` (name, batch, cores; ``cal`` when a
    channel calibration is stored with it), in at most ``width`` cells (a long name is elided in the middle; the
    rest always shows)."""
    from sparsify_tui.services.profiles import is_calibrated

    from sparsify_tui.formatting import safe_line

    label = safe_line(record.get("name") or record.get("id"))
    extra = []
    if record.get("batch_size"):
        extra.append(f"b{record['batch_size']}")
    if record.get("core_count"):
        extra.append(f"{record['core_count']}c")
    if is_calibrated(record):
        extra.append("cal")
    suffix = f" ({', '.join(extra)})" if extra else ""
    return fit_name(label, width - len(suffix) if width else 0) + suffix


def op_type_flops(analysis: dict) -> list[tuple[str, float]]:
    """(op type, total FLOPs) sorted by FLOPs descending, op types with 0 FLOPs left out."""
    sums: dict[str, float] = defaultdict(float)
    for n in analysis.get("nodes") or []:
        sums[n.get("op_type", "?")] += float(n.get("flops") or 0)
    return sorted(((k, v) for k, v in sums.items() if v > 0), key=lambda kv: -kv[1])


def model_summary_text(analysis: dict, project: Optional[dict] = None) -> str:
    """Model Summary lines of the FLOPS profile (Rich markup)."""
    totals = analysis.get("totals") or {}
    model = analysis.get("model") or {}
    nodes = analysis.get("nodes") or []
    setup = (project or {}).get("setup") or {}
    batch = model.get("batch_size", analysis.get("batch_size", setup.get("batch_size", 1)))
    dims = model.get("dims", analysis.get("dims", setup.get("dims"))) or {}
    dims_text = ", ".join(f"{k}={v}" for k, v in dims.items())
    prunable = sum(1 for n in nodes if n.get("prunable"))
    return "\n".join([
        "[b]Model Summary[/b] · FLOPS profile, counted from the graph",
        f"  FLOPs       [b]{format_count(totals.get('flops'))}[/b]",
        f"  MACs        [b]{format_count(totals.get('macs'))}[/b]",
        f"  Params      [b]{format_count(totals.get('params'))}[/b] (prunable {format_count(totals.get('prunable_params'))})",
        f"  Batch size  [b]{batch}[/b] (used for shapes)",
        *([f"  Dims        {dims_text}"] if dims_text else []),
        f"  Nodes       {len(nodes)} ({prunable} prunable layers)",
        "  [dim]FLOPs = 2×MACs (Conv/Gemm/MatMul); 1 per output element (elementwise)[/dim]",
    ])


class TabBar(Static):
    """One-line tab labels of the FLOPS view; a click calls `FlopsProfileView.action_tab`."""

    def action_tab(self, tab: str) -> None:
        self.query_ancestor(FlopsProfileView).action_tab(tab)


class FlopsProfileView(RecordView):
    """The FLOPS profile: Model Summary + Layer Summaries, Layer Results, Top Layers (tabs)."""

    BINDINGS = keys.top_n("flops", "top_n", "Top Layers: more nodes (10, 20, 50, all)", "Top Layers: fewer nodes")

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.analysis: dict = {}
        self.top_n = 20

    TABS = (("summary", "Summary", "m"), ("layers", "Layer Results", "l"), ("top", "Top Layers", "g"))

    def compose(self) -> ComposeResult:
        # a one-line tab bar (clickable; keys m/l/g, < >) over a ContentSwitcher: no animated underline
        yield TabBar("", classes="view-tabs")
        with ContentSwitcher(initial="summary"):
            with VerticalScroll(id="summary"):
                yield Static("Loading the model analysis…", id="model-summary")
                yield BarChart(title="Layer Summaries: FLOPs per op type", unit="FLOPs", id="op-chart")
            yield FilterableTable([
                Column("index", "#", numeric=True, pin=True),
                Column("id", "Node id", filter=True, pin=True),
                Column("flops", "FLOPs", numeric=True, fmt=format_count),
                Column("share", "% of total", numeric=True, fmt=format_percent),
                Column("params", "Params", numeric=True, fmt=format_count),
                Column("macs", "MACs", numeric=True, fmt=format_count),
                Column("op_type", "Op type", filter=True),
                Column("output_shape", "Output shape", fmt=format_shape),
                Column("weight_name", "Weight", filter=True),
            ], id="layers")
            with Vertical(id="top"):  # the chart scrolls itself: no second tab stop around it
                yield BarChart(title="Top layers by FLOPs", unit="FLOPs", id="top-chart")

    def _show_tabs(self) -> None:
        current = self.current_tab()
        parts = []
        for tab_id, label, key in self.TABS:
            text = f" {label} ({key}) "
            if tab_id == current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=tab('{tab_id}')]{text}[/]")
        self.query_one(".view-tabs", TabBar).update(" ".join(parts))

    def current_tab(self) -> str:
        return self.query_one(ContentSwitcher).current or "summary"

    def on_mount(self) -> None:
        self._show_tabs()
        self._load()

    def focus_default(self) -> None:
        self.action_tab(self.current_tab())

    @app_work(group="flops", description="read analysis")
    def _load(self) -> None:
        ws = self.app.workspace
        post_result(self, FlopsAnalysisLoaded(ws.analysis_of(self.project_id), ws.get_project(self.project_id)))

    @on(FlopsAnalysisLoaded)
    def _loaded(self, message: FlopsAnalysisLoaded) -> None:
        if self.query("#model-summary"):  # none when the app closes before the answer arrives
            self.show_analysis(message.analysis, message.project)

    @on(messages.WorkFailed)
    def _load_failed(self) -> None:
        self.query_one("#model-summary", Static).update("Could not read the model analysis.")

    def show_analysis(self, analysis: dict, project: Optional[dict] = None) -> None:
        self.analysis = analysis
        self.query_one("#model-summary", Static).update(model_summary_text(analysis, project))
        ops = op_type_flops(analysis)
        self.query_one("#op-chart", BarChart).set_data([k for k, _ in ops], [v for _, v in ops])
        self.query_one("#layers", FilterableTable).set_rows(node_rows(analysis))
        self._show_top()

    def _show_top(self) -> None:
        rows = sorted((r for r in node_rows(self.analysis) if r["flops"] > 0), key=lambda r: -r["flops"])
        if self.top_n:
            rows = rows[: self.top_n]
        title = f"Top {self.top_n} layers by FLOPs" if self.top_n else "All nodes by FLOPs"
        total = float((self.analysis.get("totals") or {}).get("flops") or 0) or None
        self.query_one("#top-chart", BarChart).set_data(
            [r["id"] for r in rows], [r["flops"] for r in rows], keys=[r["_key"] for r in rows],
            title=title + " [dim](+/-: top N · click: record)[/dim]", total=total)

    def action_top_n(self, step: int) -> None:
        i = TOP_N_CHOICES.index(self.top_n) if self.top_n in TOP_N_CHOICES else 0
        self.top_n = TOP_N_CHOICES[max(0, min(len(TOP_N_CHOICES) - 1, i + step))]
        self._show_top()

    def action_tab(self, tab: str) -> None:
        """Show a tab: 'summary' (Model Summary + Layer Summaries), 'layers' (Layer Results), 'top'."""
        self.query_one(ContentSwitcher).current = tab
        self._show_tabs()
        target = {"summary": "#op-chart", "layers": "#layers", "top": "#top-chart"}[tab]
        self.query_one(target).focus(scroll_visible=False)

    def action_inspect(self) -> None:
        if self.current_tab() != "layers":
            self.action_tab("layers")
            self.notify("Pick a row, then i (or enter) shows its record; a click on a bar does too.", timeout=3)
            return
        row = self.query_one("#layers", FilterableTable).current_row()
        if row is not None:
            self.show_record(row["_key"])

    def show_record(self, position: int) -> None:
        nodes = self.analysis.get("nodes") or []
        if 0 <= position < len(nodes):
            node = nodes[position]
            total = float((self.analysis.get("totals") or {}).get("flops") or 0)
            share = f"{float(node.get('flops') or 0) / total * 100:.2f}% of the model's FLOPs" if total else None
            self.app.push_screen(RecordDialog(f"{node.get('id')} · {node.get('op_type')}",
                                              analysis_fields(node) + [("Share", share)]))

    @on(FilterableTable.RowChosen, "#layers")
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        event.stop()
        self.show_record(event.row["_key"])

    @on(BarChart.Inspect, "#top-chart")
    def _bar_chosen(self, event: BarChart.Inspect) -> None:
        event.stop()
        self.show_record(event.key)


class PerfSection(ViewKeys, RecordListSection):
    """Performance Profiles of one project: profile list and running jobs on the left, the selected profile
    on the right (the list's life cycle: :class:`~sparsify_tui.tui.widgets.records.RecordListSection`)."""

    TABLE = TABLE
    SECTION = "perf"
    KIND = "perf profile"
    JOB_TYPES = ("perf_profile", "channel_calibration")
    RERUN_JOB = "perf_profile"
    LIST_ID = "profiles"
    JOBS_ID = "perf-jobs"
    FIXED = (FLOPS_ID, "FLOPS")
    LIST_WIDTH = 22  # the list pane is 24 wide (perf.tcss)
    VIEW_TABS = TABS

    BINDINGS = [
        *keys.profile_list("perf", new_what="performance profile, measured on a runtime here", record="profile",
                           records="profiles",
                           views=(("summary", "Summary", "Profile view: Model Summary and Layer Summaries"),
                                  ("layers", "Layers", "Profile view: Layer Results table (every node)"),
                                  ("top", "Top", "Profile view: chart of the top layers")),
                           level_what="pruned level of the estimated times (0.4 … 0.99)"),
        keys.mark("perf", "profile"),
        keys.compare("perf", "Compare the two marked profiles per node (one profile: its FP32 vs INT8)"),
        Binding("f", "fleet", "Fleet", show=False, id="perf.fleet",
                tooltip="Profile on the servers of a Ray cluster (the Fleet dialog)"),
        Binding("k", "calibrate", "Calibrate", show=False, id="perf.calibrate",
                tooltip="Channel calibration: thin the model at a few ratios and profile each on this server (a job), "
                        "so channel optimizations estimate from measured times"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(project_id, **kwargs)
        self.marked: list[str] = []  # record ids marked for comparing: A, then B

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="profile-pane", classes="list-pane"):
                yield Static("Profiles", classes="pane-title")
                yield from self.compose_list()
            # the measured view is mounted with the section (most projects open on a measured profile) and the
            # FLOPS view when first shown; both are then reused: a new profile (a finished job, another shell) never
            # removes and re-mounts a view
            with Vertical(id="profile-view"):
                yield PerfProfileView(self.project_id, None, id="measured-view")

    def current_view(self) -> Optional[FlopsProfileView | PerfProfileView]:
        """The profile view shown (FlopsProfileView or PerfProfileView), None before the list arrives."""
        kind = FlopsProfileView if self.selected == FLOPS_ID else PerfProfileView
        views = self.query_one("#profile-view").query_children(kind)
        return views.first() if views and self.selected is not None else None

    def action_inspect(self) -> None:
        self._forward("inspect")

    def action_level(self, step: int) -> None:
        self._forward("level", step)

    # -- profile list -----------------------------------------------------------------------
    def record_option(self, record: dict) -> Option:
        return Option(compare.marked_label(self._label(record), str(record["id"]), self.marked),
                      id=str(record["id"]))

    def _label(self, record: dict) -> str:
        mark = 3 if str(record["id"]) in self.marked else 0  # room for "A▸ "
        return record_label(record, self.LIST_WIDTH - mark)

    def record_signature(self, record: dict) -> tuple:
        return super().record_signature(record) + (record.get("batch_size"), record.get("core_count"),
                                                   bool(record.get("channel_calibration")))

    def prefetch(self, ws, records: list[dict]):
        """The newest measured profile (the one the section opens on until the user picks one), read with the list:
        ``(record id, PerfProfileLoaded)``, or None."""
        if self._user_chose or not records:
            return None
        rid = str(newest(records)["id"])
        return rid, PerfProfileView.read(ws, self.project_id, rid)

    def show_records(self, records: list[dict]) -> None:
        ids = {str(r["id"]) for r in records}
        self.marked = [m for m in self.marked if m in ids]
        super().show_records(records)

    def reload_profiles(self) -> None:
        """Re-read the measured profiles from the workspace (thread worker)."""
        self.reload()

    def select_profile(self, profile_id: str, *, focus: bool = False, refresh: bool = False) -> None:
        """Show the FLOPS view (`"flops"`) or a measured profile (record id) (:meth:`RecordListSection.select`)."""
        self.select(profile_id, focus=focus, refresh=refresh)

    def show_selected(self, selected: Optional[str], *, refresh: bool = False, focus: bool = False) -> None:
        """Show the FLOPS view or the measured view (set to ``selected``), each mounted once; focus moves into it
        with ``focus`` (enter on the list), or when the focus was in the view it replaces."""
        pane = self.query_one("#profile-view")
        kind = FlopsProfileView if selected == FLOPS_ID else PerfProfileView
        views = pane.query_children(kind)
        if views:
            view = views.first()
        elif kind is FlopsProfileView:
            view = FlopsProfileView(self.project_id, id="flops-view")
            pane.mount(view)
        else:
            view = PerfProfileView(self.project_id, str(selected), id="measured-view")
            pane.mount(view)
        if isinstance(view, PerfProfileView):
            ready = self.prefetched[1] if self.prefetched and self.prefetched[0] == selected else None
            view.set_record(str(selected), refresh=refresh, loaded=ready)
        focused = self.screen.focused
        had_focus = focused is not None and any(focused in v.walk_children() for v in pane.children
                                                if v is not view)
        for other in pane.children:
            other.display = other is view
        if focus or had_focus:
            view.when_mounted(view.focus_default)

    def selected_record_id(self) -> Optional[str]:
        return None if self.selected == FLOPS_ID else self.selected

    # -- compare (tui/perf/compare_screen.py) ---------------------------------------------------------
    def _highlighted_id(self) -> Optional[str]:
        options = self.option_list
        if options.highlighted is None:
            return None
        oid = str(options.get_option_at_index(options.highlighted).id)
        return None if oid == FLOPS_ID else oid

    def action_toggle_mark(self) -> None:
        """`space`: mark or unmark the highlighted measured profile (the first mark is A, the second B)."""
        rid = self._highlighted_id()
        if rid is None:
            self.notify("Highlight a measured profile to mark it (FLOPS has no times to compare).", timeout=4)
            return
        self.marked = compare.toggle_mark(self.marked, rid)
        options = self.option_list
        for r in self.records:
            options.replace_option_prompt(str(r["id"]), compare.marked_label(self._label(r), str(r["id"]),
                                                                             self.marked))

    def action_compare(self) -> None:
        """`=`: the comparison screen of the marked profiles (see :func:`compare.compare_pair`)."""
        pair = compare.compare_pair(self.marked, self._highlighted_id() or self.selected_record_id())
        if pair is None:
            self.notify("Mark two profiles with space, then press =. One profile: its FP32 vs INT8.", timeout=5)
            return
        self.app.push_screen(compare.PerfCompareScreen(self.project_id, *pair))

    # -- new / rerun ----------------------------------------------------------------------------
    def action_fleet(self) -> None:
        """Key `f`: the Fleet dialog (perf profiles on the servers of a Ray cluster); the list picks up its results."""
        self.app.push_screen(FleetDialog(self.project_id, "profile"), lambda _job: self.reload())

    def action_calibrate(self) -> None:
        """Key `k`: after a confirmation, the channel calibration of the selected measured profile (the newest when
        FLOPS is selected) as a ``channel_calibration`` job, its progress under the list; the calibration is stored
        with the profile (marked ``cal``), which new channel optimizations then take."""
        record = self.selected_record() or newest(self.records)
        if record is None:
            self.notify("Measure a perf profile first (n): the channel calibration is stored with it.",
                        severity="warning", timeout=5)
            return
        name = record.get("name") or record["id"]
        again = " again" if record.get("channel_calibration") else ""
        question = (f"Calibrate channel pruning{again} with perf profile {name!r} (batch "
                    f"{record.get('batch_size', '?')}, {plural(record.get('core_count', '?'), 'core')}): the model "
                    "is thinned at a few ratios and each is profiled per node on this server (a few minutes). New "
                    "channel optimizations then estimate their speedup from these measured times.")
        self.app.push_screen(ConfirmDialog(question, confirm_label="Calibrate", title="Channel calibration"),
                             lambda yes: self.submit_job("channel_calibration", {"perf": str(record["id"])})
                             if yes else None)

    def action_new(self) -> None:
        """Key `n`: the add dialog (name, batch, cores, warm-up, iterations, data, INT8), then the job
        (``jobs.submit(ws, project, "perf_profile", args)``) with live progress."""
        self.app.hold_keys()  # the name typed before the dialog shows goes into it
        self._open_add_dialog()

    @app_work(group="perf-dialog", description="read the project's profile setup")
    def _open_add_dialog(self) -> None:
        ws = self.app.workspace
        defaults = profile_defaults(ws.get_project(self.project_id))
        defaults["name"] = fresh_name(defaults["name"], (r.get("name") for r in ws.list_records(self.project_id, TABLE)))
        post_result(self, PerfDialogReady(defaults))

    def rerun_question(self, record: dict) -> str:
        name = record.get("name") or record["id"]
        return (f"Measure perf profile {name!r} again (batch {record.get('batch_size', '?')}, "
                f"{plural(record.get('core_count', '?'), 'core')}, same settings)? Its numbers are replaced when it "
                "finishes.")

    def rerun_args(self, ws, record: dict) -> dict:
        stored = ws.get_record(self.project_id, TABLE, str(record["id"]))
        return rerun_args(profile_defaults(ws.get_project(self.project_id), stored), str(record["id"]))

    @on(PerfDialogReady)
    def _show_dialog(self, message: PerfDialogReady) -> None:
        def done(result: Optional[dict]) -> None:
            if result and result.get("record_id"):  # the profile the user just made: shown, its view focused
                self.show_when_listed(str(result["record_id"]), focus=True)
                return
            if result and result.get("job"):  # hidden while its job runs: follow it under the list
                self.follow_job(result["job"])
            self.reload()

        self.app.show_dialog(PerfProfileDialog(self.project_id, message.defaults, job=message.job), done)
