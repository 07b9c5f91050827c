"""Per-layer inputs shared by the pruning structures: the sparsity grid, curve interpolation, prunable
nodes and the default exclusions of an analysis, and what an optimization reads from a perf profile.

Inputs are the typed :class:`~sparsify_tui.analysis.nodes.ModelAnalysis` (its prunable layers:
:func:`~sparsify_tui.analysis.nodes.prunable_layers`), a typed :class:`~sparsify_tui.profiling.perf.PerfProfile`
(None for the FLOPS profile) and a typed
:class:`~sparsify_tui.profiling.loss.LossProfile`. Each layer gets curves sampled on :data:`GRID_LEVELS`,
stored in the optimization record so that re-evaluation needs no profile again. What is specific to a
structure (how its curves are built) lives in :mod:`sparsify_tui.optimization.structures`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from sparsify_tui.optimization.record import LayerRow, Settings

if TYPE_CHECKING:
    from sparsify_tui.analysis.nodes import NodeInfo
    from sparsify_tui.profiling.perf import PerfProfile

GRID_LEVELS: List[float] = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99]
"""Sparsity levels at which per-layer time and loss curves are stored (linear interpolation between)."""


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


def levels(d: Optional[Dict[Any, Any]]) -> Dict[float, float]:
    """``{"0.4": v, ...}`` (a profile's per-level dict) as ``{0.4: v}``, without missing, NaN or non-numeric
    entries."""
    out: Dict[float, float] = {}
    for k, v in (d or {}).items():
        try:
            if v is not None and not math.isnan(float(v)):
                out[float(k)] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def node_group(node: "NodeInfo") -> int:
    """The ``group`` attribute of an analysis node (1 when absent or not a number)."""
    g = (node.attrs or {}).get("group")
    try:
        return int(g) if g is not None else 1
    except (TypeError, ValueError):
        return 1


def weight_params(node: "NodeInfo") -> int:
    """Weight elements of an analysis node: the product of ``weight_shape``, else ``params``."""
    return int(_prod(node.weight_shape) or node.params or 0)


def excluded_reason(settings: Settings, index: int, op_type: Optional[str], group: int) -> Optional[str]:
    """Why a layer stays dense by default: "first layer" (``index`` 0 with ``dense_first_layer``),
    "depthwise/grouped conv" (a Conv with ``group > 1`` with ``dense_grouped``), else None."""
    if settings.dense_first_layer and index == 0:
        return "first layer"
    if settings.dense_grouped and op_type == "Conv" and int(group or 1) > 1:
        return "depthwise/grouped conv"
    return None


def by_weight_and_id(items: Sequence[Any]) -> Dict[str, Any]:
    """Profile rows (objects with ``weight_name`` and ``id``) keyed by weight name and by id, first wins."""
    out: Dict[str, Any] = {}
    for it in items:
        for key in (getattr(it, "weight_name", None), getattr(it, "id", None)):
            if key and key not in out:
                out[key] = it
    return out


def loss_curve(sensitivity: Dict[float, float]) -> List[float]:
    """Loss above dense on :data:`GRID_LEVELS` from ``{sparsity: value}`` (interpolated, made non-decreasing,
    6 significant digits); a mild generic ``s**3`` when there is no data for the layer."""
    raw = [interp_curve(sensitivity, s) for s in GRID_LEVELS] if sensitivity else [s ** 3 for s in GRID_LEVELS]
    out, run = [], -math.inf
    for v in raw:
        run = max(run, v - raw[0])
        out.append(float(f"{max(0.0, run):.6g}"))
    return out


def perf_model_ms(perf: Optional["PerfProfile"]) -> Optional[float]:
    """Measured FP32 ms per batch of a perf profile (median latency; else the sum of node times)."""
    if perf is None:
        return None
    median = perf.latency_ms.median
    if median:
        return float(median)
    return perf.total_node_ms or None


def perf_int8_ms(perf: Optional["PerfProfile"]) -> Optional[float]:
    """Measured INT8 ms per batch of a perf profile on the clock of its FP32 median
    (:attr:`~sparsify_tui.profiling.perf.PerfProfile.int8_ms`: FP32 median / the interleaved INT8 ratio, the one the
    perf summary and the report show), or None when INT8 was not measured or failed."""
    return perf.int8_ms if perf is not None else None


def _prod(shape: Any) -> int:
    if not shape:
        return 0
    out = 1
    for d in shape:
        if not isinstance(d, int) or d <= 0:
            return 0
        out *= d
    return out


def default_int8_excluded(layers: List[LayerRow]) -> List[str]:
    """Node ids to keep FP32 by default: layers whose INT8 sensitivity is an outlier, i.e. above 3x the
    median and above mean + 2 std, at most 10% of the layers (most sensitive first). Empty when the loss
    profile has no INT8 sensitivity."""
    vals = [(float(l.int8_sensitivity), l.node_id) for l in layers
            if isinstance(l.int8_sensitivity, (int, float)) and not math.isnan(float(l.int8_sensitivity))]
    if len(vals) < 3:
        return []
    xs = sorted(v for v, _ in vals)
    med = xs[len(xs) // 2]
    mean = sum(xs) / len(xs)
    std = (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
    limit = max(3 * med, mean + 2 * std)
    out = [nid for v, nid in sorted(vals, reverse=True) if v > limit and v > 0]
    return out[: max(1, len(vals) // 10)]


__all__ = ["GRID_LEVELS", "Settings", "interp_curve", "levels", "node_group",
           "weight_params", "excluded_reason", "by_weight_and_id", "loss_curve", "perf_model_ms", "perf_int8_ms",
           "default_int8_excluded"]
