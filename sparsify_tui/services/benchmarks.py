"""Benchmarks of a project: the baseline model and the chosen optimizations (applied first when their file is
missing or stale) measured side by side, stored as a record plus the full result in a data file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from sparsify_tui import settings
from sparsify_tui.progress import CancelToken, ProgressFn
from sparsify_tui.services.apply import ensure_applied, is_applied
from sparsify_tui.services.optimizations import get_optimization
from sparsify_tui.store.workspace import new_id, now_iso

if TYPE_CHECKING:
    from sparsify_tui.benchmark.runner import BenchmarkResult

TABLE = "benchmarks"


def benchmark_record(result, args: dict) -> dict:
    """The small record stored in the "benchmarks" table (the full result is the data file)."""
    return {
        "name": result.name,
        "args": dict(args),
        "models": [{"label": m.label, "optimization": m.optimization_name, "optimization_id": m.optimization}
                   for m in result.models],
        "batch_sizes": result.batch_sizes,
        "core_counts": result.core_counts,
        "warmup": result.warmup,
        "iterations": result.iterations,
        "seconds": result.seconds,
        "summary": [{"model": r.model, "batch_size": r.batch_size, "core_count": r.core_count,
                     "median_ms": r.median_ms, "items_per_second": r.items_per_second, "speedup": r.speedup}
                    for r in result.runs],
        **({"accuracy": {"metric": result.accuracy["metric"], "label": result.accuracy["label"],
                         **({"user_metric": result.accuracy["user_metric"]} if result.accuracy.get("user_metric")
                            else {}),
                         "models": {k: {"drop": v["drop"], "accuracy": v["accuracy"],
                                        "top1_agreement": v["top1_agreement"], "nmse": v["nmse"],
                                        **({"score": v["score"]} if "score" in v else {})}
                                    for k, v in result.accuracy["models"].items()}}}
           if result.accuracy else {}),
    }


def load_benchmark(ws, project_id: str, ref: str):
    """The stored :class:`~sparsify_tui.benchmark.runner.BenchmarkResult` of benchmark record ``ref``."""
    from sparsify_tui.benchmark.runner import BenchmarkResult

    rec = ws.find_record(project_id, TABLE, ref)
    res = BenchmarkResult.from_dict(ws.read_record_blob(project_id, TABLE, rec["id"]))
    res.id = rec["id"]
    return res


def benchmark_models(ws, project_id: str, refs: list, *, progress: Optional[ProgressFn] = None,
                     cancel: Optional[CancelToken] = None) -> tuple[list, list]:
    """The models of a benchmark: ``(specs, optimizations)`` with ``specs`` the baseline then each optimization
    ``refs`` (ids or names) as :class:`~sparsify_tui.benchmark.runner.ModelSpec`, each optimization applied first
    when it has no up-to-date optimized file (``progress`` covers the applying, 0..1)."""
    from sparsify_tui.benchmark.runner import ModelSpec

    prog = progress or (lambda step, frac: None)
    models = [ModelSpec("baseline", str(ws.model_path(project_id)), None)]
    opts = [get_optimization(ws, project_id, str(r)) for r in refs]
    for i, o in enumerate(opts):
        if cancel is not None:
            cancel.check()
        lo, span = i / max(1, len(opts)), 1.0 / max(1, len(opts))
        label = o.name or o.id

        def sub(step, frac, _lo=lo, _span=span, _label=label):
            prog(f"applying {_label}: {step}", _lo + _span * frac)

        _opt, path = ensure_applied(ws, project_id, o.id, progress=sub, cancel=cancel)
        if any(m.label == label for m in models):
            label = f"{label} ({o.id[:6]})"
        models.append(ModelSpec(label, str(path), o.id, o.name or o.id))
    return models, opts


def store_benchmark(ws, project_id: str, result, stored_args: dict, *, target: Optional[dict] = None,
                    rerun_of: Optional[str] = None) -> dict:
    """Store a :class:`~sparsify_tui.benchmark.runner.BenchmarkResult` (data file, then record; a new id and
    creation time); ``target``: the fleet target it ran on, kept on the record and in its data file (None: this
    machine); ``rerun_of``: the id of the benchmark a rerun replaces (it keeps that id and its name). Returns the
    record."""
    result.id, result.created = (str(rerun_of) if rerun_of else new_id()), now_iso()
    fields = benchmark_record(result, stored_args)
    blob = result.to_dict()
    if target:
        fields["target"], blob["target"] = target, target
    if rerun_of:
        return ws.replace_record_blob(project_id, TABLE, result.id, blob, **fields)
    return ws.add_record_with_blob(project_id, TABLE, {"id": result.id, "created": result.created, **fields}, blob)


def benchmark_project(ws, project_id: str, args: dict, *, progress: Optional[ProgressFn] = None,
                      cancel: Optional[CancelToken] = None) -> "BenchmarkResult":
    """Run a project benchmark from job ``args`` and store it; returns the stored
    :class:`~sparsify_tui.benchmark.runner.BenchmarkResult` (its ``id`` the record's).

    ``args``: ``name`` (default "benchmark N"), ``optimizations`` (ids or names; each is applied first
    when it has no up-to-date optimized file), ``batch_sizes`` / ``core_counts`` (default the project
    setup), ``engines`` / ``precisions`` (default: each optimization's own runtime; the reference, the baseline on
    onnxruntime fp32, is always measured), ``warmup`` (5), ``iterations`` (30), ``dims`` (default setup dims), ``data`` (sample file),
    ``record_id`` (a rerun: the result replaces that record's, which keeps its id and name).
    Progress: applying takes the first 30 % of the bar when anything must be applied.
    """
    from sparsify_tui.benchmark.runner import run_benchmark
    from sparsify_tui.services.job_settings import benchmark_settings

    project = ws.get_project(project_id)
    s = benchmark_settings(project, args, model_path=ws.model_path(project_id))
    refs = [str(r) for r in (args.get("optimizations") or [])]
    name = args.get("name") or f"benchmark {len(ws.list_records(project_id, TABLE)) + 1}"
    prog = progress or (lambda step, frac: None)
    to_apply = [r for r in refs if not is_applied(ws, project_id, get_optimization(ws, project_id, r))]
    apply_share = 0.3 if to_apply else 0.0
    models, opts = benchmark_models(ws, project_id, refs, progress=lambda st, f: prog(st, apply_share * f),
                                    cancel=cancel)

    def bprog(step, frac):
        prog(step, apply_share + (1 - apply_share) * frac)

    runtimes = s["runtimes"] if s["runtimes"] is not None else sorted({o.target_runtime for o in opts})
    result = run_benchmark(models, batch_sizes=s["batch_sizes"], core_counts=s["core_counts"], runtimes=runtimes,
                           warmup=s["warmup"], iterations=s["iterations"], dims=s["dims"], data=args.get("data"),
                           name=name, labels_key=args.get("labels"), metric=settings.metric(args.get("metric")),
                           progress=bprog, cancel=cancel)
    result.warnings = list(s["runtime_notes"]) + result.warnings
    stored_args = {"name": name, "optimizations": [o.id for o in opts], "batch_sizes": s["batch_sizes"],
                   "core_counts": s["core_counts"], "warmup": result.warmup, "iterations": result.iterations}
    if s["runtimes"] is not None:
        stored_args["engines"] = sorted({e for e, _ in s["runtimes"]})
        stored_args["precisions"] = sorted({p for _, p in s["runtimes"]})
    if args.get("data"):
        stored_args["data"] = str(args["data"])
    if args.get("labels"):
        stored_args["labels"] = str(args["labels"])
    if s["metric"]:
        stored_args["metric"] = s["metric"]  # a user metric as /absolute/FILE.py:FUNCTION
    store_benchmark(ws, project_id, result, stored_args, rerun_of=args.get("record_id"))
    from sparsify_tui.services.measured import record_measured

    record_measured(ws, project_id, result, [o.id for o in opts], baseline_path=models[0].path,
                    data=args.get("data"), progress=prog, cancel=cancel)
    return result
