"""Optimizations (or versions of one) side by side: settings, per-layer sparsity, estimates, measured results.

:func:`compare_optimizations` takes typed records (:class:`~sparsify_tui.optimization.record.Optimization`) and, per
record, what was measured of it (the applied file's output difference and size, benchmark runs; gathered from the
workspace by :func:`sparsify_tui.services.comparisons.compare_optimizations`). Every row carries one value per
optimization, in the order given, and ``differs`` when they are not all equal, so a reader finds what changed
between two versions at a glance. Structure-specific fields (a structure's own settings, row or estimate fields)
are compared like the shared ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Optional, Sequence

from sparsify_tui.optimization.record import LayerRow, Optimization

#: (estimate field, label, unit) shown first, in this order; other numeric estimate fields follow.
ESTIMATE_ROWS = (
    ("sparse_ms", "est. ms/batch, sparse-kernel runtime", "ms"),
    ("sparse_speedup", "est. speedup, sparse-kernel runtime", "x"),
    ("ort_ms", "est. ms/batch, onnxruntime", "ms"),
    ("ort_speedup", "est. speedup, onnxruntime", "x"),
    ("int8_factor", "measured INT8 time factor", "x"),
    ("flops_reduction", "FLOPs reduction", "x"),
    ("params_compression", "params compression", "x"),
    ("est_size_mb", "est. weights MB", "MB"),
    ("avg_sparsity", "average sparsity (params-weighted)", ""),
    ("est_recovery", "est. recovery (heuristic)", "%"),
)
_BASE_ROW_FIELDS = {f.name for f in fields(LayerRow)}


def _differs(values: Sequence[Any]) -> bool:
    present = [v for v in values]
    return any(v != present[0] for v in present[1:])


@dataclass
class ValueRow:
    """One compared quantity: ``key``, ``label``, ``unit`` ("ms", "x", "MB", "%" (a fraction shown as a percentage)
    or ""), one value per optimization
    (None when it has none) and ``differs``."""

    key: str
    label: str
    unit: str
    values: list
    differs: bool

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LayerCompareRow:
    """One prunable layer: ``weight_name``, ``node_id``, ``op_type``, ``params``, ``sparsity`` per optimization
    (0..1; None when the layer is not in it), ``overridden`` per optimization, ``extra`` (a structure's own numeric
    row fields, e.g. kept channels: key -> one value per optimization) and ``differs``."""

    weight_name: str
    node_id: str
    op_type: Optional[str]
    params: int
    sparsity: list
    overridden: list
    differs: bool
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OptimizationComparison:
    """Result of :func:`compare_optimizations`; ``to_dict()`` is the ``compare --optimizations --json`` document:
    ``{"kind": "optimizations", "optimizations": [{"id", "name", "structure", "perf_profile", "loss_profile"}],
    "settings": [ValueRow], "estimates": [ValueRow], "layers": [LayerCompareRow], "measured": [per optimization:
    {"applied": {...} | None, "benchmarks": [...]}], "notes"}``."""

    optimizations: list
    settings: list
    estimates: list
    layers: list
    measured: list
    notes: list = field(default_factory=list)

    @property
    def names(self) -> list:
        return [o["name"] for o in self.optimizations]

    def to_dict(self) -> dict:
        return {"kind": "optimizations", "optimizations": list(self.optimizations),
                "settings": [r.to_dict() for r in self.settings], "estimates": [r.to_dict() for r in self.estimates],
                "layers": [r.to_dict() for r in self.layers], "measured": list(self.measured),
                "notes": list(self.notes)}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def compare_optimizations(records: Sequence[Any], measured: Optional[Mapping[str, dict]] = None
                          ) -> OptimizationComparison:
    """Compare optimizations side by side.

    Args:
        records: two or more :class:`~sparsify_tui.optimization.record.Optimization` or stored dicts (with ``id``).
        measured: record id -> ``{"applied": {"output_diff": {...}, "file_size_bytes", "baseline_size_bytes",
            "quantized", "applied_at", "stale"} | None, "benchmarks": [{"benchmark", "batch_size", "core_count",
            "median_ms", "p90_ms", "items_per_second", "speedup"}]}``.

    Returns: :class:`OptimizationComparison` (rows in the records' order; layers in the first record's graph
    order, then layers only the others have).

    Raises: ``ValueError`` with fewer than two records.
    """
    recs = [r if isinstance(r, Optimization) else Optimization.from_dict(r) for r in records]
    if len(recs) < 2:
        raise ValueError("compare needs two or more optimizations")
    measured = dict(measured or {})
    heads = [{"id": r.id, "name": r.name, "structure": r.settings.structure, "perf_profile": r.perf_profile_name,
              "loss_profile": r.loss_profile_name} for r in recs]
    meas = [measured.get(r.id or "", {"applied": None, "benchmarks": []}) for r in recs]
    notes = []
    if len({h["structure"] for h in heads}) > 1:
        notes.append("the optimizations prune different structures: per-layer values mean different things")
    if len({h["perf_profile"] for h in heads}) > 1:
        notes.append("built from different perf profiles: their time estimates have different baselines")
    return OptimizationComparison(optimizations=heads, settings=_settings_rows(recs), estimates=_estimate_rows(recs),
                                  layers=_layer_rows(recs), measured=meas, notes=notes)


def _settings_rows(recs: Sequence[Optimization]) -> list:
    """Every settings field of any of ``recs`` (a structure's own too), then the profiles, INT8, overrides, epochs."""
    settings: list[ValueRow] = []
    keys: list = []
    for r in recs:
        for k in r.settings.to_dict():
            if k not in keys:
                keys.append(k)
    for k in keys:
        vals = [r.settings.to_dict().get(k) for r in recs]
        settings.append(ValueRow(k, k.replace("_", " "), "", vals, _differs(vals)))
    extra_settings = [
        ("perf_profile", "perf profile", [r.perf_profile_name for r in recs]),
        ("loss_profile", "loss profile", [r.loss_profile_name for r in recs]),
        ("quantize", "INT8 quantization", [bool(r.quantization.enabled) for r in recs]),
        ("fp32_layers", "layers kept FP32", [len(r.quantization.excluded) if r.quantization.enabled else 0
                                             for r in recs]),
        ("overrides", "per-layer overrides", [len(r.overrides) for r in recs]),
        ("total_epochs", "training epochs", [r.epochs.total_epochs for r in recs]),
    ]
    return settings + [ValueRow(k, label, "", vals, _differs(vals)) for k, label, vals in extra_settings]


def _estimate_rows(recs: Sequence[Optimization]) -> list:
    """The rows of :data:`ESTIMATE_ROWS`, then any other numeric estimate a structure adds."""
    est_dicts = [r.estimates.to_dict() if r.estimates is not None else {} for r in recs]
    estimates = []
    for k, label, unit in ESTIMATE_ROWS:
        vals = [d.get(k) for d in est_dicts]
        estimates.append(ValueRow(k, label, unit, vals, _differs(vals)))
    shown = {k for k, _, _ in ESTIMATE_ROWS} | {"baseline_ms", "flops", "params", "size_mb_fp32", "flops_pruned",
                                                "params_nonzero", "max_reachable"}
    for k in [k for d in est_dicts for k, v in d.items() if _num(v) and k not in shown]:
        shown.add(k)
        vals = [d.get(k) for d in est_dicts]
        estimates.append(ValueRow(k, k.replace("_", " "), "", vals, _differs(vals)))
    return estimates


def _layer_rows(recs: Sequence[Optimization]) -> list:
    """One row per layer (the first record's graph order, then layers only the others have): sparsity, override,
    and any numeric field of a structure's own rows."""
    layers: list[LayerCompareRow] = []
    order: list = []
    by: list = []
    for r in recs:
        rows = {l.weight_name: l for l in r.layers}
        by.append(rows)
        order += [w for w in rows if w not in order]
    for w in order:
        present = [rows.get(w) for rows in by]
        first = next(x for x in present if x is not None)
        sp = [x.sparsity if x is not None else None for x in present]
        extra: dict = {}
        for x in present:
            if x is None:
                continue
            for k, v in x.to_dict().items():
                if k not in _BASE_ROW_FIELDS and _num(v) and k not in extra:
                    extra[k] = [(y.to_dict().get(k) if y is not None else None) for y in present]
        layers.append(LayerCompareRow(
            weight_name=w, node_id=first.node_id, op_type=first.op_type, params=int(first.params or 0), sparsity=sp,
            overridden=[bool(x is not None and x.override) for x in present],
            differs=_differs(sp) or any(_differs(v) for v in extra.values()), extra=extra))
    return layers