"""Optimization settings and the per-layer inputs built from the analysis, a perf profile and a loss profile.

Everything here works on plain dicts (the stored JSON shapes of issues 2, 3 and 4) so it runs without a
workspace and without onnxruntime:

* analysis dict: ``{"nodes": [{"id", "op_type", "weight_name", "weight_shape", "params", "prunable",
  "flops", "attrs": {"group"}, "input_shapes", ...}], "totals": {...}}``;
* perf profile dict: ``{"profile": {"latency_ms": {"median"}, "int8": {...}}, "nodes": [{"id",
  "weight_name", "time_ms", "est_pruned_ms": {"0.4": ms, ...}, "int8_time_ms"}]}`` or ``None`` for the
  FLOPS profile (time proportional to FLOPs);
* loss profile dict: ``{"profile": {...}, "layers": [{"id", "weight_name", "params", "sensitivity":
  {"0.0": v, ...}, "int8_sensitivity"}]}``.

Each layer gets two curves sampled on :data:`GRID_LEVELS`: ``time_ms`` (estimated time at sparsity s) and
``loss`` (sensitivity at s, made non-decreasing). They are stored in the optimization record so that
re-evaluation needs no profile again.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

GRID_LEVELS: List[float] = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99]
"""Sparsity levels at which per-layer time and loss curves are stored (linear interpolation between)."""

SPARSE_RUNTIME_TIME_FACTOR: Dict[float, float] = {
    0.0: 1.0, 0.8: 1.0, 0.85: 1.0, 0.9: 0.96, 0.95: 0.70, 0.975: 0.60, 0.99: 0.55,
}
"""Layer time at sparsity s relative to dense, on a CPU runtime with unstructured-sparse kernels, used only
for the FLOPS profile (no measured perf profile). Derived from the ResNet-50 whole-model figures of
DeepSparse 1.8 in shared/calibration.md (0.90: 1.04x, 0.95: 1.42x, 0.98: 1.76x; below 0.85 such runtimes
are no faster, so we assume they fall back to dense kernels). A FLOPs-proportional estimate would be wrong
by an order of magnitude."""

SPARSE_RUNTIME = "a CPU runtime with unstructured-sparse kernels (DeepSparse-like)"
ORT_NOTE = "onnxruntime gets no speedup from unstructured sparsity (it has no sparse kernels)"


@dataclass
class Settings:
    """Settings of an optimization (all editable; stored in the record under ``settings``).

    ``sparsity``: target params-weighted average sparsity over all prunable layers (0..1).
    ``balance``: 0 = rank by time saved only, 1 = by loss sensitivity only.
    ``min_sparsity``: a layer gets 0 or at least this. ``min_perf_gain``: a layer whose time saved at
    the cap is below this fraction of the model's time stays dense. ``min_recovery``: a layer's sparsity
    is capped where its recoverability drops below this (0..1). ``max_sparsity``: per-layer cap.
    ``dense_first_layer`` / ``dense_grouped``: keep the first layer / depthwise and grouped convs dense.
    """

    sparsity: float = 0.85
    balance: float = 0.5
    min_sparsity: float = 0.4
    min_perf_gain: float = 0.0
    min_recovery: float = 0.0
    max_sparsity: float = 0.95
    dense_first_layer: bool = True
    dense_grouped: bool = True

    def validate(self) -> "Settings":
        """Raise ``ValueError`` (one line) on out-of-range values; returns self."""
        for key in ("sparsity", "balance", "min_sparsity", "min_recovery", "max_sparsity", "min_perf_gain"):
            v = float(getattr(self, key))
            if not (0.0 <= v <= 1.0) or math.isnan(v):
                raise ValueError(f"{key} must be between 0 and 1, got {v}")
            setattr(self, key, v)
        if self.max_sparsity > 0.99:
            raise ValueError("max_sparsity must be at most 0.99")
        if self.min_sparsity > self.max_sparsity:
            raise ValueError("min_sparsity must not exceed max_sparsity")
        return self

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> "Settings":
        d = d or {}
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def interp_curve(points: Dict[float, float], s: float) -> float:
    """Piecewise-linear interpolation of ``points`` {sparsity: value} at ``s`` (clamped at the ends)."""
    xs = sorted(points)
    if not xs:
        return 0.0
    if s <= xs[0]:
        return float(points[xs[0]])
    if s >= xs[-1]:
        return float(points[xs[-1]])
    for a, b in zip(xs, xs[1:]):
        if a <= s <= b:
            if b == a:
                return float(points[b])
            return float(points[a] + (points[b] - points[a]) * (s - a) / (b - a))
    return float(points[xs[-1]])  # pragma: no cover


def _levels(d: Optional[Dict[str, Any]]) -> Dict[float, float]:
    out: Dict[float, float] = {}
    for k, v in (d or {}).items():
        try:
            if v is not None and not math.isnan(float(v)):
                out[float(k)] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def _group(node: Dict[str, Any]) -> int:
    attrs = node.get("attrs") or {}
    g = attrs.get("group", node.get("group"))
    try:
        return int(g) if g is not None else 1
    except (TypeError, ValueError):
        return 1


def is_grouped_conv(node: Dict[str, Any]) -> bool:
    """True for a Conv with ``group > 1`` (depthwise or grouped)."""
    return node.get("op_type") == "Conv" and _group(node) > 1


def prunable_nodes(analysis: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Prunable layer nodes (Conv/Gemm/MatMul with an initializer weight) of an analysis dict, graph order."""
    return [n for n in analysis.get("nodes", []) if n.get("prunable") and n.get("weight_name")]


def _node_by(items: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for it in items:
        for key in (it.get("weight_name"), it.get("id")):
            if key and key not in out:
                out[key] = it
    return out


def perf_model_ms(perf: Optional[Dict[str, Any]]) -> Optional[float]:
    """Measured FP32 ms per batch of a perf profile dict (median latency; else the sum of node times)."""
    if not perf:
        return None
    lat = (perf.get("profile") or {}).get("latency_ms") or {}
    if lat.get("median"):
        return float(lat["median"])
    total = sum(float(n.get("time_ms") or 0.0) for n in perf.get("nodes", []))
    return total or None


def perf_int8_ms(perf: Optional[Dict[str, Any]]) -> Optional[float]:
    """Measured INT8 ms per batch of a perf profile dict, or None when INT8 was not measured or failed."""
    if not perf:
        return None
    int8 = (perf.get("profile") or {}).get("int8") or {}
    if not isinstance(int8, dict) or int8.get("error") or int8.get("enabled") is False:
        return None
    for path in (("latency_ms", "median"), ("median_ms",), ("ms_per_batch",), ("median",), ("time_ms",)):
        cur: Any = int8
        for k in path:
            cur = cur.get(k) if isinstance(cur, dict) else None
        if isinstance(cur, (int, float)) and cur > 0:
            return float(cur)
    return None


def build_layers(analysis: Dict[str, Any], perf: Optional[Dict[str, Any]],
                 loss: Optional[Dict[str, Any]], settings: Settings) -> List[Dict[str, Any]]:
    """Per-layer inputs of the allocation, in graph order.

    Each dict: ``weight_name, node_id, op_type, params`` (weight elements), ``flops, group,
    baseline_ms`` (measured, or None for FLOPS), ``time_curve`` / ``loss_curve`` (lists aligned with
    :data:`GRID_LEVELS`; time in ms, or in relative FLOPs units for the FLOPS profile), ``gain_curve``
    (relative time saved used for ranking), ``int8_sensitivity``, ``int8_time_ms``, ``excluded``
    (reason string or None: "first layer", "depthwise/grouped conv").
    """
    nodes = prunable_nodes(analysis)
    perf_nodes = _node_by(perf.get("nodes", [])) if perf else {}
    loss_layers = _node_by(loss.get("layers", [])) if loss else {}
    total_flops = float((analysis.get("totals") or {}).get("flops") or 0) or \
        sum(float(n.get("flops") or 0) for n in nodes) or 1.0
    layers: List[Dict[str, Any]] = []
    for i, n in enumerate(nodes):
        wname, nid = n["weight_name"], n.get("id") or n["weight_name"]
        params = int(n.get("params_weight") or _prod(n.get("weight_shape")) or n.get("params") or 0)
        flops = float(n.get("flops") or 0)
        pn = perf_nodes.get(nid) or perf_nodes.get(wname)
        if perf is not None:
            base = float(pn.get("time_ms") or 0.0) if pn else 0.0
            est = _levels(pn.get("est_pruned_ms")) if pn else {}
            pts = {0.0: base, **est}
            time_curve = [min(base, interp_curve(pts, s)) if base else 0.0 for s in GRID_LEVELS]
            int8_ms = pn.get("int8_time_ms") if pn else None
        else:
            base = flops / total_flops  # relative units: share of the model's FLOPs
            time_curve = [base * interp_curve(SPARSE_RUNTIME_TIME_FACTOR, s) for s in GRID_LEVELS]
            int8_ms = None
        ll = loss_layers.get(wname) or loss_layers.get(nid)
        sens = _levels(ll.get("sensitivity")) if ll else {}
        if sens:
            raw = [interp_curve(sens, s) for s in GRID_LEVELS]
        else:  # no loss data for this layer: a mild generic curve
            raw = [s ** 3 for s in GRID_LEVELS]
        loss_curve, run = [], -math.inf
        base_loss = raw[0]
        for v in raw:  # non-decreasing, relative to the dense value
            run = max(run, v - base_loss)
            loss_curve.append(max(0.0, run))
        excluded = None
        if settings.dense_first_layer and i == 0:
            excluded = "first layer"
        elif settings.dense_grouped and is_grouped_conv(n):
            excluded = "depthwise/grouped conv"
        layers.append({
            "weight_name": wname, "node_id": nid, "op_type": n.get("op_type"), "params": params,
            "weight_shape": n.get("weight_shape"), "flops": flops, "group": _group(n), "baseline_ms": base if perf is not None else None,
            "time_curve": [round(t, 6) for t in time_curve], "loss_curve": [float(f"{v:.6g}") for v in loss_curve],
            "int8_sensitivity": (ll or {}).get("int8_sensitivity"), "int8_time_ms": int8_ms,
            "excluded": excluded,
        })
    # Ranking gain: time saved; falls back to FLOPs-proportional when the profile predicts no saving at all.
    saved = sum(l["time_curve"][0] - l["time_curve"][-1] for l in layers)
    for l in layers:
        t0 = l["time_curve"][0]
        if saved > 0 and perf is not None:
            l["gain_curve"] = [t0 - t for t in l["time_curve"]]
        else:
            ref = t0 if (perf is not None and t0) else l["flops"] / total_flops
            l["gain_curve"] = [ref * s for s in GRID_LEVELS]
    return layers


def _prod(shape: Any) -> int:
    if not shape:
        return 0
    out = 1
    for d in shape:
        if not isinstance(d, int) or d <= 0:
            return 0
        out *= d
    return out


def default_int8_excluded(layers: List[Dict[str, Any]]) -> List[str]:
    """Node ids to keep FP32 by default: layers whose INT8 sensitivity is an outlier, i.e. above 3x the
    median and above mean + 2 std, at most 10% of the layers (most sensitive first). Empty when the loss
    profile has no INT8 sensitivity."""
    vals = [(float(l["int8_sensitivity"]), l["node_id"]) for l in layers
            if isinstance(l.get("int8_sensitivity"), (int, float)) and not math.isnan(float(l["int8_sensitivity"]))]
    if len(vals) < 3:
        return []
    xs = sorted(v for v, _ in vals)
    med = xs[len(xs) // 2]
    mean = sum(xs) / len(xs)
    std = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
    limit = max(3 * med, mean + 2 * std)
    out = [nid for v, nid in sorted(vals, reverse=True) if v > limit and v > 0]
    return out[: max(1, len(vals) // 10)]


__all__ = ["GRID_LEVELS", "Settings", "build_layers", "interp_curve", "prunable_nodes", "is_grouped_conv",
           "perf_model_ms", "perf_int8_ms", "default_int8_excluded", "SPARSE_RUNTIME", "ORT_NOTE"]
