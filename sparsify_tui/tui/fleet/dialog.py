"""The Fleet dialog: measure the project's model on the servers of a Ray cluster (``F`` in Performance Profiles
and in Benchmarks).

The form: the cluster's address (default ``$RAY_ADDRESS``), ``ctrl+f`` to list its nodes (each with its CPU, cores,
instruction sets and labels; all chosen at first, ``space`` toggles one), what to run (a perf profile or a
benchmark of the chosen optimizations), the batch size(s), cores per target (``all`` or a number) and timed
runs. ``ctrl+r`` submits a ``fleet_profile`` / ``fleet_benchmark`` job (:mod:`sparsify_tui.jobs.handlers.fleet`);
the arguments, the inputs and the targets are checked before the job exists, and a refusal is one line in the
form. Then the job's progress (targets done / total, ``c`` cancels every target) and one row per target: its
status, percent and step, refreshed twice a second. The job runs in its own process: closing the dialog or
quitting the TUI does not stop it, and its results appear in the lists, grouped by target machine.

Ray stays out of the TUI process: nodes are listed by a child process
(:func:`sparsify_tui.fleet.probe.describe_cluster`) in a thread worker.
"""

from __future__ import annotations

import os
from typing import Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, DataTable, Input, Label, RadioButton, RadioSet, SelectionList, Static

from sparsify_tui.formatting import plural
from sparsify_tui.tui.fleet.messages import FleetDefaultsLoaded, FleetJobPolled, FleetJobSubmitted, FleetNodesFound
from sparsify_tui.tui.widgets.dialogs import FormDialog, dialog_css, form_buttons
from sparsify_tui.tui.widgets.inputs import TextInput
from sparsify_tui.tui.widgets.jobs import JobProgress
from sparsify_tui.tui.workers import app_work, post_result

KINDS = ("profile", "benchmark")
POLL_S = 0.5


def node_line(node) -> str:
    """One line per node in the target list: ``vm-25d8f0 · AMD EPYC 7B13 · 2 cores · AVX2 · cpu=alpha``."""
    isa = [x for x in node.instruction_sets if x.startswith(("AVX", "AMX", "NEON", "SVE"))]
    parts = [f"{node.hostname} {node.short_id}" + (" (head)" if node.is_head else ""),
             (node.cpu_model or "?")[:28], f"{node.cores or '?'} cores"]
    if isa:
        parts.append(isa[-1])
    parts += [f"{k}={v}" for k, v in sorted(node.labels.items())]
    if node.error:
        parts.append(f"error: {node.error}")
    elif node.ray_cpus <= 0:
        parts.append("no CPUs in Ray")
    return " · ".join(parts)


class FleetDialog(FormDialog[Optional[dict]]):
    """Run a fleet profile or benchmark (see the module docstring). ``kind``: ``"profile"`` or ``"benchmark"`` (the
    one selected at first). Dismisses with the final job dict when the job ends while the dialog is open, else
    None."""

    DEFAULT_CSS = dialog_css("FleetDialog", 90) + """
    FleetDialog .dialog-title { margin-bottom: 0; }
    FleetDialog VerticalScroll { height: auto; max-height: 1fr; }
    FleetDialog #find { min-width: 14; height: 1; border: none; margin-left: 1; }
    FleetDialog #nodes-status { height: auto; color: $text-muted; }
    FleetDialog #targets { height: auto; max-height: 6; }
    FleetDialog #optimizations { height: auto; max-height: 4; }
    FleetDialog #kind { height: auto; border: none; layout: horizontal; }
    FleetDialog #error.done { color: $success; }
    FleetDialog #progress { height: auto; }
    FleetDialog #target-table { height: auto; max-height: 8; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", id="fleet.dialog.close",
                tooltip="Close the dialog (a started fleet job keeps running)"),
        Binding("ctrl+f", "find", "Find targets", id="fleet.dialog.find",
                tooltip="List the alive nodes of the Ray cluster at the address"),
        Binding("ctrl+r", "run", "Run", id="fleet.dialog.run", tooltip="Start the fleet job on the chosen targets"),
    ]

    def __init__(self, project_id: str, kind: str = "profile", *, address: Optional[str] = None) -> None:
        super().__init__()
        self.project_id = project_id
        self.kind = kind if kind in KINDS else "profile"
        self.address = address if address is not None else os.environ.get("RAY_ADDRESS", "")
        self.nodes: list = []
        self.setup: dict = {}
        self.job: Optional[dict] = None
        self.final: Optional[dict] = None
        self.listed_at = ""

    # -- layout ------------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Fleet: measure on the servers of a Ray cluster", classes="dialog-title")
            with VerticalScroll(id="form"):
                with Horizontal(classes="row"):
                    yield Label("Ray address")
                    yield TextInput(self.address, placeholder="HOST:PORT of the head node", id="address", compact=True)
                    yield Button("Find ^f", id="find", compact=True)
                yield Static("Give the head node's HOST:PORT, then ctrl+f lists its nodes.", id="nodes-status")
                yield SelectionList(id="targets", compact=True)
                with RadioSet(id="kind", compact=True):
                    yield RadioButton("Perf profile", value=self.kind == "profile", id="kind-profile")
                    yield RadioButton("Benchmark", value=self.kind == "benchmark", id="kind-benchmark")
                with Horizontal(classes="row"):
                    yield Label("Batch size(s)", id="batch-label")
                    yield TextInput("1", id="batch", compact=True)
                with Horizontal(classes="row"):
                    yield Label("Cores (each)")
                    yield TextInput("all", id="cores", compact=True)
                with Horizontal(classes="row"):
                    yield Label("Timed runs")
                    yield TextInput("30", id="iterations", type="integer", compact=True)
                yield Checkbox("Also quantize to INT8 and measure it", True, id="int8", compact=True)
                yield SelectionList(id="optimizations", compact=True)
            yield Vertical(id="progress")
            yield from form_buttons("Run ^r", "run", "close", cancel_label="Close")

    def on_mount(self) -> None:
        self._show_kind()
        self._load_defaults()
        self.query_one("#address", Input).focus()
        if self.address:
            self.action_find()

    def _show_kind(self) -> None:
        bench = self.kind == "benchmark"
        self.query_one("#int8").display = not bench
        self.query_one("#optimizations").display = bench
        self.query_one("#batch-label", Label).update("Batch sizes" if bench else "Batch size")

    @on(RadioSet.Changed, "#kind")
    def _kind_changed(self, event: RadioSet.Changed) -> None:
        self.kind = "benchmark" if event.pressed.id == "kind-benchmark" else "profile"
        self._show_kind()

    # -- defaults and nodes ------------------------------------------------------------------------------------
    @app_work(group="fleet-defaults", description="read the project's setup and optimizations")
    def _load_defaults(self) -> None:
        ws = self.app.workspace
        post_result(self, FleetDefaultsLoaded(ws.get_project(self.project_id).get("setup") or {},
                                              ws.list_records(self.project_id, "optimizations")))

    @on(FleetDefaultsLoaded)
    def _defaults(self, message: FleetDefaultsLoaded) -> None:
        self.setup = message.setup
        self.query_one("#batch", Input).value = str(message.setup.get("batch_size") or 1)
        opts = self.query_one("#optimizations", SelectionList)
        opts.clear_options()
        for o in message.optimizations:
            opts.add_option((f"optimization {o.get('name') or o['id']}", o["id"], True))

    def action_find(self) -> None:
        address = self.query_one("#address", Input).value.strip()
        self.query_one("#nodes-status", Static).update(f"Listing the nodes of {address or '?'}…")
        self.query_one("#error", Static).update("")
        self._find(address)

    @app_work(group="fleet-find", description="list the nodes of the Ray cluster")
    def _find(self, address: str) -> None:
        from sparsify_tui.fleet.probe import describe_cluster

        try:
            nodes = describe_cluster(address)
        except Exception as err:  # noqa: BLE001 - shown in the form
            post_result(self, FleetNodesFound(address, None, err))
            return
        post_result(self, FleetNodesFound(address, nodes))

    @on(FleetNodesFound)
    def _nodes_found(self, message: FleetNodesFound) -> None:
        status = self.query_one("#nodes-status", Static)
        targets = self.query_one("#targets", SelectionList)
        targets.clear_options()
        if message.error is not None:
            self.nodes = []
            status.update("No nodes listed.")
            self.show_form_error(message.error)
            return
        self.nodes = list(message.nodes or [])
        self.listed_at = message.address
        for n in self.nodes:
            targets.add_option((node_line(n), n.node_id, n.ray_cpus > 0 and not n.error))
        if self.nodes:
            targets.highlighted = 0  # space toggles the first node at once
        self._show_chosen()

    @on(SelectionList.SelectedChanged, "#targets")
    def _show_chosen(self, event: Optional[SelectionList.SelectedChanged] = None) -> None:
        """The status line counts the chosen targets (in words: NO_COLOR shows no difference between the boxes)."""
        if not self.nodes:
            return
        chosen = len(self.query_one("#targets", SelectionList).selected)
        self.query_one("#nodes-status", Static).update(
            f"{len(self.nodes)} alive node{'s' if len(self.nodes) != 1 else ''} at {self.listed_at}, {chosen} chosen "
            "(space toggles a target):")

    # -- run ---------------------------------------------------------------------------------------------------
    def values(self) -> dict:
        """Job args from the form, checked by the one validator of job settings (:mod:`sparsify_tui.settings`);
        raises ``SparsifyError`` (one line)."""
        from sparsify_tui import settings
        from sparsify_tui.errors import SparsifyError

        field = lambda key: self.query_one(f"#{key}", Input).value.strip()  # noqa: E731
        address = settings.fleet_address(field("address"), "Ray address")
        chosen = list(self.query_one("#targets", SelectionList).selected)
        if not self.nodes:
            raise SparsifyError("no targets listed yet: press ctrl+f to list the cluster's nodes")
        if not chosen:
            raise SparsifyError("no target chosen: select at least one node (space)")
        args = {"address": address, "targets": ",".join(chosen), "dims": self.setup.get("dims") or {},
                "core_count": settings.fleet_cores(field("cores"), "Cores"),
                "iterations": settings.iterations(field("iterations"), "Timed runs")}
        if args["core_count"] is None:
            args.pop("core_count")
        if self.kind == "benchmark":
            args["batch_sizes"] = settings.batch_sizes(field("batch"), 1, "Batch sizes")
            args["optimizations"] = list(self.query_one("#optimizations", SelectionList).selected)
        else:
            args["batch_size"] = settings.batch_size(field("batch"), "Batch size")
            args["int8"] = self.query_one("#int8", Checkbox).value
        return args

    def action_run(self) -> None:
        if self.job is None and self.start_job(f"fleet_{self.kind}", FleetJobSubmitted, measuring=False):
            self.query_one("#nodes-status", Static).update("Checking the targets and starting the fleet job…")

    @on(FleetJobSubmitted)
    def _submitted(self, message: FleetJobSubmitted) -> None:
        if message.job is None:
            self.query_one("#run", Button).disabled = False
            self.query_one("#nodes-status", Static).update("")
            self.show_form_error(message.error)
            return
        self.job = message.job
        self.query_one("#form").display = False
        self.query_one("#run", Button).display = False
        self.query_one("#close", Button).label = "Hide"
        progress = self.query_one("#progress")
        progress.mount(JobProgress(self.job["id"], id="job-progress"))
        table = DataTable(id="target-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("Target", "Status", "%", "Step")
        progress.mount(table)
        self.query_one("#job-progress").focus()
        self._poll()

    @app_work(group="fleet-poll", description="read the fleet job's targets")
    def _poll(self) -> None:
        from sparsify_tui import jobs

        job_id = self.job["id"]
        post_result(self, FleetJobPolled(job_id, jobs.get_job(self.app.workspace, job_id)))

    @on(FleetJobPolled)
    def _polled(self, message: FleetJobPolled) -> None:
        if not self.is_mounted:
            return
        table = self.query_one("#target-table", DataTable)
        table.clear()
        for t in message.job.get("targets") or []:
            step = t.get("error") if t.get("status") == "error" else (t.get("name") or t.get("step") or "")
            table.add_row(t.get("label", "?"), t.get("status", "?"), f"{100 * float(t.get('fraction') or 0):.0f}",
                          str(step)[:60])
        if message.job.get("status") in ("pending", "running"):
            self.set_timer(POLL_S, self._poll)

    def on_job_progress_finished(self, event: JobProgress.Finished) -> None:
        self.final = event.job
        self._poll()  # the last states
        if event.status == "error":
            self.show_form_error(f"The fleet job failed: {event.job.get('error') or 'see the job log'}")
        elif event.status == "completed":
            res = event.job.get("result") or {}
            self.query_one("#error", Static).add_class("done")  # not an error: shown in the success colour
            self.query_one("#error", Static).update(
                f"Done: {plural(res.get('completed', 0), 'target')} stored"
                + (f", {res.get('failed')} failed (see their rows)" if res.get("failed") else "")
                + ". Close with escape.")

    def action_close(self) -> None:
        self.dismiss(self.final)
