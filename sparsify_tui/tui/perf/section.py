"""Performance Profiles section: a list of profiles (FLOPS, always there, plus the measured ones) and the
selected profile's view.

The FLOPS profile view is computed from the graph (no run): Model Summary, Layer Summaries (FLOPs per op
type) and Layer Results (every node in graph order, sortable, `/`-filterable) with a chart of the top
layers. A measured profile is shown by `perf.profile.PerfProfileView(project_id, record_id)`; `a` adds one
(`perf.dialogs.PerfProfileDialog`), `r` measures the selected one again, `delete` deletes it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import ContentSwitcher, OptionList, Static
from textual.widgets.option_list import Option

from sparsify_tui.tui import messages
from sparsify_tui.tui.fleet import FleetDialog
from sparsify_tui.tui.fleet.grouping import grouped_options
from sparsify_tui.tui.perf import compare
from sparsify_tui.tui.perf.dialogs import PerfProfileDialog, profile_defaults, rerun_args
from sparsify_tui.tui.perf.messages import (FlopsAnalysisLoaded, PerfDialogReady, PerfProfileDeleted,
                                            PerfProfilesListed)
from sparsify_tui.tui.perf.profile import TABLE, PerfProfileView
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
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


def record_label(record: dict) -> str:
    """The profile list label of a measured profile record: ``"b1 (b1, 2c)"`` (name, batch, cores)."""
    label = str(record.get("name") or record.get("id"))
    extra = []
    if record.get("batch_size"):
        extra.append(f"b{record['batch_size']}")
    if record.get("core_count"):
        extra.append(f"{record['core_count']}c")
    return f"{label} ({', '.join(extra)})" if extra else label


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


class FlopsProfileView(Widget):
    """The FLOPS profile: Model Summary + Layer Summaries, Layer Results, Top Layers (tabs)."""

    BINDINGS = [
        Binding("n", "cycle_top_n", "Top N", show=False, id="flops.top_n", tooltip="Top layers: 10, 20, 50 or all"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.analysis: dict = {}
        self.top_n = 20

    TABS = (("summary", "Summary", "m"), ("layers", "Layer Results", "l"), ("top", "Top Layers", "g"))

    def compose(self) -> ComposeResult:
        # a one-line tab bar (clickable; keys m/l/g) over a ContentSwitcher: no animated underline
        yield TabBar("", classes="view-tabs")
        with ContentSwitcher(initial="summary"):
            with VerticalScroll(id="summary"):
                yield Static("Loading the model analysis…", id="model-summary")
                yield BarChart(title="Layer Summaries: FLOPs per op type", unit="FLOPs", id="op-chart")
            yield FilterableTable([
                Column("index", "#", numeric=True),
                Column("id", "Node id", filter=True),
                Column("op_type", "Op type", filter=True),
                Column("weight_name", "Weight", filter=True),
                Column("output_shape", "Output shape", fmt=format_shape),
                Column("params", "Params", numeric=True, fmt=format_count),
                Column("macs", "MACs", numeric=True, fmt=format_count),
                Column("flops", "FLOPs", numeric=True, fmt=format_count),
                Column("share", "% of total", numeric=True, fmt=format_percent),
            ], id="layers")
            with VerticalScroll(id="top"):
                yield BarChart(title="Top layers by FLOPs", unit="FLOPs", id="top-chart")

    def _show_tabs(self) -> None:
        current = self.query_one(ContentSwitcher).current
        parts = []
        for tab_id, label, key in self.TABS:
            text = f" {label} ({key}) "
            if tab_id == current:
                parts.append(f"[reverse b]{text}[/]")
            else:
                parts.append(f"[@click=tab('{tab_id}')]{text}[/]")
        self.query_one(".view-tabs", TabBar).update(" ".join(parts))

    def on_mount(self) -> None:
        self._show_tabs()
        self._load()

    def focus_default(self) -> None:
        self.query_one("#op-chart").focus(scroll_visible=False)

    @app_work(group="flops", description="read analysis")
    def _load(self) -> None:
        ws = self.app.workspace
        post_result(self, FlopsAnalysisLoaded(ws.analysis_of(self.project_id), ws.get_project(self.project_id)))

    @on(FlopsAnalysisLoaded)
    def _loaded(self, message: FlopsAnalysisLoaded) -> None:
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
            [r["id"] for r in rows], [r["flops"] for r in rows], title=title + " [dim](n: top N)[/dim]", total=total)

    def action_cycle_top_n(self) -> None:
        i = TOP_N_CHOICES.index(self.top_n) if self.top_n in TOP_N_CHOICES else 0
        self.top_n = TOP_N_CHOICES[(i + 1) % len(TOP_N_CHOICES)]
        self._show_top()

    def action_tab(self, tab: str) -> None:
        """Show a tab: 'summary' (Model Summary + Layer Summaries), 'layers' (Layer Results), 'top'."""
        self.query_one(ContentSwitcher).current = tab
        self._show_tabs()
        target = {"summary": "#op-chart", "layers": "#layers", "top": "#top-chart"}[tab]
        self.query_one(target).focus(scroll_visible=False)


class PerfSection(Widget):
    """Performance Profiles of one project: profile list on the left, the selected profile on the right."""

    BINDINGS = [
        Binding("a", "add_profile", "Add", id="perf.add", tooltip="Measure a new performance profile"),
        Binding("r", "rerun_profile", "Rerun", id="perf.rerun", tooltip="Measure the selected profile again"),
        Binding("delete", "delete_profile", "Delete", id="perf.delete", tooltip="Delete the selected profile"),
        Binding("p", "focus_list", "Profiles", id="perf.list", tooltip="Move to the list of profiles"),
        Binding("m", "view_tab('summary')", "Summary", id="perf.tab_summary",
                tooltip="Profile view: Model Summary and Layer Summaries"),
        Binding("l", "view_tab('layers')", "Layers", id="perf.tab_layers",
                tooltip="Profile view: Layer Results table (every node)"),
        Binding("g", "view_tab('top')", "Top", id="perf.tab_top",
                tooltip="Profile view: chart of the top layers"),
        Binding("f", "fleet", "Fleet", show=False, id="perf.fleet",
                tooltip="Profile on the servers of a Ray cluster (the Fleet dialog)"),
        Binding("space", "toggle_mark", "Mark", show=False, id="perf.mark",
                tooltip="Mark the highlighted profile for comparing (A, then B)"),
        Binding("equals_sign", "compare", "Compare", show=False, id="perf.compare",
                tooltip="Compare the two marked profiles per node (one profile: its FP32 vs INT8)"),
    ]

    POLL_SECONDS = 5.0

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.selected: str = FLOPS_ID
        self._records: list[dict] = []
        self.marked: list[str] = []  # record ids marked for comparing: A, then B

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="profile-pane"):
                yield Static("Profiles", classes="pane-title")
                yield OptionList(Option("FLOPS", id=FLOPS_ID), id="profiles")
            yield Vertical(FlopsProfileView(self.project_id, id="flops-view"), id="profile-view")

    def on_mount(self) -> None:
        self.reload_profiles()
        self.set_interval(self.POLL_SECONDS, self._poll)

    def focus_default(self) -> None:
        self.query_one("#profiles", OptionList).focus()

    def current_view(self) -> Optional[FlopsProfileView | PerfProfileView]:
        """The mounted profile view (FlopsProfileView or PerfProfileView)."""
        views = self.query("#profile-view > *")
        return views.first() if views else None  # type: ignore[return-value]

    def action_view_tab(self, tab: str) -> None:
        """m/l/g: forwarded to the current view's `action_tab(tab)` (tabs 'summary', 'layers', 'top')."""
        view = self.current_view()
        if view is not None:
            view.action_tab(tab)

    def action_focus_list(self) -> None:
        self.query_one("#profiles", OptionList).focus()

    # -- profile list -----------------------------------------------------------------------
    def reload_profiles(self) -> None:
        """Re-read the measured profiles from the workspace (thread worker)."""
        self._load_records()

    def _poll(self) -> None:
        # cheap: only while visible; picks up profiles finished by background jobs
        if self.app.section == "perf" and self.is_mounted:
            self._load_records()

    @app_work(group="perf-list", description="list perf profiles")
    def _load_records(self) -> None:
        post_result(self, PerfProfilesListed(self.app.workspace.list_records(self.project_id, TABLE)))

    @on(PerfProfilesListed)
    def _records_listed(self, message: PerfProfilesListed) -> None:
        self._show_records(message.records)

    def _show_records(self, records: list[dict]) -> None:
        def sig(r: dict) -> tuple:
            target = (r.get("target") or {}).get("label")
            return r.get("id"), r.get("name"), r.get("batch_size"), r.get("core_count"), target

        if [sig(r) for r in records] == [sig(r) for r in self._records]:
            return  # nothing changed: no redraw
        self._records = list(records)
        options = self.query_one("#profiles", OptionList)
        options.clear_options()
        options.add_option(Option("FLOPS", id=FLOPS_ID))

        def option(r: dict) -> Option:
            return Option(compare.marked_label(record_label(r), str(r["id"]), self.marked), id=str(r["id"]))

        # grouped by target machine when any profile ran on a fleet target (f: the Fleet dialog)
        options.add_options(grouped_options(records, option, width=15))
        ids = [FLOPS_ID] + [str(r["id"]) for r in records]
        self.marked = [m for m in self.marked if m in ids]
        if self.selected not in ids:
            self.select_profile(FLOPS_ID)
        options.highlighted = options.get_option_index(self.selected)

    @property
    def records(self) -> list[dict]:
        """The measured perf profile records shown in the list."""
        return list(self._records)

    @on(OptionList.OptionSelected, "#profiles")
    def _option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.select_profile(str(event.option.id))

    def select_profile(self, profile_id: str) -> None:
        """Show the FLOPS view (`"flops"`) or a measured profile (record id)."""
        if profile_id == self.selected and self.query("#profile-view > *"):
            return
        self.selected = profile_id
        self.refresh_bindings()  # rerun/delete are enabled by the selection (check_action)
        view = self.query_one("#profile-view")
        view.remove_children()
        if profile_id == FLOPS_ID:
            view.mount(FlopsProfileView(self.project_id, id="flops-view"))
        else:
            view.mount(PerfProfileView(self.project_id, profile_id, id="measured-view"))

    def selected_record_id(self) -> Optional[str]:
        return None if self.selected == FLOPS_ID else self.selected

    # -- compare (tui/perf/compare.py) ---------------------------------------------------------
    def _highlighted_id(self) -> Optional[str]:
        options = self.query_one("#profiles", OptionList)
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
        options = self.query_one("#profiles", OptionList)
        for r in self._records:
            options.replace_option_prompt(str(r["id"]), compare.marked_label(record_label(r), str(r["id"]),
                                                                             self.marked))

    def action_compare(self) -> None:
        """`=`: the comparison screen of the marked profiles (see :func:`compare.compare_pair`)."""
        pair = compare.compare_pair(self.marked, self._highlighted_id() or self.selected_record_id())
        if pair is None:
            self.notify("Mark two profiles with space, then press =. One profile: its FP32 vs INT8.", timeout=5)
            return
        self.app.push_screen(compare.PerfCompareScreen(self.project_id, *pair))

    # -- add / rerun / delete ------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("rerun_profile", "delete_profile") and self.selected == FLOPS_ID:
            return None  # the FLOPS profile cannot be rerun or deleted
        return True

    def action_fleet(self) -> None:
        """Key `f`: the Fleet dialog (perf profiles on the servers of a Ray cluster); the list picks up its results."""
        self.app.push_screen(FleetDialog(self.project_id, "profile"), lambda _job: self.reload_profiles())

    def action_add_profile(self) -> None:
        """Key `a`: the add dialog (name, batch, cores, warm-up, iterations, INT8), then the job
        (``jobs.submit(ws, project, "perf_profile", args)``) with live progress."""
        self._open_add_dialog()

    @app_work(group="perf-dialog", description="read the project's profile setup")
    def _open_add_dialog(self) -> None:
        post_result(self, PerfDialogReady(profile_defaults(self.app.workspace.get_project(self.project_id))))

    def action_rerun_profile(self) -> None:
        """Key `r`: measure the selected profile again with its settings; the result replaces its data."""
        if self.selected != FLOPS_ID:
            self._rerun(self.selected)

    @app_work(group="perf-dialog", description="rerun perf profile")
    def _rerun(self, record_id: str) -> None:
        from sparsify_tui import jobs

        ws = self.app.workspace
        record = ws.get_record(self.project_id, TABLE, record_id)
        defaults = profile_defaults(ws.get_project(self.project_id), record)
        job = jobs.submit(ws, self.project_id, "perf_profile", rerun_args(defaults, record_id))
        post_result(self, PerfDialogReady(defaults, job=job))

    @on(PerfDialogReady)
    def _show_dialog(self, message: PerfDialogReady) -> None:
        def done(record_id: Optional[str]) -> None:
            self.reload_profiles()
            if record_id:
                self.select_profile(str(record_id))

        self.app.push_screen(PerfProfileDialog(self.project_id, message.defaults, job=message.job), done)

    def action_delete_profile(self) -> None:
        """Key `delete`: confirm, then delete the record and its stored result."""
        if self.selected == FLOPS_ID:
            return
        record_id = self.selected
        record = next((r for r in self._records if str(r.get("id")) == record_id), {})

        def answer(yes: Optional[bool]) -> None:
            if yes:
                self._delete(record_id)

        self.app.push_screen(ConfirmDialog(f"Delete perf profile {record.get('name') or record_id!r}?"), answer)

    @app_work(group="perf-delete", description="delete perf profile")
    def _delete(self, record_id: str) -> None:
        self.app.workspace.delete_record(self.project_id, TABLE, record_id)
        post_result(self, PerfProfileDeleted(record_id))

    @on(PerfProfileDeleted)
    def _deleted(self, message: PerfProfileDeleted) -> None:
        self.select_profile(FLOPS_ID)
        self.reload_profiles()
