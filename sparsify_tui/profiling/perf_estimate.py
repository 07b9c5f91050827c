"""Estimated per-layer times after unstructured pruning ("Pruned s", always labelled *est.*).

**onnxruntime gains nothing from unstructured sparsity**: it has no sparse kernels, so a pruned model
runs exactly as fast as the dense one (docs/calibration.md: 1.0× at any sparsity). The estimates
here are for a **sparse-kernel CPU runtime of the DeepSparse class**, and they are calibrated against
*measured* whole-model speedups of DeepSparse 1.8 (imposed kernel sparsity on every prunable layer,
2-core Zen 5, batch 1), not against FLOPs (a FLOPs-proportional estimate claims 5× at 0.80 and 20× at
0.95, wrong by an order of magnitude):

==========  ================  ===================
sparsity    ResNet-50 (S_R)   MobileNetV2 (S_M)
==========  ================  ===================
0.80        0.69×             0.78×
0.85        0.83×             0.96×
0.90        1.04×             1.06×
0.95        1.42×             1.10×
0.98        1.76×             1.19×
==========  ================  ===================

Formula
-------
1. *Layer factor from a whole-model figure.* If a share ``p`` of a model's time is in prunable layers
   and each of them speeds up by ``f``, the model speeds up by ``S = 1 / ((1 - p) + p / f)``. Solving for
   the layer factor: ``f(s) = p / (1/S(s) - (1 - p))``, with ``p = 0.999`` for both reference models
   (measured: in their onnxruntime profiles the Conv/Gemm kernels, with everything fused into them, take
   99.9 % of the time, so ``f`` is within 0.1 % of the whole-model figure).
   This gives ``f_R`` (regular convolutions) and ``f_M`` (MobileNetV2, whose time is largely in
   depthwise and thin 1×1 convolutions).
2. *Which curve.* ``d`` = share of the profiled model's prunable time spent in depthwise/grouped
   convolutions; ``a = min(1, d / 0.17)`` (0.17: that share measured in MobileNetV2); per-layer factor
   ``f(s) = (1 - a)·f_R(s) + a·f_M(s)``.
3. *Between and beyond the measured sparsities.* ``f`` is interpolated linearly in ``s`` between the
   measured levels; above 0.98 it stays at its 0.98 value (no extrapolation beyond what was measured);
   below 0.80 no speedup is claimed.
4. *Never slower than dense.* A runtime picks the dense kernel when the sparse one is slower, so the
   estimate uses ``max(1, f(s))``: ``est_pruned_ms = time_ms / max(1, f(s))`` for prunable layers
   (Conv/Gemm/MatMul with an initializer weight); every other node and the layout/unattributed rows keep
   their measured time.
Whole-model estimates are the sum of the per-node estimates, scaled to the unprofiled median latency.

The same rule serves the FLOPS profile of an optimization (no measured times): its layer times are
proportional to FLOPs, so ``d`` is the depthwise/grouped share of the prunable FLOPs and a layer's time at
``s`` is its FLOPs share divided by ``max(1, f(s))`` (:mod:`sparsify_tui.optimization.structures.unstructured`).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, Tuple

LEVELS = (0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99)
LEVEL_KEYS = tuple(str(x) for x in LEVELS)

RUNTIME = "sparse-kernel CPU runtime (DeepSparse-class), estimated"
NOTE = ("onnxruntime has no sparse kernels: unstructured sparsity gives it no speedup (1.0x). "
        "Pruned times are estimates for a sparse-kernel runtime, calibrated on measured DeepSparse 1.8 "
        "whole-model speedups (ResNet-50 1.42x, MobileNetV2 1.10x at 0.95), not FLOPs.")
FORMULA = ("est_pruned_ms = time_ms / max(1, f(s)) for prunable layers, else time_ms; "
           "f(s) = (1-a) f_R(s) + a f_M(s), f_X(s) = p / (1/S_X(s) - (1-p)), p = 0.999, "
           "a = min(1, depthwise share of prunable time / 0.17); linear in s between measured levels, "
           "held at its 0.98 value above, no gain below 0.80")

_CAL_LEVELS = (0.80, 0.85, 0.90, 0.95, 0.98)
_S_RESNET = (0.69, 0.83, 1.04, 1.42, 1.76)
_S_MOBILENET = (0.78, 0.96, 1.06, 1.10, 1.19)
_P_REF = 0.999
_DW_SHARE_REF = 0.17


def layer_factor_from_model(speedup: float, p: float = _P_REF) -> float:
    """Layer-level speedup ``f`` that gives whole-model ``speedup`` when a share ``p`` of time is prunable."""
    denom = 1.0 / speedup - (1.0 - p)
    return p / denom if denom > 0 else float("inf")


_F_R = tuple(layer_factor_from_model(s) for s in _S_RESNET)
_F_M = tuple(layer_factor_from_model(s) for s in _S_MOBILENET)


def _interp(s: float, curve: Sequence[float]) -> float:
    if s < _CAL_LEVELS[0]:
        return 1.0
    if s >= _CAL_LEVELS[-1]:
        return curve[-1]
    for (s0, f0), (s1, f1) in zip(zip(_CAL_LEVELS, curve), zip(_CAL_LEVELS[1:], curve[1:])):
        if s0 <= s <= s1:
            return f0 + (f1 - f0) * (s - s0) / (s1 - s0)
    return 1.0  # pragma: no cover


def depthwise_weight(depthwise_share: float) -> float:
    """Blend weight ``a`` of the MobileNetV2 curve for a model with this depthwise share of prunable time."""
    return max(0.0, min(1.0, depthwise_share / _DW_SHARE_REF))


def depthwise_share(prunable_layers: Iterable[Tuple[str, Optional[dict], float]]) -> float:
    """``d`` of the formula: the share of the prunable layers' time spent in depthwise/grouped convolutions
    (:func:`is_depthwise`). ``prunable_layers``: ``(op_type, attrs, time)`` of every prunable layer, time in
    any unit (ms for a perf profile, FLOPs for the FLOPS profile, whose time is proportional to FLOPs).
    0 when the total is 0."""
    total = dw = 0.0
    for op_type, attrs, time in prunable_layers:
        total += float(time)
        if is_depthwise(op_type, attrs):
            dw += float(time)
    return dw / total if total > 0 else 0.0


def layer_speedup(sparsity: float, depthwise_share: float = 0.0) -> float:
    """Estimated speedup ``max(1, f(s))`` of one prunable layer at ``sparsity`` (formula in module doc)."""
    a = depthwise_weight(depthwise_share)
    f = (1 - a) * _interp(sparsity, _F_R) + a * _interp(sparsity, _F_M)
    return max(1.0, f)


def estimate_node_ms(time_ms: float, prunable: bool, depthwise_share: float,
                     levels: Sequence[float] = LEVELS) -> dict:
    """``{"0.4": ms, ...}``: a node's estimated ms per batch at each sparsity level."""
    out = {}
    for s in levels:
        out[str(s)] = time_ms / layer_speedup(s, depthwise_share) if prunable else time_ms
    return out


def is_depthwise(op_type: str, attrs: Optional[dict]) -> bool:
    """A grouped/depthwise convolution (group > 1)."""
    try:
        return op_type in ("Conv", "ConvTranspose") and int((attrs or {}).get("group", 1) or 1) > 1
    except (TypeError, ValueError):
        return False
