"""Estimates of an optimization: time and speedup, FLOPs reduction, params compression, recovery.

All are **estimates**, and the time ones name the runtime they are for:

* ``sparse_ms`` / ``sparse_speedup``: a CPU runtime with unstructured-sparse kernels (DeepSparse-class,
  :data:`sparsify_tui.profiling.perf_estimate.RUNTIME`).
  ``baseline_ms - sum_i (t_i(0) - t_i(s_i))`` where ``t_i(s)`` interpolates the perf profile's
  ``est_pruned_ms`` between its levels (with the FLOPS profile: FLOPs share divided by the same calibrated
  layer speedup, :func:`sparsify_tui.profiling.perf_estimate.layer_speedup`, in relative units, so only the
  speedup is shown). Per-node times come from the profiled pass, so the saving is scaled by
  ``baseline_ms / sum(node time_ms)`` (the whole-model estimate is the sum of per-node estimates scaled
  to the unprofiled median). When the quantization modifier is on, it is multiplied by the measured INT8
  gain.
* ``ort_ms`` / ``ort_speedup``: onnxruntime, which gets **no** speedup from unstructured sparsity; only the
  measured INT8 gain applies (when quantizing and the perf profile measured INT8).
* INT8 gain: measured model INT8 ms / FP32 ms. When the accuracy-controlled INT8 search timed **this exact
  configuration** (its exclusions are the record's), that ratio is used: the search timed it interleaved with
  FP32 in the same rounds (``int8_source`` says so). Otherwise the perf profile's model INT8 time is used, and
  excluded (FP32) layers give back their measured per-node saving ``time_ms - int8_time_ms``, scaled so all
  nodes together give the model-level saving; a per-node sum cannot see what excluding a node does to the
  Quantize/DequantizeLinear pairs around it, which is why the measured model-level figure wins.
* ``flops_reduction``: ``total / (total - sum_i flops_i * s_i)`` (quantization does not change FLOPs).
* ``params_compression``: ``total params / (total - sum_i n_i * s_i)``; ``size_mb_fp32`` and
  ``est_size_mb`` (nonzero weights, 1 byte each when INT8, 4 otherwise; the sparse index overhead of a
  compressed file is ignored).
* ``est_recovery``: params-weighted mean over pruned layers of the recoverability at their sparsity,
  ``1 - L_i(s_i) / max_j L_j(0.99)`` (0..1; 1 = the loss profile shows no loss for these levels). A relative
  heuristic to compare configurations, not a predicted accuracy. With the Approximated loss profile (one
  curve shape scaled per layer, normalised to the single most sensitive layer) it reads near 1 for any
  sparsity, so :func:`recovery_text` shows it as unavailable.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from sparsify_tui.optimization.layer_curves import GRID_LEVELS
from sparsify_tui.optimization.record import (
    Estimates, LayerEstimate, LayerRow, ModelSummary, NodeTime, QuantizationSettings,
)
from sparsify_tui.profiling.perf_estimate import NOTE, RUNTIME


def _t(layer: LayerRow, s: float) -> float:
    return float(np.interp(s, GRID_LEVELS, layer.time_curve))


def layer_estimates(layers: List[LayerRow], sparsities: Dict[str, float]) -> List[LayerEstimate]:
    """Per-layer display values: ``est_ms`` (time at its sparsity on the sparse runtime, relative units for
    FLOPS), ``est_speedup``, ``recoverability`` (0..1), ``loss_sensitivity`` and ``perf_sensitivity`` (the
    layer's share of the model's total loss / time saved at 0.9, 0..1)."""
    loss = np.array([l.loss_curve for l in layers], dtype=float).reshape(len(layers), len(GRID_LEVELS))
    gain = np.array([l.gain_curve for l in layers], dtype=float).reshape(len(layers), len(GRID_LEVELS))
    top = float(loss[:, -1].max()) if len(layers) else 0.0
    lsum = float(sum(np.interp(0.9, GRID_LEVELS, r) for r in loss)) or 1.0
    gsum = float(sum(np.interp(0.9, GRID_LEVELS, r) for r in gain)) or 1.0
    out = []
    for i, l in enumerate(layers):
        s = float(sparsities.get(l.weight_name, 0.0))
        t0, ts = l.time_curve[0], _t(l, s)
        rec = 1.0 - float(np.interp(s, GRID_LEVELS, loss[i])) / top if top > 0 else 1.0
        out.append(LayerEstimate(
            est_ms=ts, est_speedup=(t0 / ts) if ts > 0 else 1.0,
            recoverability=max(0.0, min(1.0, rec)),
            loss_sensitivity=float(np.interp(0.9, GRID_LEVELS, loss[i])) / lsum,
            perf_sensitivity=float(np.interp(0.9, GRID_LEVELS, gain[i])) / gsum,
        ))
    return out


def int8_factor(baseline_ms: Optional[float], int8_ms: Optional[float], excluded: List[str],
                perf_nodes: Optional[List[NodeTime]] = None) -> Optional[float]:
    """Measured INT8 time factor (<1 is faster) with ``excluded`` node ids kept FP32, or None if unmeasured."""
    if not baseline_ms or not int8_ms:
        return None
    saving = baseline_ms - int8_ms
    per_node = {n.id: float(n.time_ms or 0) - float(n.int8_time_ms or 0)
                for n in perf_nodes or [] if n.int8_time_ms is not None}
    total_pos = sum(v for v in per_node.values() if v > 0)
    if excluded and total_pos > 0:
        back = sum(max(0.0, per_node.get(e, 0.0)) for e in excluded) / total_pos
        saving *= max(0.0, 1.0 - back)
    return max(0.05, (baseline_ms - saving) / baseline_ms)


def searched_int8_factor(quantization: QuantizationSettings) -> Optional[float]:
    """INT8 ms / FP32 ms of the configuration the INT8 search chose and timed (interleaved with FP32), when the
    record's exclusions are still exactly that configuration's; else None."""
    from sparsify_tui.optimization.int8_search import excluded_nodes

    search = quantization.search
    chosen = search.chosen_trial if search is not None else None
    if chosen is None or not chosen.median_ms or not search.fp32_ms:
        return None
    if set(quantization.excluded or []) != set(excluded_nodes(search.groups, chosen.groups)):
        return None
    return float(chosen.median_ms) / float(search.fp32_ms)


def model_estimates(layers: List[LayerRow], sparsities: Dict[str, float], *, model: ModelSummary,
                    quantization: QuantizationSettings, flops_profile: bool = False) -> Estimates:
    """Model-level estimates (see the module docstring for every formula); ``max_reachable`` is left None
    (the allocation sets it)."""
    totals = model.totals or {}
    quantize, excluded = bool(quantization.enabled), list(quantization.excluded or [])
    n = np.array([l.params for l in layers], dtype=float)
    s = np.array([float(sparsities.get(l.weight_name, 0.0)) for l in layers])
    N = float(n.sum()) or 1.0
    total_params = float(totals.get("params") or N)
    removed = float((n * s).sum())
    flops_total = float(totals.get("flops") or sum(l.flops for l in layers) or 0.0)
    flops_removed = float(sum(l.flops * si for l, si in zip(layers, s)))
    base = 1.0 if flops_profile else model.baseline_ms
    saved = sum(l.time_curve[0] - _t(l, si) for l, si in zip(layers, s))
    searched = searched_int8_factor(quantization) if quantize else None
    if searched is not None:
        factor, source = searched, "INT8 search: this exact configuration, timed interleaved with FP32"
    else:
        factor = None if flops_profile else int8_factor(model.baseline_ms, model.int8_ms, excluded, model.perf_nodes)
        source = None  # the perf profile (records written before the search read back unchanged)
    q = factor if (quantize and factor) else 1.0
    # per-node times are from the profiled pass: scale the saving to the unprofiled latency
    nodes_total_ms = model.nodes_total_ms
    scale = (base / nodes_total_ms) if (base and nodes_total_ms and not flops_profile) else 1.0
    saved *= scale
    sparse = max(0.0, base - saved) * q if base else None
    ort = base * q if base else None
    le = layer_estimates(layers, sparsities)
    pruned = [(n[i], le[i].recoverability) for i in range(len(layers)) if s[i] > 0]
    rec = (sum(a * b for a, b in pruned) / sum(a for a, _ in pruned)) if pruned else 1.0
    nonzero = max(1.0, total_params - removed)
    return Estimates(
        label="estimates",
        sparse_runtime=RUNTIME,
        ort_note=NOTE,
        time_units="relative (FLOPS profile)" if flops_profile else "ms",
        baseline_ms=None if flops_profile else model.baseline_ms,
        sparse_ms=None if flops_profile else sparse,
        sparse_speedup=(base / sparse) if (base and sparse) else None,
        ort_ms=None if flops_profile else ort,
        ort_speedup=(base / ort) if (base and ort) else None,
        int8_factor=factor,
        int8_measured=factor is not None,
        int8_source=source,
        flops=flops_total,
        flops_pruned=flops_total - flops_removed,
        flops_reduction=flops_total / max(1.0, flops_total - flops_removed) if flops_total else None,
        params=total_params,
        params_nonzero=nonzero,
        params_compression=total_params / nonzero,
        size_mb_fp32=total_params * 4 / 1e6,
        est_size_mb=nonzero * (1 if quantize else 4) / 1e6,
        avg_sparsity=removed / N,
        est_recovery=rec,
    )


def noise_flag(noise: Optional[List[str]]) -> Optional[str]:
    """The flag of estimates made from noisy measurements (``Estimates.noise``: lines naming their source, "perf
    profile ...: ..." or "channel calibration: ..."), as the cards, ``optimization show`` and the report show it:
    "estimated from a noisy profile: rerun it" (or calibration, or both); None when nothing was noisy."""
    if not noise:
        return None
    perf = any(not n.startswith("channel calibration:") for n in noise)
    calibration = any(n.startswith("channel calibration:") for n in noise)
    what = ("profile and channel calibration" if perf and calibration else
            "channel calibration" if calibration else "profile")
    return f"estimated from a noisy {what}: rerun {'them' if perf and calibration else 'it'}"


def recovery_text(est_recovery: Optional[float], loss_ref: Optional[str]) -> str:
    """``est_recovery`` as the CLI and the TUI show it: the relative heuristic as a percentage (one scale with the
    loss profile's: ``93.0%``), or "unavailable" with the reason (the Approximated loss profile has no measured
    loss; see the module docstring)."""
    from sparsify_tui.optimization.record import APPROXIMATED

    if loss_ref == APPROXIMATED:
        return "unavailable (Approximated loss profile: no measured loss)"
    if est_recovery is None:
        return "unavailable"
    return f"{est_recovery * 100:.1f}% (relative heuristic)"
