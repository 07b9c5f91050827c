"""Optimization section: the list of a project's optimizations and the settings of the selected one, with one pane
per concern (a list-and-settings shell; the panes render the typed record).

Left: the project's optimizations (`n` new, `C` copy as a new version, `d` delete). Right, for the selected
one, tabs (`m` Pruning, `l` Layers or Groups, `<`/`>` any):

* **Pruning** (this module): the target (average sparsity, a channel ratio or target), balance, pruning epochs and
  update frequency inputs (enter applies and re-evaluates; per-row overrides are kept), the estimate cards
  (summary, performance, FLOPs, params) and a per-row bar chart.
* **The structure's pane**, picked by the record's structure (:data:`STRUCTURE_PANES`): **Layers**
  (:mod:`~sparsify_tui.tui.optimization.layers`, unstructured) or **Groups**
  (:mod:`~sparsify_tui.tui.optimization.channel`). `enter` edits the row's value, `+`/`-` step it by 0.05, `x`
  releases the override, `i` shows the row's full record. The pane also gives the header, the cards' texts and
  the list line of its records.
* **Budget** (:mod:`~sparsify_tui.tui.optimization.budget`, channel optimizations): the budget search that chose the
  channel target and INT8 (metric against measured speedup, the budget line, the chosen point, every trial). `B`
  starts a search (a job in the list pane; `c` cancels it) that makes a new channel optimization.
* **Quant** (:mod:`~sparsify_tui.tui.optimization.int8`): the INT8 quantization modifier and the INT8 card (the
  accuracy-controlled search, apply's result next to the benchmark). `I` starts a search (a job in the list
  pane; `c` cancels it).
* **LR** and **Training** (:mod:`~sparsify_tui.tui.optimization.schedule`); `ctrl+s` applies the LR text, `u`
  takes the project's changed training settings.

`e` opens the Export dialog (recipe path, framework, preview, write). Estimates are labelled as such and
name their runtime: a dense runtime gets no speedup from unstructured sparsity. Keys: :mod:`sparsify_tui.tui.widgets.keys`.

**A new pane**: a :class:`~sparsify_tui.tui.optimization.pane.RecordPane` in its own module and one line in
:data:`PANES` (a budget-search card, say); **a new structure's pane**: a
:class:`~sparsify_tui.tui.optimization.pane.StructurePane` and one line in :data:`STRUCTURE_PANES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, Label, OptionList, Static, TabPane
from textual.widgets.option_list import Option

from sparsify_tui.text.optimization import CARDS
from sparsify_tui.tui.optimization.budget import BudgetPane, BudgetSearchDialog
from sparsify_tui.tui.optimization.channel import GroupsPane, loss_label
from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog, ExportDialog, SparsityDialog
from sparsify_tui.tui.optimization.int8 import Int8SearchDialog, QuantPane
from sparsify_tui.tui.optimization.layers import LayersPane
from sparsify_tui.tui.optimization.messages import (CreateDialogReady, ExportDialogReady, OptimizationChanged,
                                                    OptimizationsListed)
from sparsify_tui.tui.optimization.pane import PaneContext, RecordPane, ScheduleEdited, StructurePane
from sparsify_tui.tui.optimization.schedule import LrPane, TrainingPane, training_stale
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.charts import BarChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog, RecordDialog
from sparsify_tui.tui.widgets.inputs import FieldError, SectionField
from sparsify_tui.tui.widgets.jobs import JobProgress, SectionJobs
from sparsify_tui.tui.widgets.tables import FilterableTable
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.workers import app_work, post_result

if TYPE_CHECKING:
    from sparsify_tui.optimization.record import LayerRow, Optimization

STEP = 0.05
STRUCTURE_PANES: dict[str, type[StructurePane]] = {
    LayersPane.STRUCTURE: LayersPane,
    GroupsPane.STRUCTURE: GroupsPane,
}
"""Pruning structure -> the pane of its rows (one line per structure; unknown structures show as Layers)."""
PANES: tuple[type[RecordPane], ...] = (BudgetPane, QuantPane, LrPane, TrainingPane)
"""The tabs after the structure's pane, in order (one line per pane)."""
SEARCH_JOBS = {"int8_search": "INT8 search", "budget_search": "Budget search"}
"""The search jobs whose progress the section's job pane follows (job type -> what the notices call it)."""


def structure_pane(rec: Optional[Optimization]) -> type[StructurePane]:
    """The pane class of ``rec``'s structure."""
    return STRUCTURE_PANES.get(rec.settings.structure if rec is not None else "", LayersPane)


def estimate_texts(rec: Optimization) -> dict[str, str]:
    """Texts of the Summary / Performance / FLOPs / Params estimate cards (the structure's pane writes them)."""
    return structure_pane(rec).estimate_texts(rec)


class OptimizationSection(Widget):
    """Optimizations of one project: list, create, edit, estimates, export."""

    DEFAULT_CSS = """
    OptimizationSection { height: 1fr; }
    OptimizationSection #opt-left { width: 22; border-right: solid $primary-darken-2; }
    OptimizationSection #opt-left .title { text-style: bold; height: 1; padding: 0 1; }
    OptimizationSection #opt-list { height: 1fr; }
    OptimizationSection #opt-left .hint { color: $text-muted; height: auto; padding: 0 1; }
    OptimizationSection #opt-main { width: 1fr; }
    OptimizationSection #opt-header { height: auto; padding: 0 1; }  /* wraps at a word, never cut */
    OptimizationSection #opt-empty { padding: 1 2; color: $text-muted; }
    OptimizationSection #opt-tabs { height: 1fr; }
    OptimizationSection TabPane { padding: 0; }
    OptimizationSection .inputs { height: 1; padding: 0 1; }
    OptimizationSection .inputs Label { width: auto; padding: 0 1 0 0; }
    OptimizationSection .inputs Input { width: 8; margin-right: 1; }
    OptimizationSection .card { height: auto; padding: 0 1; }
    OptimizationSection .card-title { text-style: bold underline; height: 1; padding: 0 1; margin-top: 1; }
    OptimizationSection #layer-hint, OptimizationSection .hint { color: $text-muted; height: auto; padding: 0 1; }
    OptimizationSection #q-excluded { height: auto; max-height: 14; }
    OptimizationSection #lr-text { height: 7; }
    OptimizationSection #training-text { padding: 0 1; height: auto; }
    """

    BINDINGS = [
        keys.new("optimization", "optimization from the perf and loss profiles"),
        Binding("e", "export", "Export", id="optimization.export",
                tooltip="Export the recipe (.yaml) and integration code"),
        Binding("B", "budget_search", "Budget", id="optimization.budget_search", key_display="B",
                tooltip="Search the fastest model within an accuracy budget: channels + reconstruction, INT8 "
                        "optional, measured (a background job making a channel optimization)"),
        Binding("I", "int8_search", "INT8", id="optimization.int8_search", key_display="I",
                tooltip="Search the fastest INT8 config within an accuracy budget (a background job)"),
        Binding("C", "copy", "Copy", show=False, id="optimization.copy",
                tooltip="Copy the optimization as a new version", key_display="C"),
        keys.delete("optimization", "optimization"),
        Binding("u", "sync_training", "Update", id="optimization.sync_training",
                tooltip="Take the project's changed training settings (the epoch plan and LR schedule are rebuilt)"),
        *keys.tabs("optimization"),
        keys.focus_list("optimization", "optimizations"),
        keys.tab("optimization", "m", "tab-pruning", "Pruning", "Optimization: settings, estimates, sparsity chart"),
        keys.tab("optimization", "l", "tab-layers", "Layers", "Optimization: the per-layer editor table"),
        keys.inspect("optimization"),
        Binding("plus", "step(1)", "+0.05", show=False, id="optimization.layer_up",
                tooltip="Raise the selected layer's sparsity by 0.05 (kept as an override)"),
        Binding("minus", "step(-1)", "-0.05", show=False, id="optimization.layer_down",
                tooltip="Lower the selected layer's sparsity by 0.05 (kept as an override)"),
        Binding("x", "release", "Auto", show=False, id="optimization.layer_release",
                tooltip="Release the selected layer's override (back to the automatic value)"),
        Binding("ctrl+s", "apply_lr", "Apply LR", show=False, id="optimization.apply_lr",
                tooltip="Apply the edited learning-rate modifiers"),
        keys.cancel_job("optimization"),
        keys.compare("optimization", "Optimizations (versions) side by side: settings, layers, estimates, measured"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.records: list[Optimization] = []
        self.rec: Optional[Optimization] = None
        self._select_after: Optional[str] = None
        self._rows_tab: Optional[str] = None  # the structure tab to show once render_record's tabs are drawn
        self._quiet = False
        self.project_training: Optional[dict] = None  # the project's training settings now
        self.data_stamp: Any = None  # the project's change stamp read before the last list (SparsifyApp)
        self._options: list[tuple[str, str]] = []  # (id, text) of the list's options
        self._rendered: Any = None  # what render_record last drew: (record id, modified, project training)

    # ---------------------------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="opt-left", classes="list-pane"):
                yield Static("Optimizations", classes="title")
                yield OptionList(id="opt-list")
                yield Static("n new · C copy\ne export · d del\n= compare\nB budget · I INT8", classes="hint")
                yield SectionJobs(self.project_id, SEARCH_JOBS, section="optimization", id="opt-jobs")
            with Vertical(id="opt-main"):
                yield Static("", id="opt-header")
                yield Static("No optimization yet. Press [b]n[/b] to create one from the perf profile "
                             "(or FLOPS) and the loss profile (or Approximated), [b]B[/b] to search the fastest "
                             "model within an accuracy budget (measured), or [b]I[/b] for INT8 within a budget.",
                             id="opt-empty")
                # every pane is built when first shown (ViewTabs lazy; the tabs are hidden until there is a record):
                # _tab_built fills it
                with ViewTabs(id="opt-tabs", lazy=True, build_initial=False, on_build=self._tab_built):
                    with TabPane("Pruning (m)", id="tab-pruning"):
                        yield from self._compose_settings()
                    for pane in (*STRUCTURE_PANES.values(), *PANES):
                        with TabPane(pane.TITLE, id=pane.TAB_ID):
                            yield pane()

    def _compose_settings(self) -> ComposeResult:
        with VerticalScroll(id="pruning-scroll"):
            # one-line inputs sized to their content: nothing scrolls out of view when focused
            # section fields: tab stops the section keys work on; enter edits, enter again applies, escape reverts
            def field(fid: str, check) -> SectionField:
                return SectionField(id=fid, compact=True, check=check, error_id="pruning-error")

            with Horizontal(classes="inputs"):
                yield Label("Sparsity", id="lbl-sparsity")
                yield field("in-sparsity", self._check_target)
                yield Label("Balance")
                yield field("in-balance", self._check_balance)
            with Horizontal(classes="inputs"):
                yield Label("Pruning epochs")
                yield field("in-start", lambda text: self._check_epochs("pruning_start_epoch", text))
                yield Label("to")
                yield field("in-end", lambda text: self._check_epochs("pruning_end_epoch", text))
                yield Label("update every")
                yield field("in-update", lambda text: self._check_epochs("update_frequency", text))
            yield FieldError(id="pruning-error")
            yield Static("enter: edit, apply · escape: revert · balance 0 = time saved, 1 = loss", classes="hint")
            # the estimate cards, one under the other
            for key, title in CARDS.items():
                yield Static(title, classes="card-title", id=f"est-{key}-title")
                yield Static("", id=f"est-{key}-text", classes="card")
            yield BarChart(title="Sparsity per layer", unit="", x_label="sparsity", modes=("values",),
                           id="sparsity-chart")

    def on_mount(self) -> None:
        self._show_main(False)
        self._show_structure(LayersPane)
        self.load_records()

    def _show_main(self, has: bool) -> None:
        tabs = self.query_one("#opt-tabs", ViewTabs)
        tabs.display = has
        self.query_one("#opt-header").display = has
        self.query_one("#opt-empty").display = not has
        if has:
            tabs.build()  # the tab shown (the first time: the Pruning tab)

    def _built(self, tab: str) -> bool:
        return self.query_one("#opt-tabs", ViewTabs).built(tab)

    def _tab_built(self, tab: str) -> None:
        """A tab's widgets are mounted (first shown): it shows the selected record."""
        rec = self.rec
        if rec is None or rec.estimates is None:
            return
        pane = structure_pane(rec)
        if tab == "tab-pruning":
            self._render_settings(rec, pane)
            return
        shown = next((p for p in (pane, *PANES) if p.TAB_ID == tab), None)
        if shown is not None:
            self.query_one(shown).show(rec, PaneContext(project_training=self.project_training))

    @property
    def ws(self):
        return self.app.workspace

    # ---------------------------------------------------------------------------------- workers
    def reload_data(self) -> None:
        """The project changed on disk (the app's change-stamp watch: an apply, a benchmark, a search, saved
        settings, an edit from the CLI): read the optimizations and the training settings again."""
        self.load_records()

    @app_work(group="opt-load", description="list optimizations")
    def load_records(self) -> None:
        from sparsify_tui.services.optimizations import list_optimizations

        self.data_stamp = self.ws.project_stamp(self.project_id)
        records = list_optimizations(self.ws, self.project_id)
        post_result(self, OptimizationsListed(records, (self.ws.get_project(self.project_id) or {}).get("training")))

    @on(OptimizationsListed)
    def _listed(self, message: OptimizationsListed) -> None:
        self.records = sorted(message.records, key=lambda r: str(r.created or ""))
        self.project_training = message.project_training
        self._fill_list()

    # every edit is one core call on the stored record; the newest edit wins (exclusive group)
    @app_work(group="opt-action", description="create optimization")
    def _create(self, values: dict) -> None:
        from sparsify_tui.services import optimizations as core

        pane = STRUCTURE_PANES[values["structure"]]
        settings, sparsity, loss = pane.create_args(self.ws, self.project_id, values)
        post_result(self, OptimizationChanged(core.create_optimization(
            self.ws, self.project_id, values["name"], perf=values["perf"], loss=loss,
            sparsity=sparsity, balance=values["balance"], quantize=values["quantize"], settings=settings)))

    @app_work(group="opt-action", description="copy optimization")
    def _copy(self, rec_id: str) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.copy_optimization(self.ws, self.project_id, rec_id)))

    # Edits are not exclusive: each one's result is shown (a cancelled earlier edit's result used to be dropped,
    # leaving its change stored but not shown); the service applies each as one locked read-modify-write.
    @app_work(group="opt-action", description="re-evaluate optimization", exclusive=False)
    def _reevaluate(self, rec_id: str, **settings: float) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.reevaluate(self.ws, self.project_id, rec_id, **settings)))

    @app_work(group="opt-action", description="update optimization schedule", exclusive=False)
    def _update_schedule(self, rec_id: str, **changes: Any) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.update_schedule(self.ws, self.project_id, rec_id, **changes)))

    @app_work(group="opt-action", description="set layer sparsity", exclusive=False)
    def _set_override(self, rec_id: str, weight_name: str, sparsity: Optional[float]) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.set_override(self.ws, self.project_id, rec_id, weight_name,
                                                                sparsity)))

    @app_work(group="opt-action", description="delete optimization")
    def _delete(self, rec_id: str) -> None:
        from sparsify_tui.services import optimizations as core

        core.delete_optimization(self.ws, self.project_id, rec_id)
        post_result(self, OptimizationChanged(None))

    @on(OptimizationChanged)
    def _changed(self, message: OptimizationChanged) -> None:
        result = message.record
        if result is not None and result.id:
            self._select_after = result.id
            self.rec = result
            self.render_record()
        self.load_records()

    @on(ScheduleEdited)
    def _schedule_edited(self, message: ScheduleEdited) -> None:
        message.stop()
        if self.rec is not None:
            self._update_schedule(self.rec.id, **message.changes)

    # ---------------------------------------------------------------------------------- list
    def _fill_list(self) -> None:
        """The list from :attr:`records` (rebuilt only when an option's text changed) and the selected record
        (drawn again only when it, or the project's training settings, changed since it was drawn)."""
        from sparsify_tui.formatting import safe_line

        ol = self.query_one("#opt-list", OptionList)
        options = [(r.id, f"{escape(safe_line(r.name))}\n{structure_pane(r).list_text(r)}") for r in self.records]
        if options != self._options:
            self._options = options
            ol.clear_options()
            ol.add_options([Option(text, id=rid) for rid, text in options])
        if not self.records:
            self.rec = self._rendered = None
            self._show_main(False)
            return
        want = self._select_after or (self.rec.id if self.rec is not None else None) or self.records[-1].id
        idx = next((i for i, r in enumerate(self.records) if r.id == want), len(self.records) - 1)
        self._select_after = None
        if ol.highlighted != idx:
            ol.highlighted = idx
        self.rec = self.records[idx]
        if self._render_key(self.rec) != self._rendered:
            self.render_record()

    def _render_key(self, rec: Optional[Optimization]) -> Any:
        return (rec.id, rec.extra.get("modified"), repr(self.project_training)) if rec is not None else None

    @on(OptionList.OptionSelected, "#opt-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """enter on the list: into the optimization's current tab, so its keys work at once."""
        if self.rec is not None:
            self.action_view_tab(self.query_one("#opt-tabs", ViewTabs).active or "tab-pruning")

    @on(OptionList.OptionHighlighted, "#opt-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        rec = next((r for r in self.records if r.id == event.option.id), None)
        if rec is not None and (self.rec is None or rec.id != self.rec.id):
            self.rec = rec
            self.render_record()

    def action_compare(self) -> None:
        """`=`: optimizations side by side (:mod:`sparsify_tui.tui.optimization.compare_screen`)."""
        from sparsify_tui.tui.optimization.compare_screen import OptimizationCompareScreen

        self.app.push_screen(OptimizationCompareScreen(self.project_id, self.rec.id if self.rec is not None else None))

    # ---------------------------------------------------------------------------------- render
    def render_record(self) -> None:
        rec = self.rec
        self._rendered = self._render_key(rec)
        if rec is None:
            self._show_main(False)
            return
        if rec.estimates is None:
            self._show_main(False)
            self.query_one("#opt-empty", Static).update(
                f"{escape(str(rec.name))}: this record has no optimizer settings (made by another "
                f"tool). Press [b]n[/b] to create an optimization.")
            return
        self._show_main(True)
        self._quiet = True
        try:
            pane = structure_pane(rec)
            self.query_one("#opt-header", Static).update(pane.header_text(rec))
            if self._built("tab-pruning"):
                self._render_settings(rec, pane)
            # on the rows of the record before: the rows of this one (Layers -> Groups), once the tab is shown
            self._rows_tab = pane.TAB_ID if self._layers_active() else None
            self._show_structure(pane)
            context = PaneContext(project_training=self.project_training)
            for shown in (pane, *PANES):  # a tab not built yet shows the record when it is (_tab_built)
                if self._built(shown.TAB_ID):
                    self.query_one(shown).show(rec, context)
            self.refresh_bindings()
        finally:
            self.call_after_refresh(self._unquiet)
            self.call_after_refresh(self._keep_focus)

    def _keep_focus(self) -> None:
        """The focused widget was hidden (the other structure's tab) or removed: the focus goes to the active tab's
        widget, else to the list, never nowhere (the section's keys then did nothing until tab)."""
        if getattr(self.app, "section", None) != "optimization" or self.screen is not self.app.screen:
            return
        rows_tab, self._rows_tab = self._rows_tab, None
        tabs = self.query_one("#opt-tabs", ViewTabs)
        if rows_tab is not None and tabs.active != rows_tab:
            had_rows = self.screen.focused is None or any(
                isinstance(a, StructurePane) for a in self.screen.focused.ancestors_with_self)
            tabs.active = rows_tab
            if had_rows:
                self.action_view_tab(rows_tab)
            return
        focused = self.screen.focused
        if focused is not None and focused.region.area > 0:
            return
        tab = tabs.active

        def refocus() -> None:
            focus = {p.TAB_ID: p.FOCUS for p in (*STRUCTURE_PANES.values(), *PANES)}.get(tab)
            target = self.query(focus) if focus and self.rec is not None else None
            (target.first() if target else self.query_one("#opt-list")).focus()

        tabs.after_build(tab, refocus)

    def _render_settings(self, rec: Optimization, pane: type[StructurePane]) -> None:
        """The Pruning tab: the inputs, the estimate cards, the per-row chart."""
        st, ep = rec.settings, rec.epochs
        target_field, label = pane.target(rec)
        self.query_one("#lbl-sparsity", Label).update(label)
        for wid, val in (("#in-sparsity", f"{getattr(st, target_field):.2f}"), ("#in-balance", f"{st.balance:.2f}"),
                         ("#in-start", f"{ep.pruning_start_epoch:g}"),
                         ("#in-end", f"{ep.pruning_end_epoch:g}"), ("#in-update", f"{ep.update_frequency:g}")):
            inp = self.query_one(wid, SectionField)
            if not inp.editing:
                inp.value = val
        for key, text in pane.estimate_texts(rec).items():
            self.query_one(f"#est-{key}-text", Static).update(text)
        self.query_one("#sparsity-chart", BarChart).set_data(
            [l.node_id or l.weight_name for l in rec.layers], [float(l.sparsity or 0) for l in rec.layers],
            title=pane.chart_title(rec))

    def _unquiet(self) -> None:
        self._quiet = False

    def _free_name(self, prefix: str) -> str:
        names = {r.name for r in self.records}
        k = 1
        while f"{prefix}-{k}" in names:
            k += 1
        return f"{prefix}-{k}"

    def action_int8_search(self) -> None:
        """`I`: the INT8 search dialog; it submits the job (a refused argument is said in it, the dialog stays)."""
        self.app.push_screen(Int8SearchDialog(self.project_id, self._free_name("int8")),
                             lambda job: self._search_started("int8_search", job))

    def action_budget_search(self) -> None:
        """`B`: the budget search dialog (its data file defaults to the selected optimization's search's); it
        submits the job (a refused argument is said in it, the dialog stays open with what was typed)."""
        data = (self.rec.search.data if self.rec is not None and self.rec.search is not None else None) or ""
        self.app.push_screen(BudgetSearchDialog(self.project_id, self._free_name("budget"), data),
                             lambda job: self._search_started("budget_search", job))

    @on(JobProgress.Finished)
    def _search_job_finished(self, event: JobProgress.Finished) -> None:
        job = event.job or {}
        if job.get("type") not in SEARCH_JOBS:
            return
        event.stop()
        if job.get("status") == "completed":
            self._select_after = (job.get("result") or {}).get("optimization")
            what = SEARCH_JOBS[job.get("type")]
            self.app.notify(f"{what} finished: {(job.get('result') or {}).get('status')}.", timeout=5)
        self.load_records()

    def _search_started(self, job_type: str, job: Optional[dict]) -> None:
        """A search dialog submitted ``job`` (None: closed without searching): its progress shows under the list."""
        if job is None:
            return
        self.query_one(SectionJobs).follow(job)
        if self.rec is not None and job_type == "int8_search":
            self.query_one("#opt-tabs", ViewTabs).active = "tab-quant"
        what = SEARCH_JOBS[job_type]
        self.app.notify(f"{what} started (job {job.get('id')}): its progress shows under the list (c "
                        "cancels); the optimization appears when it ends. It keeps running if you quit.")

    def action_cancel_job(self) -> None:
        self.query_one(SectionJobs).cancel_newest()

    def _show_structure(self, shown: type[StructurePane]) -> None:
        """The tab of the record's structure pane is shown, the other structures' hidden; so are the panes not
        shown for this record (:meth:`RecordPane.shown_for`)."""
        tabs = self.query_one("#opt-tabs", ViewTabs)
        for pane in STRUCTURE_PANES.values():
            (tabs.show_tab if pane is shown else tabs.hide_tab)(pane.TAB_ID)
        for pane in PANES:
            (tabs.show_tab if pane.shown_for(self.rec) else tabs.hide_tab)(pane.TAB_ID)

    @on(ViewTabs.TabActivated, "#opt-tabs")
    def _tab_changed(self) -> None:
        self.refresh_bindings()

    # ---------------------------------------------------------------------------------- edits
    # the checks of the Pruning tab's fields (in place, under the fields): the core's own rules on the value typed
    def _number(self, label: str, text: str) -> tuple[Optional[float], Optional[str]]:
        try:
            value = float(text)
        except ValueError:
            return None, f"{label}: {text.strip()!r} is not a number: type one, e.g. 0.5 (escape puts it back)"
        if value != value or value in (float("inf"), float("-inf")):
            return None, f"{label}: {text.strip()!r} is not a number: type one, e.g. 0.5 (escape puts it back)"
        return value, None

    def _check_setting(self, field: str, label: str, text: str) -> Optional[str]:
        from sparsify_tui.errors import SparsifyError

        value, problem = self._number(label, text)
        if problem or self.rec is None:
            return problem
        try:
            self.rec.settings.with_changes(**{field: value})
        except SparsifyError as err:
            return f"{label}: {str(err).replace(': fix the optimization setting', '')} (escape puts it back)"
        return None

    def _check_target(self, text: str) -> Optional[str]:
        if self.rec is None:
            return None
        field, label = structure_pane(self.rec).target(self.rec)
        return self._check_setting(field, label, text)

    def _check_balance(self, text: str) -> Optional[str]:
        return self._check_setting("balance", "Balance", text)

    def _check_epochs(self, key: str, text: str) -> Optional[str]:
        from sparsify_tui.errors import SparsifyError
        from sparsify_tui.optimization.core import changed_epochs

        label = {"pruning_start_epoch": "Pruning start", "pruning_end_epoch": "Pruning end",
                 "update_frequency": "Update every"}[key]
        value, problem = self._number(label, text)
        if problem or self.rec is None:
            return problem
        try:
            changed_epochs(self.rec, {key: value})
        except SparsifyError as err:
            return f"{label}: {err} (escape puts it back)"
        return None

    @on(Input.Submitted, "#in-sparsity, #in-balance")
    def _settings_submitted(self) -> None:
        if self.rec is None:
            return
        sp = float(self.query_one("#in-sparsity", Input).value)  # checked by the field
        bal = float(self.query_one("#in-balance", Input).value)
        field, _label = structure_pane(self.rec).target(self.rec)
        self._reevaluate(self.rec.id, balance=bal, **{field: sp})

    @on(Input.Submitted, "#in-start, #in-end, #in-update")
    def _epochs_submitted(self) -> None:
        if self.rec is None:
            return
        ep = {"pruning_start_epoch": float(self.query_one("#in-start", Input).value),  # checked by the field
              "pruning_end_epoch": float(self.query_one("#in-end", Input).value),
              "update_frequency": float(self.query_one("#in-update", Input).value)}
        self._update_schedule(self.rec.id, epochs=ep)

    def action_apply_lr(self) -> None:
        if self.rec is not None and self._built(LrPane.TAB_ID):  # never shown: nothing edited
            self.query_one(LrPane).apply_text()  # a parse error is said under the text

    def _rows_pane(self) -> StructurePane:
        return self.query_one(structure_pane(self.rec))

    def _current_layer(self) -> Optional[LayerRow]:
        return self._rows_pane().current_layer() if self.rec is not None else None

    def _layers_active(self) -> bool:
        return self.query_one("#opt-tabs", ViewTabs).active in {p.TAB_ID for p in STRUCTURE_PANES.values()}

    def action_step(self, direction: int) -> None:
        layer = self._current_layer() if self._layers_active() else None
        if layer is None:
            return
        new = round(min(0.99, max(0.0, float(layer.sparsity or 0) + direction * STEP)), 4)
        self._set_override(self.rec.id, layer.weight_name, new)

    def action_release(self) -> None:
        layer = self._current_layer() if self._layers_active() else None
        if layer is None:
            return
        self._set_override(self.rec.id, layer.weight_name, None)

    @on(FilterableTable.RowChosen, ", ".join(f"#{p.TABLE_ID}" for p in STRUCTURE_PANES.values()))
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        layer = self.rec.layer(event.row.get("layer")) if self.rec is not None else None
        if layer is None:
            return

        def done(text: Optional[str]) -> None:
            if text is None or self.rec is None:
                return
            value = float(text) if text else None
            self._set_override(self.rec.id, layer.weight_name, value)

        self.app.push_screen(SparsityDialog(layer.node_id or layer.weight_name, float(layer.sparsity or 0)), done)

    # ---------------------------------------------------------------------------------- actions
    def action_focus_list(self) -> None:
        self.app.remove_class("-list-collapsed")  # `p` shows the list again if `z` hid it
        self.query_one("#opt-list").focus()

    def action_new(self) -> None:
        self.app.hold_keys()  # the name typed before the dialog shows goes into it
        self._open_create()

    @app_work(group="opt-dialog", description="list profiles for a new optimization")
    def _open_create(self) -> None:
        from sparsify_tui.services.profiles import is_calibrated, loss_structure

        def newest_first(table: str) -> list:
            done = [r for r in self.ws.list_records(self.project_id, table)
                    if r.get("status", "completed") == "completed"]
            return sorted(done, key=lambda r: str(r.get("created") or ""), reverse=True)

        perf_records = newest_first("perf_profiles")
        perf_opts = [(f"{r.get('name', r.get('id'))} (measured{', channel-calibrated' if is_calibrated(r) else ''})",
                      r.get("id")) for r in perf_records]
        calibrated = next((r.get("id") for r in perf_records if is_calibrated(r)), None)
        perf_opts.append(("FLOPS (time ∝ FLOPs)", "flops"))
        loss_records = newest_first("loss_profiles")
        loss_opts = [(f"{r.get('name', r.get('id'))} ({r.get('method', 'measured')}{loss_label(loss_structure(r))})",
                      r.get("id")) for r in loss_records]
        loss_opts.append(("Approximated", "approximated"))
        structures = {r.get("id"): loss_structure(r) for r in loss_records}
        names = {r.name for r in self.records}
        k = 1
        while f"opt{k}" in names:
            k += 1
        post_result(self, CreateDialogReady(perf_opts, loss_opts, f"opt{k}", calibrated, structures))

    @on(CreateDialogReady)
    def _show_create(self, message: CreateDialogReady) -> None:
        def done(values: Optional[dict]) -> None:
            if values:
                self._create(values)

        choices = [c for pane in STRUCTURE_PANES.values() for c in pane.CREATE_CHOICES]
        self.app.show_dialog(CreateOptimizationDialog(message.perf_options, message.loss_options,
                                                      message.default_name, message.calibrated_perf,
                                                      choices=choices, loss_structures=message.loss_structures), done)

    def action_copy(self) -> None:
        if self.rec is not None:
            self._copy(self.rec.id)

    def action_delete(self) -> None:
        if self.rec is None:
            return
        rec = self.rec

        def done(ok: Optional[bool]) -> None:
            if ok:
                self.rec = None
                self._delete(rec.id)

        self.app.push_screen(ConfirmDialog(f"Delete optimization {rec.name!r}?"), done)

    def action_export(self) -> None:
        if self.rec is None:
            self.app.notify("Create an optimization first (n).", severity="warning")
            return
        self.app.hold_keys()
        self._open_export(self.rec.id, self.rec.name)

    @app_work(group="opt-dialog", description="default export path")
    def _open_export(self, rec_id: str, name: str) -> None:
        from sparsify_tui.services.optimizations import default_recipe_path

        post_result(self, ExportDialogReady(rec_id, str(default_recipe_path(self.ws, self.project_id, name))))

    @on(ExportDialogReady)
    def _show_export(self, message: ExportDialogReady) -> None:
        self.app.show_dialog(ExportDialog(self.project_id, message.record_id, message.default_path))

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("export", "copy", "delete", "cycle_tab", "view_tab", "inspect") and self.rec is None:
            return None
        if action in ("step", "release") and not (self.rec is not None and self._layers_active()):
            return False
        if action == "cancel_job":
            return bool(self.query_one(SectionJobs).active) if self.is_mounted else False
        if action == "compare" and not self.records:
            return None
        if action == "sync_training":  # shown only when the project's training settings changed
            return self.rec is not None and training_stale(self.rec, self.project_training)
        return True

    def _tabs(self) -> list[str]:
        """The tabs shown: the record's structure pane, not the other structures'."""
        shown = structure_pane(self.rec).TAB_ID
        hidden = {p.TAB_ID for p in STRUCTURE_PANES.values()} - {shown}
        hidden |= {p.TAB_ID for p in PANES if not p.shown_for(self.rec)}
        tabs = ("tab-pruning", *(p.TAB_ID for p in STRUCTURE_PANES.values()), *(p.TAB_ID for p in PANES))
        return [t for t in tabs if t not in hidden]

    def action_view_tab(self, tab: str) -> None:
        """m/l: the Pruning tab or the structure's pane (and its table or inputs take the focus)."""
        if self.rec is None:
            return
        structure = {p.TAB_ID: p for p in STRUCTURE_PANES.values()}
        if tab in structure:
            tab = structure_pane(self.rec).TAB_ID
        tabs = self.query_one("#opt-tabs", ViewTabs)
        tabs.active = tab
        focus = {p.TAB_ID: p.FOCUS for p in (*STRUCTURE_PANES.values(), *PANES)}
        tabs.after_build(tab, lambda: self.query_one(focus.get(tab, "#in-sparsity")).focus())

    def action_cycle_tab(self, step: int) -> None:
        if self.rec is not None:
            self.action_view_tab(keys.cycle(self._tabs(), self.query_one("#opt-tabs", ViewTabs).active, step))

    def action_inspect(self) -> None:
        """`i`: the full record of the structure pane's row under the cursor."""
        if self.rec is None:
            return
        if not self._layers_active():
            self.action_view_tab(LayersPane.TAB_ID)
            self.notify("Pick a row, then i shows its record (enter edits its sparsity).", timeout=3)
            return
        layer = self._current_layer()
        if layer is not None:
            pane = structure_pane(self.rec)
            self.app.push_screen(RecordDialog(f"{layer.node_id or layer.weight_name} · {layer.op_type}",
                                              pane.layer_record(self.rec, layer)))

    def action_sync_training(self) -> None:
        """`u`: take the project's changed training settings (asks first: edits to the epochs and LR are replaced)."""
        if self.rec is None or not training_stale(self.rec, self.project_training):
            return
        rec_id, p = self.rec.id, self.project_training or {}

        def answer(yes: Optional[bool]) -> None:
            if yes:
                self._sync_training(rec_id)

        self.app.push_screen(ConfirmDialog(
            f"Take the project's training settings ({p.get('optimizer')}, {p.get('epochs')} epochs, LR "
            f"{p.get('init_lr')} → {p.get('final_lr')}) into {self.rec.name!r}? Its epoch plan and LR schedule "
            "are rebuilt from them (edits to those are replaced).", confirm_label="Update", title="Update training"),
            answer)

    @app_work(group="opt-action", description="update training settings", exclusive=False)
    def _sync_training(self, rec_id: str) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.sync_training(self.ws, self.project_id, rec_id)))
