"""Benchmarks section: measured ms/batch of the baseline and optimized models.

Left: benchmark cards, newest first (`r` reruns after a confirmation, replacing its numbers; `d` deletes),
running and queued benchmark/apply jobs under them (`c` cancels). Right: the selected benchmark's tabs
(`m` Compare, `l` Table, `<`/`>` any): baseline-vs-optimized bars with speedups, per-iteration line chart,
batch-size scaling, core scaling and a table of every number. `n` creates a benchmark (a background
``benchmark`` job), `a` applies an optimization and exports its optimized .onnx (an ``apply`` job), `b`
cycles the (batch size, cores) combination the charts show. A combination whose runs disagree (p90 > 2×
median, or rounds > 20 % apart: :meth:`sparsify_tui.benchmark.runner.BenchmarkRun.noise`) is flagged with
"!" in the table and under the speedups, with the advice to rerun.

What the numbers are: each (model, batch, cores) is timed in the job process with one live session
on the runtime of the run (its engine's session: threads = cores, one stream): warm-up runs, then timed runs;
median/mean/p90/p99 ms per batch; items/s = 1000·batch/median; speedup = baseline median / model
median at the same batch size and cores.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import OptionList, Static, TabPane
from textual.widgets.option_list import Option

from sparsify_tui.formatting import plural
from sparsify_tui.text import markup_lines
from sparsify_tui.text.benchmark import head_facts
from sparsify_tui.tui.benchmarks.dialogs import ApplyDialog, BenchmarkDialog
from sparsify_tui.tui.fleet import FleetDialog
from sparsify_tui.tui.benchmarks.messages import ApplyDialogReady, BenchmarkDialogReady, BenchmarkLoaded
from sparsify_tui.tui.widgets import keys
from sparsify_tui.tui.widgets.charts import BarChart, LineChart
from sparsify_tui.tui.widgets.dialogs import fresh_name
from sparsify_tui.tui.widgets.labels import elide_middle, fit_name
from sparsify_tui.tui.widgets.records import RecordListSection
from sparsify_tui.tui.widgets.tables import Column, FilterableTable
from sparsify_tui.tui.widgets.tabs import ViewTabs
from sparsify_tui.tui.workers import app_work, post_result

TABLE = "benchmarks"
JOB_TYPES = ("benchmark", "apply")
TABS = ("compare", "iter", "batch", "cores", "table")


# ------------------------------------------------------------------------------------ pure helpers


def _fmt_list(values) -> str:
    return ",".join(str(v) for v in values or [])


def card_text(rec: dict, width: int = 0) -> str:
    """Three-line card text of a benchmark record (Rich markup escaped by the caller's Option); the name elided in
    the middle to ``width`` cells."""
    created = str(rec.get("created") or "")[5:16].replace("T", " ")
    models = rec.get("models") or []
    best = [s.get("speedup") for s in rec.get("summary") or [] if s.get("model") != "baseline"
            and isinstance(s.get("speedup"), (int, float))]
    best_text = f" best {max(best):.2f}×" if best else ""
    return (f"{fit_name(str(rec.get('name') or rec['id']), width)}\n"
            f"  {created} · {len(models)} model{'s' if len(models) != 1 else ''}\n"
            f"  b{_fmt_list(rec.get('batch_sizes'))} c{_fmt_list(rec.get('core_counts'))}{best_text}")


def sort_newest_first(records: list[dict]) -> list[dict]:
    return sorted(records, key=lambda r: (str(r.get("created") or ""), str(r.get("id"))), reverse=True)


def combos(result) -> list[tuple[int, int]]:
    """Every (batch size, cores) combination of a result, in measuring order."""
    return [(b, c) for b in result.batch_sizes for c in result.core_counts]


def iteration_series(result, batch: int, cores: int) -> dict:
    """``{model: (run numbers 1..n, ms per run)}`` at one combination."""
    out = {}
    for m in result.models:
        r = result.run(m.label, batch, cores)
        if r is not None:
            out[m.label] = (list(range(1, len(r.iterations_ms) + 1)), list(r.iterations_ms))
    return out


def batch_scaling(result, cores: int) -> dict:
    """``{model: (batch sizes, items/s)}`` at ``cores``."""
    out = {}
    for m in result.models:
        pts = [(b, result.run(m.label, b, cores)) for b in result.batch_sizes]
        pts = [(b, r.items_per_second) for b, r in pts if r is not None]
        if pts:
            out[m.label] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def core_scaling(result, batch: int) -> dict:
    """``{model: (core counts, median ms per batch)}`` at ``batch``."""
    out = {}
    for m in result.models:
        pts = [(c, result.run(m.label, batch, c)) for c in result.core_counts]
        pts = [(c, r.median_ms) for c, r in pts if r is not None]
        if pts:
            out[m.label] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def comparison_bars(result, batch: int, cores: int) -> tuple[list[str], list[float]]:
    """Bars of median ms per batch of every model at one combination (labels: model names)."""
    labels, values = [], []
    for m in result.models:
        r = result.run(m.label, batch, cores)
        if r is not None:
            labels.append(shorten_label(m.label))
            values.append(r.median_ms)
    return labels, values


def speedup_text(result, batch: int, cores: int) -> str:
    """``speedup vs baseline (b1 c2): opt 2.50×, ...`` at one combination, then a noise warning when any of
    its runs is noisy."""
    parts = [f"{m.label} {r.speedup:.2f}×" for m in result.models
             if m.label != result.baseline_label and (r := result.run(m.label, batch, cores)) is not None]
    text = f"speedup vs baseline (b{batch} c{cores}): " + (", ".join(parts) if parts else "no optimized model")
    noisy = [f"{m.label}: {', '.join(n)}" for m in result.models
             if (r := result.run(m.label, batch, cores)) is not None and (n := r.noise(result.rounds))]
    if noisy:
        text += (f"\n[reverse] ! [/] noisy ({'; '.join(noisy)}): the machine was busy, so the speedup may be off; "
                 "r reruns")
    return text


def shorten_label(label: str, limit: int = 12) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def table_rows(result) -> list[dict]:
    """One row per (model, batch, cores) with every number, and the model's accuracy against the baseline (the
    same at every batch and core count: it is measured once per model; none without data: agreement on synthetic
    inputs is no accuracy, the accuracy block shows it labelled so)."""
    from sparsify_tui.benchmark.summary import synthetic

    models = {} if synthetic(result.accuracy) else (result.accuracy or {}).get("models") or {}
    rows = []
    for i, r in enumerate(result.runs):
        acc = models.get(r.model) or {}
        rows.append({"_key": i, "model": r.model, "batch": r.batch_size, "cores": r.core_count,
                     "median": r.median_ms, "mean": r.mean_ms, "p90": r.p90_ms, "p99": r.p99_ms,
                     "min": r.min_ms, "max": r.max_ms, "ms_item": r.ms_per_item, "ips": r.items_per_second,
                     "speedup": r.speedup, "noise": "! " + ", ".join(n) if (n := r.noise(result.rounds)) else "",
                     "top1": acc.get("accuracy"), "agree": acc.get("top1_agreement"), "nmse": acc.get("nmse")})
    return rows


def accuracy_renderable(accuracy: Optional[dict], width: int = 0):
    """The accuracy of every model beside its speed (:func:`sparsify_tui.benchmark.summary.accuracy_table`: one
    column per model, the metric named), or how to get it. When a column per model does not fit in ``width``
    cells (many models at 80 columns), a row per model instead: no cell is ever cut."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from sparsify_tui.benchmark.summary import accuracy_table

    table = accuracy_table(accuracy)
    if table is None:
        return Text("Accuracy: not measured (a benchmark of the baseline and an optimization measures it; "
                    "n, with labelled sample data for top-1 accuracy).", style="dim")
    headers, rows = table.headers, table.rows
    first = max(len(r[0]) for r in rows)
    models = [elide_middle(label, 18) for label in headers[1:]]
    if width and first + sum(max(len(m), 7) + 2 for m in models) > width:  # a row per model
        headers, rows = ["model"] + [r[0] for r in rows], [[m] + [r[i + 1] for r in rows] for i, m in
                                                            enumerate(models)]
        first, models = max(len(r[0]) for r in rows), headers[1:]
    else:
        headers = [""] + models
    out = Table(box=None, padding=(0, 1), show_edge=False, expand=False)
    out.add_column(headers[0], no_wrap=True, min_width=first)
    for header in headers[1:]:
        out.add_column(header, justify="right", no_wrap=True, min_width=max(len(header), 7))
    for row in rows:
        out.add_row(*row)
    return Group(Text(table.title, style="bold"), out)  # the title wraps to the pane, not to the table


class AccuracyView(Static):
    """The accuracy of every model beside its speed (:func:`accuracy_renderable`), laid out for the width it has
    each time it renders: a result that arrives before the layout (a busy machine) is not stuck in the narrow
    form, nor a wide one cut after a resize."""

    accuracy: Optional[dict] = None

    def show(self, accuracy: Optional[dict]) -> None:
        self.accuracy = accuracy
        self.refresh(layout=True)

    def render(self):
        return accuracy_renderable(self.accuracy, self.content_region.width)

    def on_resize(self) -> None:
        self.refresh(layout=True)  # its height follows the form chosen for the new width


def header_text(result, combo: Optional[tuple[int, int]]) -> str:
    """The benchmark's head (:mod:`sparsify_tui.text.benchmark`) and the batch size and cores the charts show."""
    combo_text = f"charts at batch {combo[0]}, {plural(combo[1], 'core')} (b: next)" if combo else ""
    return "\n".join(markup_lines(head_facts(result)) + [combo_text])


def _ms(v: Any) -> str:
    return "" if v is None else f"{v:.3f}"


def _pct(v: Any) -> str:
    return "" if v is None else f"{v * 100:.1f}%"


#: speed first, then the model's accuracy beside it (Top-1 with labels, agreement with the baseline, output NMSE)
TABLE_COLUMNS = [
    Column("model", "Model", filter=True, pin=True),
    Column("batch", "Batch", numeric=True),
    Column("cores", "Cores", numeric=True),
    Column("median", "Median ms", numeric=True, fmt=_ms),
    Column("speedup", "Speedup", numeric=True, fmt=lambda v: f"{v:.2f}×"),
    Column("top1", "Top-1", numeric=True, fmt=_pct),
    Column("agree", "Agree", numeric=True, fmt=_pct),
    Column("nmse", "NMSE", numeric=True, fmt=lambda v: "" if v is None else f"{v:.4g}"),
    Column("p90", "p90 ms", numeric=True, fmt=_ms),
    Column("noise", "Noise", filter=True),
    Column("mean", "Mean ms", numeric=True, fmt=_ms),
    Column("p99", "p99 ms", numeric=True, fmt=_ms),
    Column("ms_item", "ms/item", numeric=True, fmt=_ms),
    Column("ips", "Items/s", numeric=True, fmt=lambda v: f"{v:.1f}"),
    Column("min", "Min ms", numeric=True, fmt=_ms),
    Column("max", "Max ms", numeric=True, fmt=_ms),
]


# ---------------------------------------------------------------------------------------- widgets


class BenchmarksSection(RecordListSection):
    """Benchmarks of one project (see the module docstring; the list's life cycle:
    :class:`~sparsify_tui.tui.widgets.records.RecordListSection`)."""

    TABLE = TABLE
    SECTION = "benchmarks"
    KIND = "benchmark"
    JOB_TYPES = JOB_TYPES
    RERUN_JOB = "benchmark"
    LIST_ID = "bench-list"
    JOBS_ID = "bench-jobs"
    RESULT_KEY = "benchmark"
    LIST_WIDTH = 25  # the list pane is 28 wide (its border and the option's padding take 3)

    DEFAULT_CSS = """
    BenchmarksSection { height: 1fr; }
    BenchmarksSection #bench-left { width: 28; height: 1fr; border-right: solid $panel-lighten-2; }
    BenchmarksSection #bench-left .pane-title { text-style: bold; height: 1; padding: 0 1; }
    BenchmarksSection #bench-list { height: 1fr; }
    BenchmarksSection #bench-right { width: 1fr; height: 1fr; }
    BenchmarksSection #bench-header { height: auto; padding: 0 1; }
    BenchmarksSection #compare-speedup { height: auto; padding: 0 1; text-style: bold; }
    BenchmarksSection #compare-accuracy { height: auto; padding: 0 1 1 1; }
    BenchmarksSection #bench-empty { padding: 1 2; color: $text-muted; }
    BenchmarksSection ViewTabs { height: 1fr; }
    BenchmarksSection TabPane { padding: 0; }
    BenchmarksSection LineChart PlotextPlot { height: 14; }
    """

    BINDINGS = [
        keys.new("benchmarks", "benchmark: models, batch sizes, core counts, iterations"),
        keys.rerun("benchmarks", "benchmark"),
        keys.delete("benchmarks", "benchmark"),
        Binding("a", "apply", "Apply", id="benchmarks.apply",
                tooltip="Write an optimization's optimized .onnx (pruned, INT8 if set) and export it to a path"),
        keys.cancel_job("benchmarks"),
        *keys.tabs("benchmarks"),
        keys.focus_list("benchmarks", "benchmarks"),
        keys.tab("benchmarks", "m", "compare", "Compare", "Benchmark: baseline vs optimized bars and speedups"),
        keys.tab("benchmarks", "l", "table", "Table", "Benchmark: a table of every number"),
        Binding("b", "next_combo", "Batch/cores", show=False, id="benchmarks.combo",
                tooltip="Show the charts at the next (batch size, cores) combination"),
        Binding("f", "fleet", "Fleet", show=False, id="benchmarks.fleet",
                tooltip="Benchmark on the servers of a Ray cluster (the Fleet dialog)"),
    ]

    def __init__(self, project_id: str, **kwargs) -> None:
        super().__init__(project_id, **kwargs)
        self.result = None
        self._loaded_id: Optional[str] = None  # the record id of `result`
        self.combo_index = 0

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="bench-left", classes="list-pane"):
                yield Static("Benchmarks, newest first", classes="pane-title")
                yield from self.compose_list()
            with Vertical(id="bench-right"):
                yield Static("No benchmarks yet. Press n to measure the baseline against your optimizations "
                             "over batch sizes and core counts, or a to apply and export an optimized .onnx.",
                             id="bench-empty")
                yield Static("", id="bench-header")
                # every pane is built when first shown (ViewTabs lazy; the tabs are hidden until there is a
                # benchmark): _render_tab fills it
                with ViewTabs(initial="compare", id="bench-tabs", lazy=True, build_initial=False,
                              on_build=self._render_tab):
                    with TabPane("Compare (m)", id="compare"):
                        with VerticalScroll(id="compare-scroll"):
                            yield Static("", id="compare-speedup")
                            yield AccuracyView(id="compare-accuracy")  # accuracy beside speed
                            yield BarChart(title="median ms/batch", unit="ms",
                                           modes=("values", "log"), id="compare-chart")
                    with TabPane("Iterations", id="iter"):
                        yield LineChart(title="ms per batch of every timed run", x_label="run",
                                        y_label="ms/batch", id="iter-chart")
                    with TabPane("Batch", id="batch"):
                        yield LineChart(title="items/s by batch size", x_label="batch size",
                                        y_label="items/s", id="batch-chart")
                    with TabPane("Cores", id="cores"):
                        yield LineChart(title="median ms/batch by core count", x_label="cores",
                                        y_label="ms/batch", id="cores-chart")
                    with TabPane("Table (l)", id="table"):
                        yield FilterableTable(TABLE_COLUMNS, id="bench-table")

    def on_mount(self) -> None:
        self._show_empty(True)

    def action_view_tab(self, tab: str) -> None:
        if self.result is None:
            return
        tabs = self.query_one("#bench-tabs", ViewTabs)
        tabs.active = tab
        target = {"compare": "#compare-chart", "iter": "#iter-chart", "batch": "#batch-chart",
                  "cores": "#cores-chart", "table": "#bench-table"}[tab]
        tabs.after_build(tab, lambda: self.query_one(target).focus())

    def action_cycle_tab(self, step: int) -> None:
        self.action_view_tab(keys.cycle(list(TABS), self.query_one("#bench-tabs", ViewTabs).active, step))

    # -- data ------------------------------------------------------------------------------
    def record_option(self, record: dict) -> Option:
        return Option(Text(card_text(record, self.LIST_WIDTH)), id=record["id"])

    def sort_records(self, records: list[dict]) -> list[dict]:
        return sort_newest_first(records)

    def show_selected(self, selected: Optional[str], *, refresh: bool = False, focus: bool = False) -> None:
        self._show_empty(selected is None)
        if selected is None:
            self.result = None
            return
        if refresh or self.result is None or self._loaded_id != selected:
            self._load_result(selected)
        if focus:
            self.action_view_tab(self.query_one("#bench-tabs", ViewTabs).active or "compare")

    def _show_empty(self, empty: bool) -> None:
        self.query_one("#bench-empty").display = empty
        self.query_one("#bench-header").display = not empty
        tabs = self.query_one("#bench-tabs", ViewTabs)
        tabs.display = not empty
        if not empty:
            tabs.build()  # the tab shown (the first time: Compare)
        self.refresh_bindings()

    @app_work(group="bench-load", description="read benchmark")
    def _load_result(self, record_id: str) -> None:
        from sparsify_tui.services.benchmarks import load_benchmark

        post_result(self, BenchmarkLoaded(record_id, load_benchmark(self.app.workspace, self.project_id, record_id)))

    @on(BenchmarkLoaded)
    def _loaded(self, message: BenchmarkLoaded) -> None:
        if message.record_id != self.selected:
            return
        self.result = message.result
        self._loaded_id = message.record_id
        self.combo_index = 0
        self._render_result()

    @on(OptionList.OptionHighlighted, "#bench-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        # a card shows as soon as the cursor is on it; a stale highlight (the list was refilled since) is no choice
        if event.option_index != event.option_list.highlighted:
            return
        if event.option.id and event.option.id != self.selected:
            self._user_chose = True
            self.select(event.option.id)

    @property
    def combo(self) -> Optional[tuple[int, int]]:
        if self.result is None:
            return None
        cs = combos(self.result)
        return cs[self.combo_index % len(cs)] if cs else None

    def _render_result(self) -> None:
        res = self.result
        if res is None:
            return
        self.query_one("#bench-header", Static).update(header_text(res, self.combo))
        for tab in TABS:
            self._render_tab(tab)

    def _render_tab(self, tab: str) -> None:
        """Fill pane ``tab`` from the benchmark shown (nothing for a pane not built yet: it is filled when built)."""
        res, combo = self.result, self.combo
        if res is None or not self.query_one("#bench-tabs", ViewTabs).built(tab):
            return
        if tab == "compare":
            if combo:
                b, c = combo
                labels, values = comparison_bars(res, b, c)
                self.query_one("#compare-chart", BarChart).set_data(
                    labels, values, title=f"median ms/batch, b{b} c{c}")
                self.query_one("#compare-speedup", Static).update(speedup_text(res, b, c))
            self.query_one("#compare-accuracy", AccuracyView).show(res.accuracy)
        elif tab == "iter" and combo:
            b, c = combo
            self.query_one("#iter-chart", LineChart).set_series(
                iteration_series(res, b, c), title=f"ms/batch of each timed run (b{b}, c{c})")
        elif tab == "batch" and combo:
            b, c = combo
            self.query_one("#batch-chart", LineChart).set_series(
                batch_scaling(res, c), title=f"items/s by batch size (c{c})")
        elif tab == "cores" and combo:
            b, c = combo
            self.query_one("#cores-chart", LineChart).set_series(
                core_scaling(res, b), title=f"median ms/batch by cores (b{b})")
        elif tab == "table":
            self.query_one("#bench-table", FilterableTable).set_rows(table_rows(res))

    def action_next_combo(self) -> None:
        if self.result is None:
            return
        self.combo_index = (self.combo_index + 1) % max(1, len(combos(self.result)))
        self._render_result()

    # -- jobs ------------------------------------------------------------------------------
    def job_finished(self, job: dict) -> None:
        if job.get("type") == "apply" and job.get("status") == "completed":
            res = job.get("result") or {}
            where = res.get("exported_to") or res.get("path")
            self.notify(f"Optimized model written: {where}", timeout=8)

    # -- actions ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("cycle_tab", "view_tab", "next_combo") and self.selected is None:
            return None
        return super().check_action(action, parameters)

    def action_new(self) -> None:
        self.app.hold_keys()  # what is typed before the dialog shows goes into it
        self._open_new_dialog()

    @app_work(group="bench-dialog", description="read optimizations and setup")
    def _open_new_dialog(self) -> None:
        from sparsify_tui.settings import available_cores

        ws = self.app.workspace
        setup = ws.get_project(self.project_id).get("setup") or {}
        post_result(self, BenchmarkDialogReady(ws.list_records(self.project_id, "optimizations"),
                                               int(setup.get("batch_size") or 1),
                                               int(setup.get("core_count") or available_cores())))

    @on(BenchmarkDialogReady)
    def _show_new_dialog(self, message: BenchmarkDialogReady) -> None:
        dialog = BenchmarkDialog(
            message.optimizations, name=fresh_name("benchmark 1", (r.get("name") for r in self.records)),
            batch_sizes=_fmt_list(sorted({1, message.batch_size})),
            core_counts=_fmt_list(sorted({1, message.core_count})))
        self.app.show_dialog(dialog, self._dialog_done)

    def _dialog_done(self, args: Optional[dict]) -> None:
        if args:
            self.submit_job("benchmark", args)

    def rerun_question(self, record: dict) -> str:
        args = record.get("args") or {}
        name = record.get("name") or record["id"]
        return (f"Measure benchmark {name!r} again (same models, batch sizes {_fmt_list(args.get('batch_sizes'))}, "
                f"cores {_fmt_list(args.get('core_counts'))})? Its numbers are replaced when it finishes.")

    def rerun_args(self, ws, record: dict) -> dict:
        args = dict(record.get("args") or {})
        args.setdefault("name", record.get("name"))
        args["record_id"] = record["id"]  # the new numbers replace this benchmark's: no second "benchmark 1"
        return args

    def action_fleet(self) -> None:
        """Key `f`: the Fleet dialog (benchmarks on the servers of a Ray cluster); the list picks up its results."""
        self.app.push_screen(FleetDialog(self.project_id, "benchmark"), lambda _job: self.reload())

    def action_apply(self) -> None:
        self.app.hold_keys()
        self._open_apply_dialog()

    @app_work(group="bench-dialog", description="read optimizations and applied models")
    def _open_apply_dialog(self) -> None:
        from sparsify_tui.services.apply import is_applied, optimized_path
        from sparsify_tui.services.optimizations import list_optimizations

        ws = self.app.workspace
        opts = ws.list_records(self.project_id, "optimizations")
        typed = list_optimizations(ws, self.project_id)
        paths = {o.id: str(optimized_path(ws, self.project_id, o)) for o in typed}
        state = {o.id: ("applied" if is_applied(ws, self.project_id, o) else
                        "stale" if o.applied is not None else "not applied") for o in typed}
        post_result(self, ApplyDialogReady(opts, paths, state))

    @on(ApplyDialogReady)
    def _show_apply_dialog(self, message: ApplyDialogReady) -> None:
        def done(args: Optional[dict]) -> None:
            if args:
                self.submit_job("apply", args)

        self.app.show_dialog(ApplyDialog(message.optimizations, message.default_paths, message.states), done)
