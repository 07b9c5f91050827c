"""Loss Profiles section: the list of profiles ("Approximated", always there, plus measured ones) and
the selected profile's page.

Profile page tabs: Summary (Model Summary with the method, its settings and the metric), Sensitivity
(bar chart per layer at a chosen sparsity, `[`/`]` change it, `i` toggles INT8 sensitivity), Params
(bar chart of params per layer), Table (every number: one row per layer, one column per level).
`a` adds a profile (a background ``loss_profile`` job with progress and cancel), `r` reruns the selected
one with the same settings, `delete` deletes it.
"""

from __future__ import annotations

from typing import Any, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from sparsify_tui.tui import messages
from sparsify_tui.tui.loss.dialogs import LossProfileDialog
from sparsify_tui.tui.loss.messages import LossJobSubmitted, LossProfileDeleted, LossProfileLoaded, LossProfilesListed
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog
from sparsify_tui.tui.widgets.jobs import JobProgress
from sparsify_tui.tui.widgets.tabs import place_tab_underlines
from sparsify_tui.tui.widgets.tables import Column, FilterableTable, format_count, format_percent
from sparsify_tui.tui.workers import app_work, post_result

APPROX_ID = "approximated"
TABLE = "loss_profiles"
JOB_TYPE = "loss_profile"
ACTIVE = ("pending", "running")


# ----------------------------------------------------------------------------------------- pure helpers


def fmt_num(v: Any) -> str:
    """Sensitivity values: 4 significant digits, '' for None."""
    if v is None or v == "":
        return ""
    return f"{float(v):.4g}"


def summary_text(prof) -> str:
    """Model Summary (Rich markup) of a LossProfile; lines fit the ~52 columns of the page at 80x24."""
    d = prof.to_dict()["profile"]
    s = d["settings"]
    settings = [f"{len(d['levels'])} levels {d['levels'][0]:g}–{d['levels'][-1]:g}"] if d["levels"] else []
    if prof.method == "one-shot":
        settings.append(f"{s.get('batches', '?')}×batch {s.get('batch_size', 1)}")
        settings.append(str(s.get("data") or "synthetic"))
    if s.get("int8"):
        settings.append("INT8")
    avg = d["average_sensitivity"]
    rec = d["est_recovery"]
    return "\n".join([
        f"[b]Model Summary[/b] · {prof.name}",
        f" Method     [b]{prof.method}[/b]",
        f" Settings   {' · '.join(settings)}",
        " Metric",
        f"   [b]{prof.metric_description}[/b]",
        f" Params     [b]{format_count(d['total_params'])}[/b] (prunable {format_count(d['prunable_params'])}, "
        f"{d['layer_count']} layers)",
        f" Est. params reduction  [b]{format_percent(d['est_params_reduction'])}[/b]",
        f"   [dim]default: {d['default_layer_sparsity']:.2f} per layer, first/depthwise dense[/dim]",
        f" Avg. sensitivity  [b]{fmt_num(avg)}[/b] [dim](at 0.95 − baseline)[/dim]",
        f" Est. recovery     [b]{format_percent(rec) if rec is not None else 'n/a'}[/b] [dim](heuristic)[/dim]",
        *([f" [dim]Measured in {d['seconds']:.1f} s[/dim]"] if d.get("seconds") else []),
    ])


def table_columns(prof) -> list[Column]:
    cols = [
        Column("index", "#", numeric=True),
        Column("id", "Layer", filter=True),
        Column("op_type", "Op", filter=True),
        Column("params", "Params", numeric=True, fmt=format_count),
        Column("prunable", "Prunable", numeric=True, fmt=format_count),
        Column("sparsity", "Sparsity", numeric=True, fmt=format_percent),
        Column("int8", "INT8", numeric=True, fmt=fmt_num),
    ]
    for lv in prof.levels:
        cols.append(Column(f"s{lv:g}", f"@{lv:g}", numeric=True, fmt=fmt_num))
    cols.append(Column("weight_name", "Weight", filter=True))
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


class LossProfileView(Widget):
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
        with TabbedContent(initial="summary", id="loss-tabs"):
            with TabPane("Summary", id="summary"):
                with VerticalScroll():
                    yield Static("Loading the loss profile…", id="loss-summary")
            with TabPane("Sensitivity", id="sens"):
                with VerticalScroll():
                    yield Static("", id="sens-hint")
                    yield BarChart(title="Layer Sensitivities", id="sens-chart", modes=("values", "log"))
            with TabPane("Params", id="params"):
                with VerticalScroll():
                    yield BarChart(title="Layer Params Counts", unit="params", id="params-chart")
            with TabPane("Table", id="table"):
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

        post_result(self, LossProfileLoaded(ref, load_loss_profile(self.app.workspace, self.project_id, ref)))

    @on(LossProfileLoaded)
    def _loaded(self, message: LossProfileLoaded) -> None:
        if message.ref == self.ref:
            self.show_profile(message.profile)

    @on(messages.WorkFailed)
    def _load_failed(self) -> None:
        self.query_one("#loss-summary", Static).update("Could not read this loss profile.")

    def show_profile(self, prof) -> None:
        self.profile = prof
        self.level = default_level(prof)
        self.show_int8 = False
        self.query_one("#loss-summary", Static).update(summary_text(prof))
        place_tab_underlines(self)
        self.query_one("#params-chart", BarChart).set_data(
            [x.id for x in prof.layers], [x.params for x in prof.layers],
            title=f"Layer Params Counts ({format_count(prof.total_params)} total)", total=prof.total_params)
        table = self.query_one("#loss-table", FilterableTable)
        table.columns = table_columns(prof)
        if table.is_mounted:
            table._setup_columns()
        table.set_rows(table_rows(prof))
        self._show_sens()

    def _show_sens(self) -> None:
        prof = self.profile
        if prof is None:
            return
        chart = self.query_one("#sens-chart", BarChart)
        hint = self.query_one("#sens-hint", Static)
        labels = [x.id for x in prof.layers]
        if self.show_int8:
            vals = [x.int8_sensitivity for x in prof.layers]
            if all(v is None for v in vals):
                hint.update("No INT8 sensitivity in this profile (add one with INT8 on).  [dim]i: pruning[/dim]")
                chart.set_data([], [], title="Layer INT8 Sensitivities")
                return
            if prof.method == "magnitude":
                what = "weight INT8 noise Σ(w−q)²/Σw²"
            else:
                what = f"only this layer in INT8 (weight + input) · {prof.metric_description}"
            hint.update(f"{what}  [dim]i: pruning[/dim]")
            chart.set_data(labels, [v or 0.0 for v in vals], title="Layer INT8 Sensitivities", unit="",
                           x_label="INT8 sensitivity")
        else:
            hint.update(f"Metric: {prof.metric_description}  [dim]\\[ ]: sparsity · i: INT8[/dim]")
            chart.set_data(labels, [x.value_at(self.level) for x in prof.layers],
                           title=f"Layer Sensitivities at sparsity {self.level:g}", unit="",
                           x_label=f"sensitivity @{self.level:g}")

    def action_level(self, step: int) -> None:
        if self.profile is None:
            return
        levels = chart_levels(self.profile)
        i = min(range(len(levels)), key=lambda k: abs(levels[k] - self.level))
        self.level = levels[max(0, min(len(levels) - 1, i + step))]
        self.show_int8 = False
        self.query_one("#loss-tabs", TabbedContent).active = "sens"
        self._show_sens()

    def action_toggle_int8(self) -> None:
        self.show_int8 = not self.show_int8
        self.query_one("#loss-tabs", TabbedContent).active = "sens"
        self._show_sens()

    def action_tab(self, tab: str) -> None:
        self.query_one("#loss-tabs", TabbedContent).active = tab
        target = {"summary": None, "sens": "#sens-chart", "params": "#params-chart", "table": "#loss-table"}[tab]
        if target == "#loss-table":
            self.query_one(target, FilterableTable).focus()
        elif target:
            self.query_one(target).query_one("VerticalScroll").focus()


# ------------------------------------------------------------------------------------------ the section


class LossSection(Widget):
    """Loss Profiles of one project: profile list (+ running jobs) on the left, the selected profile right."""

    DEFAULT_CSS = """
    LossSection { height: 1fr; }
    LossSection #loss-pane { width: 24; height: 1fr; border-right: solid $primary-darken-2; }
    LossSection #loss-pane .pane-title { text-style: bold; padding: 0 1; }
    LossSection #loss-list { height: 1fr; border: none; }
    LossSection #loss-jobs { height: auto; max-height: 8; }
    LossSection #loss-view { width: 1fr; height: 1fr; }
    """

    BINDINGS = [
        Binding("a", "add_profile", "Add", id="loss.add", tooltip="Measure a new loss profile (background job)"),
        Binding("r", "rerun_profile", "Rerun", id="loss.rerun", tooltip="Measure the selected loss profile again"),
        Binding("delete", "delete_profile", "Delete", id="loss.delete", tooltip="Delete the selected loss profile"),
        Binding("p", "focus_list", "Profiles", id="loss.list", tooltip="Move to the list of loss profiles"),
        Binding("m", "view_tab('summary')", "Summary", id="loss.tab_summary", tooltip="Profile page: Model Summary"),
        Binding("g", "view_tab('sens')", "Sensitivity", id="loss.tab_sens",
                tooltip="Profile page: Layer Sensitivities chart"),
        Binding("c", "view_tab('params')", "Params", id="loss.tab_params",
                tooltip="Profile page: Layer Params Counts chart"),
        Binding("l", "view_tab('table')", "Table", id="loss.tab_table", tooltip="Profile page: table of every number"),
        Binding("right_square_bracket", "level(1)", "Sparsity +", id="loss.level_up",
                tooltip="Sensitivity chart: next sparsity level"),
        Binding("left_square_bracket", "level(-1)", "Sparsity −", id="loss.level_down",
                tooltip="Sensitivity chart: previous sparsity level"),
        Binding("i", "toggle_int8", "INT8", id="loss.int8", tooltip="Sensitivity chart: pruning ↔ INT8 sensitivity"),
    ]

    POLL_SECONDS = 5.0

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.selected: str = APPROX_ID
        self._records: list[dict] = []
        self._watched: set = set()
        self._select_after: Optional[str] = None  # record id to show once the list has it (finished job)

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="loss-pane"):
                yield Static("Loss profiles", classes="pane-title")
                yield OptionList(Option("Approximated", id=APPROX_ID), id="loss-list")
                yield Vertical(id="loss-jobs")
            yield Vertical(LossProfileView(self.project_id, APPROX_ID), id="loss-view")

    def on_mount(self) -> None:
        self._load_records()
        self.set_interval(self.POLL_SECONDS, self._poll)

    def focus_default(self) -> None:
        self.query_one("#loss-list", OptionList).focus()

    def action_focus_list(self) -> None:
        self.focus_default()

    def current_view(self) -> Optional[LossProfileView]:
        views = self.query(LossProfileView)
        return views.first() if views else None

    def action_view_tab(self, tab: str) -> None:
        view = self.current_view()
        if view is not None:
            view.action_tab(tab)

    def action_level(self, step: int) -> None:
        view = self.current_view()
        if view is not None:
            view.action_level(step)

    def action_toggle_int8(self) -> None:
        view = self.current_view()
        if view is not None:
            view.action_toggle_int8()

    # -- list ------------------------------------------------------------------------------------
    def _poll(self) -> None:
        if getattr(self.app, "section", None) == "loss" and self.is_mounted:
            self._load_records()

    @app_work(group="loss-list", description="list loss profiles")
    def _load_records(self) -> None:
        from sparsify_tui.jobs import list_jobs

        ws = self.app.workspace
        recs = ws.list_records(self.project_id, TABLE)
        try:
            jobs = [j for j in list_jobs(ws, self.project_id) if j.get("type") == JOB_TYPE and j.get("status") in ACTIVE]
        except Exception:  # noqa: BLE001 - the list must show even if the jobs table is unreadable
            jobs = []
        post_result(self, LossProfilesListed(recs, jobs))

    @on(LossProfilesListed)
    def _records_listed(self, message: LossProfilesListed) -> None:
        self._show_records(message.records)
        for job in message.active_jobs:
            self.watch_job(job["id"])

    def _show_records(self, records: list[dict]) -> None:
        key = [(r.get("id"), r.get("name"), r.get("method"), r.get("modified")) for r in records]
        if key == [(r.get("id"), r.get("name"), r.get("method"), r.get("modified")) for r in self._records]:
            return
        self._records = list(records)
        options = self.query_one("#loss-list", OptionList)
        options.clear_options()
        options.add_option(Option("Approximated", id=APPROX_ID))
        for r in records:
            options.add_option(Option(f"{r.get('name') or r['id']} ({r.get('method', '?')})", id=str(r["id"])))
        ids = [APPROX_ID] + [str(r["id"]) for r in records]
        if self._select_after in ids:
            self.select_profile(self._select_after)
            self._select_after = None
        elif self.selected not in ids:
            self.select_profile(APPROX_ID)
        options.highlighted = ids.index(self.selected)

    @property
    def records(self) -> list[dict]:
        return list(self._records)

    @on(OptionList.OptionSelected, "#loss-list")
    def _option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.select_profile(str(event.option.id))

    def select_profile(self, ref: str, force: bool = False) -> None:
        """Show the Approximated profile (``"approximated"``) or a stored one (record id)."""
        if ref == self.selected and self.query(LossProfileView) and not force:
            return
        self.selected = ref
        self.refresh_bindings()  # rerun/delete are enabled by the selection (check_action)
        view = self.current_view()
        if view is None:
            self.query_one("#loss-view").mount(LossProfileView(self.project_id, ref))
        else:
            view.set_ref(ref)

    # -- jobs ------------------------------------------------------------------------------------
    def watch_job(self, job_id: str) -> None:
        """Show a JobProgress for ``job_id`` under the list (once)."""
        if job_id in self._watched:
            return
        self._watched.add(job_id)
        self.query_one("#loss-jobs").mount(JobProgress(job_id, id=f"job-{job_id}"))

    def on_job_progress_finished(self, event) -> None:
        event.stop()
        job = event.job
        self._watched.discard(job.get("id"))
        if job.get("status") == "completed":
            event.control.remove()
            rid = (job.get("result") or {}).get("record_id")
            if rid:
                self._select_after = str(rid)
            self._load_records()
        elif job.get("status") == "error":
            self.app.show_error(job.get("error") or "the loss profile job failed", title="Loss profile failed")

    @app_work(group="loss-submit", description="submit loss job", exclusive=False)
    def _submit(self, args: dict) -> None:
        from sparsify_tui.jobs import submit

        post_result(self, LossJobSubmitted(submit(self.app.workspace, self.project_id, JOB_TYPE, args)))

    @on(LossJobSubmitted)
    def _submitted(self, message: LossJobSubmitted) -> None:
        self.watch_job(message.job["id"])

    def action_add_profile(self) -> None:
        def done(args: Optional[dict]) -> None:
            if args:
                self._submit(args)

        self.app.push_screen(LossProfileDialog(), done)

    def _selected_record(self) -> Optional[dict]:
        return next((r for r in self._records if str(r.get("id")) == self.selected), None)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("rerun_profile", "delete_profile") and self.selected == APPROX_ID:
            return None  # Approximated is computed from the architecture: nothing to rerun or delete
        return True

    def action_rerun_profile(self) -> None:
        rec = self._selected_record()
        if rec is None:
            return
        s = rec.get("settings") or {}
        self._submit({"name": rec.get("name"), "method": rec.get("method"), "levels": s.get("levels"),
                      "data": s.get("data"), "batches": s.get("batches", 2), "int8": bool(s.get("int8")),
                      "metric": None if s.get("metric") in (None, "auto") else s.get("metric")})

    @app_work(group="loss-delete", description="delete loss profile")
    def _delete(self, record_id: str) -> None:
        self.app.workspace.delete_record(self.project_id, TABLE, record_id)
        post_result(self, LossProfileDeleted(record_id))

    @on(LossProfileDeleted)
    def _deleted(self, message: LossProfileDeleted) -> None:
        self.select_profile(APPROX_ID)
        self._load_records()

    def action_delete_profile(self) -> None:
        rec = self._selected_record()
        if rec is None:
            return

        def done(yes: Optional[bool]) -> None:
            if yes:
                self._delete(str(rec["id"]))

        self.app.push_screen(ConfirmDialog(f"Delete loss profile {rec.get('name')!r}?"), done)
