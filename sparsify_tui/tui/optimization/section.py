"""Optimization section: per-layer pruning + INT8 configurations, their estimates, and export.

Left: the project's optimizations (`n` new, `C` copy as a new version, `d` delete). Right, for the selected
one, tabs (`m` Pruning, `l` Layers, `<`/`>` any):

* **Pruning**: average sparsity, balance, pruning epochs and update frequency inputs (enter applies and
  re-evaluates; per-layer overrides are kept), the estimate cards (summary, performance, FLOPs, params) and
  a per-layer sparsity bar chart.
* **Layers**: the per-layer editor table (weight name and node id, sparsity, recoverability, estimated
  speedup, estimated and baseline ms, loss and perf sensitivity). `enter` edits the row's sparsity, `+`/`-`
  step it by 0.05, `x` releases the override, `i` shows the layer's full record.
* **Groups** (channel optimizations, instead of Layers; `l` too): the per-group ratios, edited the same way.
* **Quant**: the INT8 quantization modifier (``[x]``/``[ ]`` on/off, layers kept FP32, ordered by INT8
  sensitivity), then the INT8 card (:mod:`sparsify_tui.tui.optimization.int8`): the accuracy-controlled
  search's budget, metric, trials, chart, per-layer states, and apply's result next to the benchmark. `I`
  starts a search (a job in the list pane; `c` cancels it).
* **LR**: the learning-rate schedule chart and its modifiers as editable text (`ctrl+s` applies).
* **Training**: the optimization's copy of the project's training settings and its epoch plan. When the
  project's settings changed since (section 6), it says so and `u` takes them again.

`e` opens the Export dialog (recipe path, framework, preview, write). Estimates are labelled as such and
name their runtime: onnxruntime gets no speedup from unstructured sparsity. Keys: :mod:`sparsify_tui.tui.widgets.keys`.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import (
    Input, Label, OptionList, SelectionList, Static, TabbedContent, TabPane, TextArea,
)
from textual.widgets.option_list import Option

from sparsify_tui.formatting import format_count, format_fixed
from sparsify_tui.tui.optimization import channel as ch
from sparsify_tui.tui.optimization.dialogs import CreateOptimizationDialog, ExportDialog, SparsityDialog
from sparsify_tui.tui.optimization.int8 import Int8Card, Int8SearchDialog, latest_benchmark
from sparsify_tui.tui.optimization.messages import (CreateDialogReady, ExportDialogReady, Int8BenchmarkFound,
                                                    Int8SearchSubmitted, OptimizationChanged, OptimizationsListed)
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.jobs import JobProgress, SectionJobs
from sparsify_tui.tui.widgets.charts import BarChart, LineChart
from sparsify_tui.tui.widgets.dialogs import ConfirmDialog, RecordDialog
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.widgets.toggles import TextCheckbox, TextSelectionList
from sparsify_tui.tui.workers import app_work, post_result

TABLE = "optimizations"
STEP = 0.05
TABS = ("tab-pruning", "tab-layers", "tab-groups", "tab-quant", "tab-lr", "tab-training")


def _count(x: Any) -> str:
    return format_count(x, sep="", none="n/a")


def header_text(rec: dict) -> str:
    if ch.is_channel(rec):
        return ch.header_text(rec)
    est, st = rec.get("estimates") or {}, rec.get("settings") or {}
    return (f"[b]{escape(rec['name'])}[/b] · perf {escape(str(rec.get('perf_profile_name')))} · "
            f"loss {escape(str(rec.get('loss_profile_name')))}\n"
            f"sparsity {est.get('avg_sparsity', 0):.3f}/{st.get('sparsity', 0):.2f} · "
            f"est. {format_fixed(est.get('sparse_speedup'))}× sparse CPU, {format_fixed(est.get('ort_speedup'))}× ORT")


def estimate_texts(rec: dict) -> dict[str, str]:
    """Texts of the Summary / Performance / FLOPs / Params estimate cards."""
    if ch.is_channel(rec):
        return ch.estimate_texts(rec)
    from sparsify_tui.optimization.estimates import recovery_text  # (imports numpy: not at start-up)

    est, st = rec.get("estimates") or {}, rec.get("settings") or {}
    layers = rec.get("layers") or []
    pruned = sum(1 for l in layers if l.get("sparsity"))
    warn = "".join(f"\n[b yellow]warning:[/] {escape(w)}" for w in rec.get("warnings") or [])
    q = rec.get("quantization") or {}
    excluded = set(q.get("excluded") or [])
    fp32 = sum(1 for l in layers if l.get("node_id") in excluded)  # an INT8 search also keeps nodes between layers
    fp32_text = f"{fp32} layers FP32" + (f" ({len(excluded)} nodes)" if len(excluded) != fp32 else "")
    summary = (f"Pruned layers {pruned} of {len(layers)}, overrides {len(rec.get('overrides') or {})}\n"
               f"Avg sparsity {est.get('avg_sparsity', 0):.3f} (params-weighted; target {st.get('sparsity', 0):.2f})\n"
               f"Est. recovery {escape(recovery_text(est.get('est_recovery'), rec.get('loss_profile')))}\n"
               f"Quantization {'INT8, ' + fp32_text if q.get('enabled') else 'off'}"
               + warn)
    units = "ms" if est.get("baseline_ms") is not None else "relative"
    perf = (f"[b]Estimates[/b] ({escape(est.get('time_units', ''))})\n"
            f"Baseline {format_fixed(est.get('baseline_ms'), '.3f')} ms/batch (measured)\n"
            f"Sparse-kernel CPU runtime: {format_fixed(est.get('sparse_ms'), '.3f')} {units if est.get('sparse_ms') else ''} "
            f"· {format_fixed(est.get('sparse_speedup'))}× (est.)\n"
            f"onnxruntime: {format_fixed(est.get('ort_ms'), '.3f')} · {format_fixed(est.get('ort_speedup'))}× (est.; "
            f"no gain from sparsity, INT8 {'measured' if est.get('int8_measured') else 'not measured'})")
    flops = (f"FLOPs baseline {_count(est.get('flops'))}\nFLOPs pruned {_count(est.get('flops_pruned'))}\n"
             f"Reduction {format_fixed(est.get('flops_reduction'))}× (est.)")
    params = (f"Params {_count(est.get('params'))}, nonzero after pruning {_count(est.get('params_nonzero'))}\n"
              f"Compression {format_fixed(est.get('params_compression'))}× (est.)\n"
              f"Size {format_fixed(est.get('size_mb_fp32'), '.2f')} MB FP32 → ~{format_fixed(est.get('est_size_mb'), '.2f')} MB "
              f"nonzero weights{' INT8' if q.get('enabled') else ''}")
    return {"summary": summary, "performance": perf, "flops": flops, "params": params}


def layer_rows(rec: dict) -> list[dict]:
    """Rows of the per-layer editor table."""
    rows = []
    for i, l in enumerate(rec.get("layers") or []):
        note = "override" if l.get("override") else (l.get("reason") or "")
        rows.append({
            "_key": l["weight_name"], "index": i, "layer": l["weight_name"], "node": l.get("node_id") or "",
            "op": l.get("op_type"),
            "sparsity": float(l.get("sparsity") or 0.0), "recoverability": l.get("recoverability"),
            "speedup": l.get("est_speedup"), "est_ms": l.get("est_ms"), "base_ms": l.get("time_curve", [None])[0],
            "loss": l.get("loss_sensitivity"), "perf": l.get("perf_sensitivity"), "note": note,
        })
    return rows


TRAINING_KEYS = ("optimizer", "epochs", "init_lr", "final_lr")


def training_stale(rec: dict, project_training: Optional[dict]) -> bool:
    """The project's training settings differ from the copy the optimization keeps."""
    if not project_training:
        return False
    own = rec.get("training") or {}
    return any(str(own.get(k)) != str(project_training.get(k)) for k in TRAINING_KEYS if k in project_training)


def training_text(rec: dict, project_training: Optional[dict] = None) -> str:
    t, ep, q = rec.get("training") or {}, rec.get("epochs") or {}, rec.get("quantization") or {}
    lines = [
        "[b]Training settings[/b] (this optimization's copy of the project's, section 6)",
        f"Optimizer {t.get('optimizer', '?')} · epochs {t.get('epochs', '?')} · LR {t.get('init_lr', '?')} → "
        f"{t.get('final_lr', '?')}",
    ]
    if training_stale(rec, project_training):
        p = project_training or {}
        lines.append(f"[b reverse] ! [/] [b]The project's settings changed since: {p.get('optimizer', '?')} · epochs "
                     f"{p.get('epochs', '?')} · LR {p.get('init_lr', '?')} → {p.get('final_lr', '?')}.[/b] "
                     "Press [b]u[/b] to take them (the epoch plan and LR schedule are rebuilt).")
    lines += [
        "",
        "[b]Recipe epochs[/b]",
        f"Stabilization 0 → {ep.get('pruning_start_epoch')} ({ep.get('stabilization_epochs')} epochs)",
        f"Pruning {ep.get('pruning_start_epoch')} → {ep.get('pruning_end_epoch')} "
        f"({ep.get('pruning_epochs')} epochs, GMP cubic, update every {ep.get('update_frequency')}, "
        f"init sparsity {ep.get('init_sparsity')})",
        f"Fine-tuning {ep.get('pruning_end_epoch')} → {ep.get('total_epochs')} ({ep.get('fine_tune_epochs')} epochs)",
    ]
    if q.get("enabled"):
        lines.append(f"INT8 QAT from {q.get('start_epoch')} (observers off at "
                     f"{q.get('disable_quantization_observer_epoch')})")
    lines.append(f"Total {ep.get('total_epochs')} epochs")
    return "\n".join(lines)


def lr_series(rec: dict, points: int = 120) -> tuple[list[float], list[float]]:
    from sparsify_tui.optimization.schedule import lr_at

    total = float((rec.get("epochs") or {}).get("total_epochs") or 1)
    xs = [total * i / (points - 1) for i in range(points)]
    init = (rec.get("training") or {}).get("init_lr")
    ys = [lr_at(x, rec.get("lr_modifiers") or [], init) or 0.0 for x in xs]
    return xs, ys


LAYER_COLUMNS = [
    Column("layer", "Layer (weight)", filter=True, pin=True),
    Column("sparsity", "Sparsity", numeric=True, fmt=lambda v: f"{v:.3f}"),
    Column("recoverability", "Recov.", numeric=True, fmt=lambda v: format_fixed(v)),
    Column("speedup", "Speedup*", numeric=True, fmt=lambda v: format_fixed(v) + "×" if v else ""),
    Column("est_ms", "Est. ms*", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("base_ms", "Base ms", numeric=True, fmt=lambda v: format_fixed(v, ".4g")),
    Column("loss", "Loss sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("perf", "Perf sens", numeric=True, fmt=lambda v: format_fixed(v, ".3f")),
    Column("op", "Op", filter=True),
    Column("node", "Node id", filter=True),
    Column("note", "Note", filter=True),
]


def layer_record(rec: dict, layer: dict) -> list:
    """Every field of one layer of an optimization for RecordDialog."""
    units = "ms" if (rec.get("estimates") or {}).get("baseline_ms") is not None else "relative"
    curve = layer.get("time_curve") or [None]
    return [
        ("Weight", layer.get("weight_name")), ("Node id", layer.get("node_id")), ("Op type", layer.get("op_type")),
        ("Weight shape", layer.get("weight_shape")), ("Params", layer.get("params")), ("FLOPs", layer.get("flops")),
        ("Sparsity", layer.get("sparsity")), ("Override", layer.get("override")),
        ("Why (dense or capped)", layer.get("reason") or layer.get("excluded")),
        ("Recoverability (0-1)", layer.get("recoverability")),
        (f"Base time ({units}, measured, scaled to the median)", curve[0]),
        (f"Est. time at its sparsity ({units}, sparse-kernel runtime)", layer.get("est_ms")),
        ("Est. speedup (sparse-kernel runtime)", layer.get("est_speedup")),
        ("Loss sensitivity (share of the model's at 0.9)", layer.get("loss_sensitivity")),
        ("Perf sensitivity (share of the time saved at 0.9)", layer.get("perf_sensitivity")),
        ("INT8 sensitivity", layer.get("int8_sensitivity")), ("INT8 time (ms, measured)", layer.get("int8_time_ms")),
    ]


class OptimizationSection(Widget):
    """Optimizations of one project: list, create, edit, estimates, export."""

    DEFAULT_CSS = """
    OptimizationSection { height: 1fr; }
    OptimizationSection #opt-left { width: 22; border-right: solid $primary-darken-2; }
    OptimizationSection #opt-left .title { text-style: bold; height: 1; padding: 0 1; }
    OptimizationSection #opt-list { height: 1fr; }
    OptimizationSection #opt-left .hint { color: $text-muted; height: auto; padding: 0 1; }
    OptimizationSection #opt-main { width: 1fr; }
    OptimizationSection #opt-header { height: 2; padding: 0 1; }
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
        Binding("C", "copy", "Copy", id="optimization.copy", tooltip="Copy the optimization as a new version",
                key_display="C"),
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
        Binding("I", "int8_search", "INT8 search", show=False, id="optimization.int8_search", key_display="I",
                tooltip="Search the fastest INT8 config within an accuracy budget (a background job)"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.records: list[dict] = []
        self.rec: Optional[dict] = None
        self._select_after: Optional[str] = None
        self._quiet = False
        self.project_training: Optional[dict] = None  # the project's training settings now

    # ---------------------------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="opt-left"):
                yield Static("Optimizations", classes="title")
                yield OptionList(id="opt-list")
                yield Static("n new · C copy\ne export · d del\n= compare · I INT8", classes="hint")
                yield SectionJobs(self.project_id, ("int8_search",), section="optimization", id="opt-jobs")
            with Vertical(id="opt-main"):
                yield Static("", id="opt-header")
                yield Static("No optimization yet. Press [b]n[/b] to create one from the perf profile "
                             "(or FLOPS) and the loss profile (or Approximated).", id="opt-empty")
                with TabbedContent(id="opt-tabs"):
                    with TabPane("Pruning (m)", id="tab-pruning"):
                        with VerticalScroll(id="pruning-scroll"):
                            # one-line inputs sized to their content: nothing scrolls out of view when focused
                            with Horizontal(classes="inputs"):
                                yield Label("Sparsity", id="lbl-sparsity")
                                yield Input(id="in-sparsity", compact=True)
                                yield Label("Balance")
                                yield Input(id="in-balance", compact=True)
                            with Horizontal(classes="inputs"):
                                yield Label("Pruning epochs")
                                yield Input(id="in-start", compact=True)
                                yield Label("to")
                                yield Input(id="in-end", compact=True)
                                yield Label("update every")
                                yield Input(id="in-update", compact=True)
                            yield Static("enter applies · balance 0 = time saved, 1 = loss", classes="hint")
                            # the estimate cards, one under the other
                            for key, title in (("summary", "Summary"), ("performance", "Performance (est.)"),
                                               ("flops", "FLOPs (est.)"), ("params", "Params and size (est.)")):
                                yield Static(title, classes="card-title", id=f"est-{key}-title")
                                yield Static("", id=f"est-{key}-text", classes="card")
                            yield BarChart(title="Sparsity per layer", unit="", x_label="sparsity",
                                           modes=("values",), id="sparsity-chart")
                    with TabPane("Layers (l)", id="tab-layers"):
                        yield Static("enter edit · +/- 0.05 · x auto · i record · * estimates", id="layer-hint")
                        yield FilterableTable(LAYER_COLUMNS, id="layer-table")
                    with TabPane("Groups (l)", id="tab-groups"):  # channel optimizations (Layers is hidden)
                        yield Static("enter edit ratio · +/- 0.05 · x auto · * estimates (onnxruntime)",
                                     classes="hint")
                        yield FilterableTable(ch.GROUP_COLUMNS, id="group-table")
                    with TabPane("Quant", id="tab-quant"):
                        with VerticalScroll():
                            yield TextCheckbox("INT8 quantization modifier", id="q-enabled")
                            yield Static("", id="q-info", classes="hint")
                            yield TextSelectionList(id="q-excluded")
                            yield Int8Card(id="int8-card")
                    with TabPane("LR", id="tab-lr"):
                        with VerticalScroll():
                            yield LineChart(title="Learning rate", x_label="epoch", y_label="LR", height=9,
                                            id="lr-chart")
                            yield Static("modifiers (set/step/multistep/exponential); ctrl+s applies", classes="hint")
                            yield TextArea("", id="lr-text")
                    with TabPane("Training", id="tab-training"):
                        with VerticalScroll(id="training-scroll"):
                            yield Static("", id="training-text")

    def on_mount(self) -> None:
        self._show_main(False)
        keys.quiet_tabs(self.query_one("#opt-tabs", TabbedContent))
        self.query_one("#opt-tabs", TabbedContent).hide_tab("tab-groups")
        self.load_records()

    def _show_main(self, has: bool) -> None:
        self.query_one("#opt-tabs").display = has
        self.query_one("#opt-header").display = has
        self.query_one("#opt-empty").display = not has

    @property
    def ws(self):
        return self.app.workspace

    # ---------------------------------------------------------------------------------- workers
    @app_work(group="opt-load", description="list optimizations")
    def load_records(self) -> None:
        records = self.ws.list_records(self.project_id, TABLE)
        post_result(self, OptimizationsListed(records, (self.ws.get_project(self.project_id) or {}).get("training")))

    @on(OptimizationsListed)
    def _listed(self, message: OptimizationsListed) -> None:
        self.records = sorted(message.records, key=lambda r: str(r.get("created") or ""))
        self.project_training = message.project_training
        self._fill_list()

    # every edit is one core call on the stored record; the newest edit wins (exclusive group)
    @app_work(group="opt-action", description="create optimization")
    def _create(self, values: dict) -> None:
        from sparsify_tui.services import optimizations as core

        settings, sparsity, loss = None, values["sparsity"], values["loss"]
        if values.get("structure") == "channel":
            settings, sparsity, loss = ch.create_settings(self.ws, self.project_id, values)
        post_result(self, OptimizationChanged(core.create_optimization(
            self.ws, self.project_id, values["name"], perf=values["perf"], loss=loss,
            sparsity=sparsity, balance=values["balance"], quantize=values["quantize"], settings=settings)))

    @app_work(group="opt-action", description="copy optimization")
    def _copy(self, rec_id: str) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.copy_optimization(self.ws, self.project_id, rec_id)))

    @app_work(group="opt-action", description="re-evaluate optimization")
    def _reevaluate(self, rec_id: str, **settings: float) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.reevaluate(self.ws, self.project_id, rec_id, **settings)))

    @app_work(group="opt-action", description="update optimization schedule")
    def _update_schedule(self, rec_id: str, **changes: Any) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.update_schedule(self.ws, self.project_id, rec_id, **changes)))

    @app_work(group="opt-action", description="set layer sparsity")
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
        if isinstance(result, dict) and result.get("id"):
            self._select_after = result["id"]
            self.rec = result
            self.render_record()
        self.load_records()

    # ---------------------------------------------------------------------------------- list
    def _fill_list(self) -> None:
        ol = self.query_one("#opt-list", OptionList)
        ol.clear_options()
        for r in self.records:
            est = r.get("estimates") or {}
            second = ch.list_text(r) if ch.is_channel(r) else \
                f"  {est.get('avg_sparsity', 0):.2f} sp{' · INT8' if (r.get('quantization') or {}).get('enabled') else ''}"
            ol.add_option(Option(f"{escape(r['name'])}\n{second}", id=r["id"]))
        if not self.records:
            self.rec = None
            self._show_main(False)
            return
        want = self._select_after or (self.rec or {}).get("id") or self.records[-1]["id"]
        idx = next((i for i, r in enumerate(self.records) if r["id"] == want), len(self.records) - 1)
        self._select_after = None
        ol.highlighted = idx
        self.rec = self.records[idx]
        self.render_record()

    @on(OptionList.OptionSelected, "#opt-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        """enter on the list: into the optimization's current tab, so its keys work at once."""
        if self.rec is not None:
            self.action_view_tab(self.query_one("#opt-tabs", TabbedContent).active or "tab-pruning")

    @on(OptionList.OptionHighlighted, "#opt-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        rec = next((r for r in self.records if r["id"] == event.option.id), None)
        if rec is not None and (self.rec is None or rec["id"] != self.rec.get("id")):
            self.rec = rec
            self.render_record()

    def action_compare(self) -> None:
        """`=`: optimizations side by side (:mod:`sparsify_tui.tui.optimization.compare`)."""
        from sparsify_tui.tui.optimization.compare import OptimizationCompareScreen

        self.app.push_screen(OptimizationCompareScreen(self.project_id, (self.rec or {}).get("id")))

    # ---------------------------------------------------------------------------------- render
    def render_record(self) -> None:
        rec = self.rec
        if rec is None:
            self._show_main(False)
            return
        if not all(k in rec for k in ("settings", "epochs", "estimates", "quantization")):
            self._show_main(False)
            self.query_one("#opt-empty", Static).update(
                f"{escape(str(rec.get('name')))}: this record has no optimizer settings (made by another "
                f"tool). Press [b]n[/b] to create an optimization.")
            return
        self._show_main(True)
        self._quiet = True
        try:
            self.query_one("#opt-header", Static).update(header_text(rec))
            st, ep = rec["settings"], rec["epochs"]
            target_field = ch.TARGET_FIELD.get(st.get("target") or "uniform") if ch.is_channel(rec) else "sparsity"
            self.query_one("#lbl-sparsity", Label).update("Target" if target_field != "sparsity" else
                                                          ("Ratio" if ch.is_channel(rec) else "Sparsity"))
            for wid, val in (("#in-sparsity", f"{st[target_field]:.2f}"), ("#in-balance", f"{st['balance']:.2f}"),
                             ("#in-start", f"{ep['pruning_start_epoch']:g}"),
                             ("#in-end", f"{ep['pruning_end_epoch']:g}"), ("#in-update", f"{ep['update_frequency']:g}")):
                inp = self.query_one(wid, Input)
                if not inp.has_focus:
                    inp.value = val
            for key, text in estimate_texts(rec).items():
                self.query_one(f"#est-{key}-text", Static).update(text)
            layers = rec["layers"]
            channel = ch.is_channel(rec)
            self._show_structure(channel)
            self.query_one("#sparsity-chart", BarChart).set_data(
                [l["weight_name"] for l in layers], [float(l.get("sparsity") or 0) for l in layers],
                title=(f"Channels removed per group ({len(layers)} groups)" if channel
                       else f"Sparsity per layer ({len(layers)} layers)"))
            table = self.query_one("#group-table" if channel else "#layer-table", FilterableTable)
            cursor = table.data_table.cursor_row if table.is_mounted else 0
            table.set_rows(ch.group_rows(rec) if channel else layer_rows(rec))
            if table.is_mounted and cursor is not None and 0 <= cursor < table.data_table.row_count:
                table.data_table.move_cursor(row=cursor)
            q = rec["quantization"]
            self.query_one("#q-enabled", TextCheckbox).value = bool(q.get("enabled"))
            self.query_one("#q-info", Static).update(
                f"Checked layers stay FP32 (default: INT8-sensitivity outliers). QAT from epoch "
                f"{q.get('start_epoch')}. Apply (section 5) quantizes with onnxruntime (static QDQ).")
            sl = self.query_one("#q-excluded", SelectionList)
            sl.clear_options()
            excluded = set(q.get("excluded") or [])
            order = sorted(layers, key=lambda l: -(l.get("int8_sensitivity") or 0))
            sl.add_options([(f"{l['weight_name'][:40]}  {format_fixed(l.get('int8_sensitivity'), '.3g', '-')}",
                             l["node_id"], l["node_id"] in excluded) for l in order])
            from sparsify_tui.optimization.schedule import format_lr_modifiers

            xs, ys = lr_series(rec)
            self.query_one("#lr-chart", LineChart).set_series({"lr": (xs, ys)})
            ta = self.query_one("#lr-text", TextArea)
            if not ta.has_focus:
                ta.load_text(format_lr_modifiers(rec.get("lr_modifiers") or []))
            self.query_one("#training-text", Static).update(training_text(rec, self.project_training))
            self.query_one("#int8-card", Int8Card).show(rec)
            self._load_int8_benchmark(rec["id"])
            self.refresh_bindings()
        finally:
            self.call_after_refresh(self._unquiet)

    def _unquiet(self) -> None:
        self._quiet = False

    # ---------------------------------------------------------------------------------- INT8 card
    @app_work(group="opt-int8-bench", description="newest benchmark of the optimization")
    def _load_int8_benchmark(self, rec_id: str) -> None:
        post_result(self, Int8BenchmarkFound(rec_id, latest_benchmark(self.ws.list_records(self.project_id,
                                                                                          "benchmarks"), rec_id)))

    @on(Int8BenchmarkFound)
    def _int8_benchmark(self, message: Int8BenchmarkFound) -> None:
        if self.rec is not None and self.rec.get("id") == message.record_id and message.benchmark is not None:
            self.query_one("#int8-card", Int8Card).show(self.rec, message.benchmark)

    def action_int8_search(self) -> None:
        names = {r.get("name") for r in self.records}
        k = 1
        while f"int8-{k}" in names:
            k += 1

        def done(values: Optional[dict]) -> None:
            if values:
                self._submit_int8(values)

        self.app.push_screen(Int8SearchDialog(f"int8-{k}"), done)

    @app_work(group="opt-int8-submit", description="submit an INT8 search job")
    def _submit_int8(self, values: dict) -> None:
        from sparsify_tui.jobs import submit
        from sparsify_tui.services.int8 import check_name_free, int8_settings

        try:
            s = int8_settings(self.ws.get_project(self.project_id), values)
            check_name_free(self.ws, self.project_id, s["name"])
            # submit checks the data and labels before a job record exists (jobs.registry.JOB_CHECKS)
            args = {k: v for k, v in s.items() if k != "dims" and v is not None}
            post_result(self, Int8SearchSubmitted(submit(self.ws, self.project_id, "int8_search", args)))
        except Exception as err:  # noqa: BLE001 - the answer to the dialog: shown, the app stays up
            post_result(self, Int8SearchSubmitted(None, err))

    @on(JobProgress.Finished)
    def _int8_job_finished(self, event: JobProgress.Finished) -> None:
        job = event.job or {}
        if job.get("type") != "int8_search":
            return
        event.stop()
        if job.get("status") == "completed":
            self._select_after = (job.get("result") or {}).get("optimization")
            self.app.notify(f"INT8 search finished: {(job.get('result') or {}).get('status')}.", timeout=5)
        self.load_records()

    @on(Int8SearchSubmitted)
    def _int8_submitted(self, message: Int8SearchSubmitted) -> None:
        if message.error is not None:
            self.app.show_error(message.error)
            return
        self.query_one(SectionJobs).follow(message.job)
        if self.rec is not None:
            self.query_one("#opt-tabs", TabbedContent).active = "tab-quant"
        self.app.notify(f"INT8 search started (job {message.job['id']}): its progress shows under the list (c "
                        "cancels); the optimization appears when it ends. It keeps running if you quit.")

    def action_cancel_job(self) -> None:
        self.query_one(SectionJobs).cancel_newest()


    def _show_structure(self, channel: bool) -> None:
        """Channel optimizations edit per-group ratios in Groups; the others per-layer sparsity in Layers."""
        tabs = self.query_one("#opt-tabs", TabbedContent)
        if channel:
            tabs.show_tab("tab-groups")
            tabs.hide_tab("tab-layers")
        else:
            tabs.show_tab("tab-layers")
            tabs.hide_tab("tab-groups")

    @on(TabbedContent.TabActivated, "#opt-tabs")
    def _tab_changed(self) -> None:
        self.refresh_bindings()

    # ---------------------------------------------------------------------------------- edits
    @on(Input.Submitted, "#in-sparsity, #in-balance")
    def _settings_submitted(self) -> None:
        if self.rec is None:
            return
        try:
            sp = float(self.query_one("#in-sparsity", Input).value)
            bal = float(self.query_one("#in-balance", Input).value)
        except ValueError:
            self.app.show_error(ValueError("sparsity and balance must be numbers between 0 and 1"))
            return
        field = ch.TARGET_FIELD.get(self.rec["settings"].get("target") or "uniform") if ch.is_channel(self.rec) \
            else "sparsity"
        self._reevaluate(self.rec["id"], balance=bal, **{field: sp})

    @on(Input.Submitted, "#in-start, #in-end, #in-update")
    def _epochs_submitted(self) -> None:
        if self.rec is None:
            return
        try:
            ep = {"pruning_start_epoch": float(self.query_one("#in-start", Input).value),
                  "pruning_end_epoch": float(self.query_one("#in-end", Input).value),
                  "update_frequency": float(self.query_one("#in-update", Input).value)}
        except ValueError:
            self.app.show_error(ValueError("epochs and update frequency must be numbers"))
            return
        self._update_schedule(self.rec["id"], epochs=ep)

    @on(TextCheckbox.Changed, "#q-enabled")
    def _quant_toggled(self, event: TextCheckbox.Changed) -> None:
        if self._quiet or self.rec is None or bool(self.rec["quantization"].get("enabled")) == event.value:
            return
        self._update_schedule(self.rec["id"], quantization={"enabled": event.value})

    @on(SelectionList.SelectedChanged, "#q-excluded")
    def _excluded_changed(self, event: SelectionList.SelectedChanged) -> None:
        if self._quiet or self.rec is None:
            return
        selected = list(event.selection_list.selected)
        current = list(self.rec["quantization"].get("excluded") or [])
        layer_ids = {l["node_id"] for l in self.rec.get("layers") or []}
        if set(selected) == {x for x in current if x in layer_ids}:
            return  # the list shows layers only: the INT8 search's other FP32 nodes are not a change
        kept = [x for x in current if x not in layer_ids]
        self._update_schedule(self.rec["id"], quantization={"excluded": kept + selected})

    def action_apply_lr(self) -> None:
        if self.rec is None:
            return
        from sparsify_tui.errors import ProjectError
        from sparsify_tui.optimization.schedule import parse_lr_modifiers

        try:
            mods = parse_lr_modifiers(self.query_one("#lr-text", TextArea).text)
        except ValueError as err:
            self.app.show_error(ProjectError(f"learning-rate modifiers: {err}"))
            return
        self.query_one("#lr-chart").focus()
        self._update_schedule(self.rec["id"], lr_modifiers=mods)

    def _current_layer(self) -> Optional[dict]:
        if self.rec is None:
            return None
        row = self.query_one("#group-table" if ch.is_channel(self.rec) else "#layer-table",
                             FilterableTable).current_row()
        if row is None:
            return None
        return next((l for l in self.rec["layers"] if l["weight_name"] == row["layer"]), None)

    def _layers_active(self) -> bool:
        return self.query_one("#opt-tabs", TabbedContent).active in ("tab-layers", "tab-groups")

    def action_step(self, direction: int) -> None:
        layer = self._current_layer() if self._layers_active() else None
        if layer is None:
            return
        new = round(min(0.99, max(0.0, float(layer.get("sparsity") or 0) + direction * STEP)), 4)
        self._set_override(self.rec["id"], layer["weight_name"], new)

    def action_release(self) -> None:
        layer = self._current_layer() if self._layers_active() else None
        if layer is None:
            return
        self._set_override(self.rec["id"], layer["weight_name"], None)

    @on(FilterableTable.RowChosen, "#layer-table, #group-table")
    def _row_chosen(self, event: FilterableTable.RowChosen) -> None:
        layer = next((l for l in (self.rec or {}).get("layers", []) if l["weight_name"] == event.row["layer"]), None)
        if layer is None:
            return

        def done(text: Optional[str]) -> None:
            if text is None or self.rec is None:
                return
            value = float(text) if text else None
            self._set_override(self.rec["id"], layer["weight_name"], value)

        self.app.push_screen(SparsityDialog(layer["weight_name"], float(layer.get("sparsity") or 0)), done)

    # ---------------------------------------------------------------------------------- actions
    def action_focus_list(self) -> None:
        self.query_one("#opt-list").focus()

    def action_new(self) -> None:
        self._open_create()

    @app_work(group="opt-dialog", description="list profiles for a new optimization")
    def _open_create(self) -> None:
        perf = [r for r in self.ws.list_records(self.project_id, "perf_profiles")
                if r.get("status", "completed") == "completed"]
        loss = [r for r in self.ws.list_records(self.project_id, "loss_profiles")
                if r.get("status", "completed") == "completed"]
        perf.sort(key=lambda r: str(r.get("created") or ""), reverse=True)
        loss.sort(key=lambda r: str(r.get("created") or ""), reverse=True)
        perf_opts = [(f"{r.get('name', r['id'])} (measured)", r["id"]) for r in perf] + [("FLOPS (time ∝ FLOPs)", "flops")]
        loss_opts = [(f"{r.get('name', r['id'])} ({r.get('method', 'measured')}{ch.loss_label(r)})", r["id"])
                     for r in loss] + \
            [("Approximated", "approximated")]
        names = {r.get("name") for r in self.ws.list_records(self.project_id, TABLE)}
        k = 1
        while f"opt{k}" in names:
            k += 1
        post_result(self, CreateDialogReady(perf_opts, loss_opts, f"opt{k}"))

    @on(CreateDialogReady)
    def _show_create(self, message: CreateDialogReady) -> None:
        def done(values: Optional[dict]) -> None:
            if values:
                self._create(values)

        self.app.push_screen(CreateOptimizationDialog(message.perf_options, message.loss_options,
                                                      message.default_name), done)

    def action_copy(self) -> None:
        if self.rec is not None:
            self._copy(self.rec["id"])

    def action_delete(self) -> None:
        if self.rec is None:
            return
        rec = self.rec

        def done(ok: Optional[bool]) -> None:
            if ok:
                self.rec = None
                self._delete(rec["id"])

        self.app.push_screen(ConfirmDialog(f"Delete optimization {rec['name']!r}?"), done)

    def action_export(self) -> None:
        if self.rec is None:
            self.app.notify("Create an optimization first (n).", severity="warning")
            return
        self._open_export(self.rec["id"], self.rec["name"])

    @app_work(group="opt-dialog", description="default export path")
    def _open_export(self, rec_id: str, name: str) -> None:
        from sparsify_tui.services.optimizations import default_recipe_path

        post_result(self, ExportDialogReady(rec_id, str(default_recipe_path(self.ws, self.project_id, name))))

    @on(ExportDialogReady)
    def _show_export(self, message: ExportDialogReady) -> None:
        self.app.push_screen(ExportDialog(self.project_id, message.record_id, message.default_path))

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
        """The tabs shown: Groups instead of Layers for a channel optimization."""
        hidden = "tab-layers" if self.rec is not None and ch.is_channel(self.rec) else "tab-groups"
        return [t for t in TABS if t != hidden]

    def action_view_tab(self, tab: str) -> None:
        """m/l: the Pruning or Layers (Groups) tab (and its table or inputs take the focus)."""
        if self.rec is None:
            return
        if tab in ("tab-layers", "tab-groups"):
            tab = "tab-groups" if ch.is_channel(self.rec) else "tab-layers"
        self.query_one("#opt-tabs", TabbedContent).active = tab
        target = {"tab-pruning": "#in-sparsity", "tab-layers": "#layer-table", "tab-groups": "#group-table",
                  "tab-quant": "#q-enabled", "tab-lr": "#lr-chart", "tab-training": "#training-scroll"}[tab]
        self.query_one(target).focus()

    def action_cycle_tab(self, step: int) -> None:
        if self.rec is not None:
            self.action_view_tab(keys.cycle(self._tabs(), self.query_one("#opt-tabs", TabbedContent).active, step))

    def action_inspect(self) -> None:
        """`i`: the full record of the Layers table row under the cursor."""
        if self.rec is None:
            return
        if not self._layers_active():
            self.action_view_tab("tab-layers")
            self.notify("Pick a row, then i shows its record (enter edits its sparsity).", timeout=3)
            return
        layer = self._current_layer()
        if layer is not None:
            self.app.push_screen(RecordDialog(f"{layer['weight_name']} · {layer.get('op_type')}",
                                              layer_record(self.rec, layer)))

    def action_sync_training(self) -> None:
        """`u`: take the project's changed training settings (asks first: edits to the epochs and LR are replaced)."""
        if self.rec is None or not training_stale(self.rec, self.project_training):
            return
        rec_id, p = self.rec["id"], self.project_training or {}

        def answer(yes: Optional[bool]) -> None:
            if yes:
                self._sync_training(rec_id)

        self.app.push_screen(ConfirmDialog(
            f"Take the project's training settings ({p.get('optimizer')}, {p.get('epochs')} epochs, LR "
            f"{p.get('init_lr')} → {p.get('final_lr')}) into {self.rec['name']!r}? Its epoch plan and LR schedule "
            "are rebuilt from them (edits to those are replaced).", confirm_label="Update", title="Update training"),
            answer)

    @app_work(group="opt-action", description="update training settings")
    def _sync_training(self, rec_id: str) -> None:
        from sparsify_tui.services import optimizations as core

        post_result(self, OptimizationChanged(core.sync_training(self.ws, self.project_id, rec_id)))
