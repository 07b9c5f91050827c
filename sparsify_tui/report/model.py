"""The report as typed data, and the builders of its entries.

Units: ``*_ms`` milliseconds per batch, ``items_per_second`` items/s, ``share`` fraction 0..1 of a profile's total
node time, ``*_bytes`` bytes, sparsities 0..1, speedups and ratios as plain factors (2.0 = twice as fast).
``Report.to_dict()`` is the ``report --format json`` document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from sparsify_tui.engine.run import runtime_label


@dataclass
class LayerTime:
    """A row of a perf profile in a report: ``id`` (node id), ``op_type``, ``time_ms`` (measured in the profiled pass,
    scaled to the unprofiled median: :meth:`PerfProfile.node_ms`), ``share`` of the profile's node total,
    ``int8_time_ms`` (measured in the INT8 model and scaled the same way; None without)."""

    id: str
    op_type: str
    time_ms: float
    share: float
    int8_time_ms: Optional[float] = None


@dataclass
class PerfEntry:
    """One perf profile: settings, measured latency (``latency_ms``: median/p90/mean/min of unprofiled runs),
    ``items_per_second``, INT8 (``int8_median_ms``: ms per batch on the FP32 median's clock,
    :attr:`~sparsify_tui.profiling.perf.PerfProfile.int8_ms`; ``int8_speedup``: the one INT8 ratio, FP32 / INT8
    timed interleaved, :attr:`~sparsify_tui.profiling.perf.Int8Profile.ratio`, and ``int8_round_ratios`` its value
    in each round; ``int8_error``), ``profiled_runs`` (each node's time is its median over them), ``target`` (the
    machine: hostname, cpu_model, instruction_sets, cores, runtime: engine, version, precision), ``node_total_ms``
    (sum of all rows),
    ``op_types`` (time per op type, most first, as :class:`LayerTime` with ``id`` = op type) and ``top`` (the slowest
    nodes), ``imported`` (where an imported profile came from), ``warnings`` (noisy timing, a failed INT8 pass...:
    the profile's own, as the TUI's summary shows them)."""

    name: str
    id: Optional[str]
    batch_size: int
    core_count: int
    latency_ms: dict
    items_per_second: float
    int8_median_ms: Optional[float]
    int8_speedup: Optional[float]
    int8_error: Optional[str]
    target: dict
    node_total_ms: float
    op_types: list
    top: list
    created: str = ""
    imported: Optional[dict] = None
    warnings: list = field(default_factory=list)
    int8_round_ratios: list = field(default_factory=list)
    profiled_runs: Optional[int] = None


@dataclass
class LayerSensitivity:
    """A layer in a loss entry: ``id`` (node id), ``weight_name``, ``op_type``, ``params``, ``value`` (sensitivity at
    the entry's level, in its metric), ``rank`` (1 = most sensitive)."""

    id: str
    weight_name: str
    op_type: str
    params: int
    value: float
    rank: int


@dataclass
class LossEntry:
    """One loss profile: ``method``, ``metric`` and its description, ``level`` (sparsity of the values),
    ``average_sensitivity``, ``est_recovery`` (heuristic), ``layers`` (count), ``most`` / ``least`` sensitive."""

    name: str
    id: Optional[str]
    method: str
    metric: str
    metric_description: str
    level: float
    average_sensitivity: Optional[float]
    est_recovery: Optional[float]
    layers: int
    most: list
    least: list


@dataclass
class OptimizationEntry:
    """One optimization: ``settings`` (its stored settings and quantization, by field name), ``setting_rows``
    (``[label, value]`` of the settings its structure uses, as the Markdown and HTML show them:
    :meth:`~sparsify_tui.optimization.structures.base.PruningStructure.settings_rows`), ``estimates`` (labelled
    *est.*), ``layers`` / ``pruned_layers`` (counts of its rows: layers, or channel groups) and ``rows_summary``
    (``"5 of 18 groups thinned"``), ``applied`` (output difference and file sizes of the applied model, or None),
    ``benchmarks`` (its measured runs: batch, cores, median, items/s, speedup), ``warnings`` (every one
    ``optimization show`` prints: :meth:`~sparsify_tui.optimization.record.Optimization.all_warnings`),
    ``predicted`` (what the budget search measured on its held-out items, in its metric, or the estimate:
    :func:`~sparsify_tui.optimization.fidelity.predicted_change`) and ``unreliable`` (the estimates' flag when the
    measurements they come from were noisy: :func:`~sparsify_tui.optimization.estimates.noise_flag`; None
    otherwise)."""

    name: str
    id: Optional[str]
    structure: str
    perf_profile: str
    loss_profile: str
    settings: dict
    estimates: dict
    layers: int
    pruned_layers: int
    applied: Optional[dict]
    benchmarks: list
    rows_summary: str = ""
    warnings: list = field(default_factory=list)
    setting_rows: list = field(default_factory=list)
    predicted: str = ""
    search_metric: str = ""
    unreliable: Optional[str] = None


def search_metric(rec: Any) -> str:
    """The metric the optimization's search (budget search, else INT8 search) judged it by, with why: a metric of
    the user's own by its name, file and sha256; "" when no search made it."""
    s = rec.search if rec.search is not None else rec.quantization.search
    if s is None:
        return ""
    um = s.user_metric
    if um:
        from pathlib import Path

        return (f"{um.get('name')} ({Path(str(um.get('path'))).name}, sha256 {str(um.get('sha256'))[:12]}, "
                f"{'higher' if um.get('higher_is_better', True) else 'lower'} is better), budget {s.max_drop:g}")
    return f"{s.metric} ({s.metric_reason}), budget {s.max_drop:g}"


@dataclass
class BenchmarkRow:
    """One measured (model, batch, cores): ``model`` label, median/p90 ms per batch, items/s, speedup vs baseline,
    ``noise`` (why its runs disagree, e.g. "p90 2.4× median": the machine was busy; "" when they agree)."""

    model: str
    batch_size: int
    core_count: int
    median_ms: float
    p90_ms: float
    items_per_second: float
    speedup: Optional[float]
    noise: str = ""


@dataclass
class BenchmarkEntry:
    """One benchmark: ``models`` (labels), ``rows`` (:class:`BenchmarkRow`), ``warmup`` / ``iterations``, the machine
    (``system``), ``engine`` (how sessions were configured), ``created`` and ``accuracy`` (every model's outputs
    against the baseline's on the same items: :func:`sparsify_tui.benchmark.runner.measure_accuracy`'s ``metric``,
    ``label``, ``labelled``, ``items``, ``data`` and per model ``accuracy`` (top-1 against labels, 0..1),
    ``top1_agreement`` (0..1), ``nmse``; None when the benchmark measured none), ``runtimes`` (the runtime labels
    measured, the reference first), ``reference`` (what every speedup is against) and ``warnings``."""

    name: str
    id: Optional[str]
    created: str
    models: list
    rows: list
    warmup: int
    iterations: int
    system: dict
    engine: str
    accuracy: Optional[dict] = None
    runtimes: list = field(default_factory=list)
    reference: str = ""
    warnings: list = field(default_factory=list)


@dataclass
class Report:
    """A project report: ``project`` (name, description, created), ``model`` (file, sha256, size_bytes, params, macs,
    flops, opset, nodes, prunable_layers), ``machine`` (this machine, where the report was written), and one entry
    per perf profile, loss profile, optimization and benchmark."""

    title: str
    generated: str
    version: str
    project: dict
    model: dict
    machine: dict
    perf: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    optimizations: list = field(default_factory=list)
    benchmarks: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"format": "sparsify-tui/report", "format_version": 1, **asdict(self)}


# ---------------------------------------------------------------------------------------------- builders
def perf_entry(profile, *, record_id: Optional[str] = None, top: int = 10, imported: Optional[dict] = None
               ) -> PerfEntry:
    """The report entry of a :class:`~sparsify_tui.profiling.perf.PerfProfile` with its ``top`` slowest nodes."""
    ms = {n.id: float(profile.node_ms(n) or 0.0) for n in profile.nodes}  # scaled, as every screen shows them
    total = float(sum(ms.values()))
    i8 = profile.int8
    ok = i8.ok
    ops = profile.op_type_totals("baseline")
    op_i8 = profile.op_type_totals("int8") if ok else {}
    op_types = [LayerTime(k, k, v, v / total if total else 0.0, op_i8.get(k))
                for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    nodes = sorted((n for n in profile.nodes if ms[n.id] > 0), key=lambda n: -ms[n.id])[:top]
    machine = profile.machine
    settings = profile.settings or {}
    target = {"hostname": machine.hostname, "cpu_model": machine.cpu_model or settings.get("cpu_model"),
              "instruction_sets": list(machine.instruction_sets or profile.instruction_sets or []),
              "available_cores": machine.available_cores or settings.get("available_cores"),
              "runtime": runtime_label(profile.engine, profile.engine_version, profile.precision)}
    return PerfEntry(
        name=profile.name, id=record_id, batch_size=int(profile.batch_size), core_count=int(profile.core_count),
        latency_ms=profile.latency_ms.to_dict(), items_per_second=float(profile.items_per_second or 0.0),
        int8_median_ms=profile.int8_ms if ok else None,
        int8_speedup=i8.ratio if ok else None, int8_error=i8.error, target=target,
        int8_round_ratios=i8.round_ratios if ok else [], profiled_runs=profile.profiled.runs,
        node_total_ms=total, op_types=op_types,
        top=[LayerTime(n.id, n.op_type, ms[n.id], ms[n.id] / total if total else 0.0,
                       profile.node_ms(n, "int8")) for n in nodes],
        created=profile.created or "", imported=imported, warnings=[str(w) for w in profile.warnings or []])


def loss_entry(profile, *, record_id: Optional[str] = None, level: float = 0.9, n: int = 5) -> LossEntry:
    """The report entry of a :class:`~sparsify_tui.profiling.loss.LossProfile`: its ``n`` most and least sensitive
    layers at sparsity ``level`` (0..1)."""
    vals = [(layer, float(layer.value_at(level))) for layer in profile.layers]
    ranked = sorted(vals, key=lambda lv: -lv[1])
    rows = [LayerSensitivity(l.id, l.weight_name, l.op_type, int(l.params), v, i + 1) for i, (l, v) in enumerate(ranked)]
    return LossEntry(
        name=profile.name, id=record_id, method=profile.method, metric=profile.metric,
        metric_description=profile.metric_description, level=float(level),
        average_sensitivity=profile.average_sensitivity(), est_recovery=profile.est_recovery(),
        layers=len(rows), most=rows[:n], least=list(reversed(rows[-n:])) if len(rows) > n else [])


#: (estimate key, label) shown in reports, in this order
ESTIMATE_FIELDS = (
    ("sparse_ms", "est. ms/batch, sparse-kernel runtime"), ("sparse_speedup", "est. speedup, sparse-kernel runtime"),
    ("ort_ms", "est. ms/batch, onnxruntime"), ("ort_speedup", "est. speedup, onnxruntime"),
    ("flops_reduction", "FLOPs reduction"), ("macs_reduction", "MACs reduction"),
    ("params_compression", "params compression"),
    ("avg_sparsity", "average sparsity"), ("est_recovery", "est. recovery (heuristic)"),
)


def optimization_entry(record: Any, measured: Optional[dict] = None) -> OptimizationEntry:
    """The report entry of an optimization (typed record or stored dict) with what was measured of it
    (:func:`sparsify_tui.services.comparisons.measured_results`)."""
    from sparsify_tui.optimization.estimates import noise_flag
    from sparsify_tui.optimization.fidelity import predicted_change
    from sparsify_tui.optimization.record import Optimization
    from sparsify_tui.optimization.structures import load_optimization, structure_of

    rec = record if isinstance(record, Optimization) else load_optimization(record)
    kind = structure_of(rec)
    est = rec.estimates.to_dict() if rec.estimates is not None else {}
    settings = dict(rec.settings.to_dict())
    settings["quantize"] = bool(rec.quantization.enabled)
    if rec.quantization.enabled:
        settings["fp32_layers"] = len(rec.quantization.excluded)
    settings["overrides"] = len(rec.overrides)
    rows = [[label, value] for label, value in kind.settings_rows(rec.settings)]
    rows.append(["INT8 quantization", bool(rec.quantization.enabled)])
    if rec.quantization.enabled:
        rows.append(["layers kept FP32", len(rec.quantization.excluded)])
    rows.append(["overrides", len(rec.overrides)])
    measured = measured or {}
    return OptimizationEntry(
        name=rec.name, id=rec.id, structure=rec.settings.structure, perf_profile=rec.perf_profile_name,
        loss_profile=rec.loss_profile_name, settings=settings,
        estimates={k: est.get(k) for k, _ in ESTIMATE_FIELDS},
        layers=len(rec.layers), pruned_layers=sum(1 for l in rec.layers if (l.sparsity or 0) > 0),
        applied=measured.get("applied"), benchmarks=list(measured.get("benchmarks") or []),
        rows_summary=kind.rows_summary(rec), warnings=rec.all_warnings(), setting_rows=rows,
        predicted=predicted_change(rec), search_metric=search_metric(rec),
        unreliable=noise_flag(rec.noise_sources()))


def benchmark_entry(result) -> BenchmarkEntry:
    """The report entry of a :class:`~sparsify_tui.benchmark.runner.BenchmarkResult`."""
    import math

    rows = [BenchmarkRow(r.model, r.batch_size, r.core_count, r.median_ms, r.p90_ms, r.items_per_second,
                         None if r.speedup is None or (isinstance(r.speedup, float) and math.isnan(r.speedup))
                         else r.speedup, ", ".join(r.noise(result.rounds)))
            for r in result.runs]
    return BenchmarkEntry(name=result.name, id=result.id, created=result.created or "",
                          models=[m.label for m in result.models], rows=rows, warmup=result.warmup,
                          iterations=result.iterations, system=dict(result.system or {}), engine=result.engine,
                          accuracy=result.accuracy, runtimes=[r["label"] for r in result.runtimes],
                          reference=result.reference_label, warnings=list(result.warnings))
