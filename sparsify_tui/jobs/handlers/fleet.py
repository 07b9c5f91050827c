"""Jobs ``fleet_profile`` and ``fleet_benchmark``: the perf profile or benchmark of a project measured on target
servers of a Ray cluster (:mod:`sparsify_tui.fleet`), stored here as ordinary perf profiles and benchmarks tagged
with their target.

The job process is the Ray driver and the only writer of the workspace: it connects, chooses the targets, runs
the **same core function** as a local job on each of them (``profile_performance``, ``run_benchmark``) through
:func:`sparsify_tui.fleet.dispatch.run_on_targets`, and stores each result as soon as its target finishes. Each
target takes its own node's measuring lock (:func:`node_measure_lock`), so the job itself does not take this
machine's lock (``measuring=False``): when this machine is a target, its task takes it here like any node.

Progress: ``targets done / total`` (each running target's fraction included), and every target's state in the
job record's ``targets`` list (``{node_id, label, status, step, fraction, error, record_id, name}``), which the
CLI and the TUI's Fleet dialog show. A target that fails (its node died, sparsify-tui missing there, an error in
the measurement) is ``error`` with the reason; the others complete and are stored. The job ends ``completed``
when at least one target was stored, ``error`` when none was, ``canceled`` on cancel (targets finished before the
cancel stay stored).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from functools import partial
from typing import Any, Callable, Dict

from sparsify_tui import settings
from sparsify_tui.services.job_settings import FLEET_FLAGS as FLAGS
from sparsify_tui.services.job_settings import fleet_settings

STATE_INTERVAL_S = 0.5
"""Least seconds between two writes of the targets' states to the job record."""


def _check(kind: str, ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists: the settings and inputs, every optimization exists, and
    the cluster (listed by a child process, :func:`sparsify_tui.fleet.probe.describe_cluster`) has the targets,
    each able to run sparsify-tui and with the cores asked for."""
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.fleet.probe import describe_cluster

    s = fleet_settings(kind, project, args, model_path=ws.model_path(project["id"]))
    if kind == "benchmark":
        from sparsify_tui.services.optimizations import get_optimization

        for ref in s["optimizations"]:
            get_optimization(ws, project["id"], ref)
    targets = describe_cluster(s["address"], targets=str(args.get("targets") or "all"))
    for n in targets:
        if n.error:
            raise SparsifyError(f"node {n.short_id} ({n.hostname}) cannot run sparsify-tui: {n.error}: install "
                                "sparsify-tui[fleet] there, in the Python and Ray versions of this machine")
        if s["core_count"] is not None and n.cores:
            settings.core_count(s["core_count"], FLAGS["core_count"], available=n.cores,
                                where=f"of target {n.hostname} (node {n.short_id})")


def check_profile(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """``fleet_profile``'s argument check (see :func:`_check`)."""
    _check("profile", ws, project, args)


def check_benchmark(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """``fleet_benchmark``'s argument check (see :func:`_check`)."""
    _check("benchmark", ws, project, args)


# ------------------------------------------------------------------------------------------- node side
@contextlib.contextmanager
def node_measure_lock(waiting: Callable[[str], None], cancel, *, holder: str):
    """Hold the measuring lock of the node this runs on (:class:`sparsify_tui.jobs.measure_lock.MeasureLock`, from
    that node's ``$SPARSIFY_TUI_MEASURE_LOCK`` or its per-user default) while a fleet task measures there; while
    another process holds it, report ``queued behind <holder>`` through ``waiting`` and honour ``cancel``.
    ``holder``: the name written into the lock (``fleet-<job id>``). Runs on the target node."""
    from sparsify_tui.jobs.measure_lock import MeasureLock

    lock = MeasureLock()
    shown = None
    try:
        while not lock.try_acquire(f"{holder} {os.getpid()} {socket.gethostname()}\n"):
            who = lock.holder() or "another measuring process"
            if who != shown:
                waiting(f"queued behind {who} (this node's measuring lock)")
                shown = who
            cancel.check()
            time.sleep(0.2)
        yield
    finally:
        lock.release()


# ------------------------------------------------------------------------------------------ driver side
def _result_name(template: str, label: str, hostname: str, node_id: str, batch: str, cores: str) -> str:
    return template.format(target=label, hostname=hostname, node=node_id[:6], batch=batch, cores=cores)


class _States:
    """Writes the targets' states to the job record, at most every :data:`STATE_INTERVAL_S` seconds."""

    def __init__(self, ctx) -> None:
        self.ctx, self.last, self.states, self.extra = ctx, 0.0, [], {}

    def __call__(self, states: list, force: bool = False) -> None:
        self.states = [s.to_dict() for s in states]
        if force or time.monotonic() - self.last >= STATE_INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        self.last = time.monotonic()
        rows = [{**s, **self.extra.get(s["node_id"], {})} for s in self.states]
        if self.ctx.job and self.ctx.job.get("id"):
            self.ctx.ws.update_job(self.ctx.job["id"], targets=rows)


def _dispatch(ctx, s: Dict[str, Any], call, store: Callable) -> Dict[str, Any]:
    """Connect, choose the targets, run ``call`` on them, ``store(outcome)`` each completed one; the summary."""
    from sparsify_tui.errors import JobCanceled, JobError
    from sparsify_tui.fleet.cluster import connect, list_nodes, select_targets, target_labels
    from sparsify_tui.fleet.dispatch import run_on_targets

    states = _States(ctx)
    summary: list = []
    ctx.progress("connecting to the Ray cluster", 0.0)
    with connect(s["address"]):
        targets = select_targets(list_nodes(describe=False), s["targets"], FLAGS["targets"])
        labels = target_labels(targets)

        def on_outcome(outcome) -> None:
            row: Dict[str, Any] = {"error": outcome.error}
            if outcome.status == "completed":
                row.update(store(outcome))
            if outcome.traceback:
                print(f"target {outcome.label} ({outcome.target.node_id}): {outcome.traceback}", flush=True)
            states.extra[outcome.target.node_id] = {k: v for k, v in row.items() if k in ("record_id", "name")}
            summary.append({"node_id": outcome.target.node_id, "label": outcome.label, "hostname": outcome.hostname
                            or outcome.target.hostname, "status": outcome.status, "seconds": outcome.seconds,
                            "wait_seconds": outcome.wait_seconds, **row})

        outcomes = run_on_targets(targets, call, labels=labels, progress=ctx.progress, on_state=states,
                                  on_outcome=on_outcome, cancel=ctx.cancel)
    states.flush()
    order = {o.target.node_id: i for i, o in enumerate(outcomes)}
    summary.sort(key=lambda r: order.get(r["node_id"], 0))
    if ctx.cancel is not None and ctx.cancel.is_cancelled():
        raise JobCanceled("fleet job canceled by the user")
    done = [r for r in summary if r["status"] == "completed"]
    if not done:
        raise JobError("no target finished: " + "; ".join(f"{r['label']}: {r.get('error') or r['status']}"
                                                          for r in summary))
    return {"targets": summary, "completed": len(done), "failed": len(summary) - len(done)}


def _target_tag(outcome) -> Dict[str, Any]:
    m = outcome.machine or {}
    n = outcome.target
    return {"label": outcome.label, "node_id": n.node_id, "hostname": outcome.hostname or n.hostname,
            "address": n.address, "labels": dict(n.labels), "cpu_model": m.get("cpu_model", ""),
            "cores": m.get("available_cores"), "instruction_sets": list(m.get("instruction_sets") or []),
            "ort_version": m.get("ort_version", "")}


def _guard(ctx):
    return partial(node_measure_lock, holder=f"fleet-{(ctx.job or {}).get('id') or 'job'}")


def run_profile(ctx) -> Dict[str, Any]:
    """Args: ``{address, targets, engine, precision, batch_size, core_count ("all" or N), warmup, iterations, int8,
    dims, data, name}`` (:func:`fleet_settings`); a target without that runtime fails in one line, the others run. Runs :func:`sparsify_tui.profiling.perf.profile_performance` on every target and
    stores each profile (:func:`sparsify_tui.services.profiles.store_perf_profile`, tagged with its target).
    Returns ``{targets: [{node_id, label, hostname, status, error, record_id, name, seconds}], completed, failed}``."""
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.fleet.dispatch import NodeCores, ShippedFile, TargetCall, model_files
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services.profiles import store_perf_profile

    ws, pid = ctx.ws, ctx.project_id
    model_path = ws.model_path(pid)
    s = fleet_settings("profile", ws.get_project(pid), dict(ctx.args or {}), model_path=model_path)
    files, model_arg = model_files(model_path, "model")
    data_arg = None
    if s["data"]:
        data_arg = ShippedFile(f"data/{os.path.basename(s['data'])}")
        files[data_arg.name] = s["data"]
    run = RunSpec(engine=s["engine"], precision=s["precision"], batch_size=s["batch_size"],
                  core_count=s["core_count"] if s["core_count"] is not None else NodeCores())
    kwargs = {"model_path": model_arg, "run": run, "dims": s["dims"], "warmup": s["warmup"], "iterations": s["iterations"], "data": data_arg,
              "int8": s["int8"], "name": "fleet"}
    job_id = (ctx.job or {}).get("id")

    def store(outcome) -> Dict[str, Any]:
        prof = outcome.result
        prof.name = _result_name(s["name"], outcome.label, outcome.hostname, outcome.target.node_id,
                                 str(prof.batch_size), str(prof.core_count))
        rec = store_perf_profile(ws, pid, prof, job_id=job_id, target=_target_tag(outcome))
        return {"record_id": rec["record_id"], "name": prof.name, "latency_ms": prof.latency_ms.median,
                "items_per_second": prof.items_per_second, "core_count": prof.core_count}

    return _dispatch(ctx, s, TargetCall(profile_performance, kwargs, files, guard=_guard(ctx)), store)


def run_benchmark_job(ctx) -> Dict[str, Any]:
    """Args: ``{address, targets, optimizations, batch_sizes, core_count ("all" or N), engines, precisions, warmup,
    iterations, dims, data, name}`` (:func:`fleet_settings`). Applies every optimization here first when needed (once), then runs
    :func:`sparsify_tui.benchmark.runner.run_benchmark` on every target and stores each result
    (:func:`sparsify_tui.services.benchmarks.store_benchmark`, tagged with its target). Returns like
    :func:`run_profile`."""
    from sparsify_tui.benchmark.runner import run_benchmark
    from sparsify_tui.fleet.dispatch import NodeCores, ShippedFile, TargetCall, model_files
    from sparsify_tui.services.benchmarks import benchmark_models, store_benchmark

    ws, pid = ctx.ws, ctx.project_id
    s = fleet_settings("benchmark", ws.get_project(pid), dict(ctx.args or {}), model_path=ws.model_path(pid))
    specs, opts = benchmark_models(ws, pid, s["optimizations"],
                                   progress=lambda step, frac: ctx.progress(f"here: {step}", 0.0), cancel=ctx.cancel)
    files: dict = {}
    models = []
    for i, spec in enumerate(specs):
        f, arg = model_files(spec.path, "baseline" if i == 0 else f"optimization-{i}")
        files.update(f)
        models.append((spec.label, arg, spec.optimization, spec.optimization_name))
    data_arg = None
    if s["data"]:
        data_arg = ShippedFile(f"data/{os.path.basename(s['data'])}")
        files[data_arg.name] = s["data"]
    cores = [s["core_count"]] if s["core_count"] is not None else [NodeCores()]
    kwargs = {"models": models, "batch_sizes": s["batch_sizes"], "core_counts": cores, "runtimes": s["runtimes"],
              "warmup": s["warmup"],
              "iterations": s["iterations"], "dims": s["dims"], "data": data_arg, "name": "fleet"}
    job_id = (ctx.job or {}).get("id")

    def store(outcome) -> Dict[str, Any]:
        result = outcome.result
        result.name = _result_name(s["name"], outcome.label, outcome.hostname, outcome.target.node_id,
                                   ",".join(str(b) for b in result.batch_sizes),
                                   ",".join(str(c) for c in result.core_counts))
        for m, spec in zip(result.models, specs):
            m.path = spec.path  # the files here, not the node's temp copies
        result.data = s["data"]
        stored_args = {"name": result.name, "optimizations": [o.id for o in opts],
                       "batch_sizes": result.batch_sizes, "core_counts": result.core_counts,
                       "warmup": result.warmup, "iterations": result.iterations, "fleet_job": job_id}
        rec = store_benchmark(ws, pid, result, stored_args, target=_target_tag(outcome))
        speedups = [r.speedup for r in result.runs if r.model != result.baseline_label]
        return {"record_id": rec["id"], "name": result.name, "best_speedup": max(speedups) if speedups else None}

    return _dispatch(ctx, s, TargetCall(run_benchmark, kwargs, files, guard=_guard(ctx)), store)
