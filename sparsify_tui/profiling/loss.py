"""Loss profiles: how much each prunable layer hurts the model when pruned (or quantized to INT8).

Layers are the prunable layers of :mod:`sparsify_tui.analysis.layers` (the one definition). Three methods,
each giving per layer a sensitivity value at each sparsity level (higher = more harmful):

* ``approximated`` (no run, always available as the "Approximated" profile): SparseML's architecture
  heuristic ``features_per_params · shape_change_mult`` (``pruning_loss_sens_approx``: (input + output
  activation volume) / weight params, times max(in/out, out/in) volume ratio), doubled for the first
  layer and for depthwise/grouped convs, times the level curve ``s² / (1.05 − s)``, then scaled so the
  largest value in the profile is 1. Unitless; only the ranking between layers means something.
* ``magnitude`` (default; levels 0.00..0.99 step 0.01): SparseML's ``pruning_loss_sens_magnitude``. Sort
  ``|w|`` ascending; at each level s the value is the mean ``|w|`` of the weights newly removed between the
  previous level and s (indices ``round(s·n)``, clipped to n−1; when no new weight is removed, the next
  single weight). Level 0 is the baseline 0. Because ``|w|`` is sorted, each layer's curve is
  non-decreasing in s. The model value at s is the sum over layers. Unit: mean |w| removed.
* ``one-shot`` (default levels 0, .2, .4, .6, .7, .8, .85, .9, .95, .99): prune only that layer by magnitude
  (:func:`sparsify_tui.engine.pruning.magnitude_prune`), run ``batches`` batches, compare with the dense
  outputs (metric below). See :mod:`sparsify_tui.profiling.loss_oneshot` for how it stays fast.

Metric of the one-shot method (``metric`` = None/"auto", "kl" or "nmse"), per float graph output, averaged
over batches then over outputs: ``kl`` = KL(p_dense ‖ p_pruned) in nats, mean over rows, where p is the
output itself when it already is a probability vector (rows in [0,1] summing to 1) and ``softmax`` over the
last axis otherwise; ``nmse`` = Σ(y − ŷ)² / Σy². Auto picks ``kl`` for ``[batch, classes]`` outputs
(2-D, ≥ 2 classes), ``nmse`` for everything else.

INT8 sensitivity (``int8=True``), per layer: one-shot: the same metric when only that layer is simulated
in INT8 the way ``quantize_static`` (QDQ, per-channel, MinMax) would quantize it: its weight replaced by
its quantize-dequantize (per-channel symmetric int8, scale = max|w|/127.5 per output channel,
round-half-even) and its input activation passed through QuantizeLinear/DequantizeLinear (per-tensor
uint8, scale/zero point from the min/max of that activation over the profile's batches, range widened
to include 0). Every other tensor stays FP32 (a real QDQ model also quantizes the outputs of other ops,
so its error is larger). Magnitude: the weight's quantization noise ``Σ(w − q(w))² / Σw²`` (= 1/SQNR,
the linear form of ``onnxruntime.quantization.qdq_loss_debug.compute_weight_error``'s SQNR).
Approximated: none.

Summary fields (all methods):

* ``average_sensitivity``: mean over layers of (value at 0.95 − value at 0.0); values between measured
  levels are linearly interpolated.
* ``est_params_reduction``: the default optimization keeps the first layer and depthwise/grouped convs
  dense and prunes every other layer to ``s = min(0.95, 0.85 · P_prunable / P_eligible)`` so the
  average sparsity over all prunable params is 0.85 (capped 0.95); the value is removed params / total
  params (already-zero weights are not counted as removed).
* ``est_recovery`` (a heuristic, 0..1): ``1 − R/10`` with R the params-weighted mean over those eligible
  layers of ``(v(s) − v(0)) / (v(s_max) − v(0))`` (each layer's damage at the default sparsity relative to
  its damage at the highest level); gradual pruning with fine-tuning is assumed to win back 90 % of it.
  None (unavailable) for the approximated method, whose curves are one shape scaled per layer (the value
  would only restate the curve, not a measurement), and when the outputs were near-flat.
* ``warnings``: one line per reason the values cannot be trusted; one-shot adds one when the dense class
  outputs are nearly constant (:data:`sparsify_tui.profiling.loss_oneshot.FLAT_SPAN`: KL is then ~0
  whatever is pruned, e.g. an untrained model), suggesting the nmse metric.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from sparsify_tui.analysis.layers import LayerRef, find_layers
from sparsify_tui.analysis.loading import load_model
from sparsify_tui.engine.pruning import pruned_count
from sparsify_tui.errors import ModelError
from sparsify_tui.progress import maybe_check

METHODS = ("approximated", "magnitude", "one-shot")
MAGNITUDE_LEVELS = tuple(round(i / 100, 2) for i in range(100))
ONE_SHOT_LEVELS = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)
APPROX_LEVELS = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99)
DEFAULT_AVG_SPARSITY = 0.85
MAX_LAYER_SPARSITY = 0.95
METRIC_DESCRIPTIONS = {
    "approximated": "relative sensitivity from the architecture (unitless, max = 1)",
    "magnitude": "mean |w| of the weights removed since the previous level",
    "kl": "KL divergence of softmax outputs vs dense (nats)",
    "nmse": "normalized MSE of outputs vs dense",
    "kl+nmse": "KL divergence (class outputs) and normalized MSE (other outputs) vs dense, averaged",
    "channel magnitude": "L2 norm of the coupled weights of the channels removed (DepGraph group norm)",
}


def level_key(level: float) -> str:
    """JSON key of a sparsity level: ``"0.0"``, ``"0.2"``, ``"0.85"``."""
    return str(round(float(level), 6))


@dataclass
class LossLayer:
    """One prunable layer's results. ``sensitivity`` maps :func:`level_key` → value (method's unit)."""

    id: str
    weight_name: str
    op_type: str
    params: int
    prunable_params: int
    sparsity: float
    sensitivity: dict
    int8_sensitivity: Optional[float] = None
    depthwise: bool = False
    first: bool = False

    def value_at(self, level: float) -> float:
        """Sensitivity at ``level``, linearly interpolated between measured levels (0 at sparsity 0 when not
        measured; clamped above the highest level)."""
        pts = sorted((float(k), float(v)) for k, v in self.sensitivity.items() if v is not None)
        if not pts:
            return 0.0
        if pts[0][0] > 0.0:
            pts.insert(0, (0.0, 0.0))  # sparsity 0 is the dense model: value 0 by definition
        xs, ys = zip(*pts)
        return float(np.interp(float(level), xs, ys))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LossProfile:
    """A whole loss profile. ``to_dict()`` is exactly the ``profile loss --json`` document."""

    name: str
    method: str
    settings: dict
    metric: str
    levels: list
    total_params: int
    prunable_params: int
    layers: list
    model_path: Optional[str] = None
    seconds: float = 0.0
    extras: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @classmethod
    def of_model(cls, model, layers: list, *, model_path, started: float, **fields) -> "LossProfile":
        """The profile of the ONNX ``model`` (``ModelProto``, read from ``model_path``) whose rows are ``layers``:
        ``total_params`` the model's params by the one definition (:func:`_total_params`), ``prunable_params`` the
        rows' sum, ``seconds`` the wall time since ``started`` (a ``time.perf_counter()``); ``fields``: the others
        (``name``, ``method``, ``settings``, ``metric``, ``levels``, ``warnings``, ``extras``). The one constructor
        of the measured methods (magnitude, one-shot, channel)."""
        return cls(total_params=_total_params(model), prunable_params=sum(x.prunable_params for x in layers),
                   layers=layers, model_path=str(model_path), seconds=time.perf_counter() - started, **fields)

    # -- summary -----------------------------------------------------------------------------------------
    @property
    def metric_description(self) -> str:
        return METRIC_DESCRIPTIONS.get(self.metric, self.metric)

    def baseline(self) -> float:
        """Model value at sparsity 0 (sum over layers)."""
        return float(sum(layer.value_at(0.0) for layer in self.layers))

    def model_value(self, level: float) -> float:
        """Model value at ``level``: the sum over layers (SparseML's model-level magnitude loss)."""
        return float(sum(layer.value_at(level) for layer in self.layers))

    def average_sensitivity(self) -> Optional[float]:
        """Mean over layers of (value at 0.95 − value at 0.0); None without layers."""
        if not self.layers:
            return None
        return float(np.mean([layer.value_at(0.95) - layer.value_at(0.0) for layer in self.layers]))

    def default_layer_sparsity(self) -> float:
        """Per-layer sparsity of the default optimization (module docstring), 0 when nothing is eligible."""
        elig = sum(layer.prunable_params for layer in self.layers if _eligible(layer))
        if not elig:
            return 0.0
        return min(MAX_LAYER_SPARSITY, DEFAULT_AVG_SPARSITY * self.prunable_params / elig)

    def est_params_reduction(self) -> float:
        """Removed params / total params at the default optimization (0..1)."""
        s = self.default_layer_sparsity()
        removed = 0
        for layer in self.layers:
            if _eligible(layer):
                n = layer.prunable_params
                removed += max(0, pruned_count(n, s) - int(round(layer.sparsity * n)))
        return removed / self.total_params if self.total_params else 0.0

    @property
    def outputs_flat(self) -> bool:
        """The one-shot reference outputs were near-flat: the values carry no signal (module docstring)."""
        return bool(self.extras.get("flat_outputs"))

    def est_recovery(self) -> Optional[float]:
        """Heuristic recovery (0..1) at the default optimization (module docstring); None without data, for the
        approximated method and when the outputs were near-flat."""
        if self.method == "approximated" or self.outputs_flat:
            return None
        s = self.default_layer_sparsity()
        num = den = 0.0
        for layer in self.layers:
            if not _eligible(layer) or not layer.sensitivity:
                continue
            top = max(float(k) for k in layer.sensitivity)
            v0, vmax = layer.value_at(0.0), layer.value_at(top)
            r = (layer.value_at(s) - v0) / (vmax - v0) if vmax > v0 else 0.0
            num += layer.prunable_params * min(1.0, max(0.0, r))
            den += layer.prunable_params
        if not den:
            return None
        return 1.0 - (num / den) / 10.0

    def recovery_text(self) -> str:
        """The estimated recovery as the CLI and the TUI show it: the heuristic with its range, or why it is
        unavailable."""
        rec = self.est_recovery()
        if rec is not None:
            return f"{rec * 100:.1f}% (heuristic, 90-100%)"
        if self.method == "approximated":
            return "unavailable (Approximated: no measured loss)"
        if self.outputs_flat:
            return "unavailable (outputs nearly constant)"
        return "unavailable"

    def to_dict(self) -> dict:
        return {
            "profile": {
                "name": self.name,
                "method": self.method,
                "settings": dict(self.settings),
                "metric": self.metric,
                "metric_description": self.metric_description,
                "levels": [float(x) for x in self.levels],
                "model_path": self.model_path,
                "total_params": int(self.total_params),
                "prunable_params": int(self.prunable_params),
                "layer_count": len(self.layers),
                "default_layer_sparsity": self.default_layer_sparsity(),
                "est_params_reduction": self.est_params_reduction(),
                "baseline": self.baseline(),
                "average_sensitivity": self.average_sensitivity(),
                "est_recovery": self.est_recovery(),
                "seconds": float(self.seconds),
                "warnings": list(self.warnings),
                **({"extras": self.extras} if self.extras else {}),
            },
            "layers": [layer.to_dict() for layer in self.layers],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "LossProfile":
        p = d.get("profile", {})
        names = LossLayer.__dataclass_fields__
        return cls(
            name=p.get("name", ""),
            method=p.get("method", ""),
            settings=dict(p.get("settings", {})),
            metric=p.get("metric", ""),
            levels=list(p.get("levels", [])),
            total_params=int(p.get("total_params", 0)),
            prunable_params=int(p.get("prunable_params", 0)),
            layers=[LossLayer(**{k: v for k, v in x.items() if k in names}) for x in d.get("layers", [])],
            model_path=p.get("model_path"),
            seconds=float(p.get("seconds", 0.0)),
            extras=dict(p.get("extras", {})),
            warnings=list(p.get("warnings", [])),
        )


def _eligible(layer: LossLayer) -> bool:
    return not layer.first and not layer.depthwise


def _check_levels(levels) -> list:
    out = sorted({round(float(x), 6) for x in levels})
    if not out or out[0] < 0 or out[-1] >= 1 or any(x != x for x in out):
        raise ValueError(f"sparsity levels must be in [0, 1), got {list(levels)}")
    return out


def parse_levels(text: str) -> list:
    """``"0.2,0.4,0.9"`` → ``[0.2, 0.4, 0.9]``. Raises ``SparsifyError`` (one line) on a bad list."""
    from sparsify_tui.errors import SparsifyError

    try:
        vals = [float(x) for x in str(text).replace(" ", "").split(",") if x]
        return _check_levels(vals)
    except ValueError:
        raise SparsifyError(f"bad --levels {text!r}: give comma-separated sparsities in [0, 1), e.g. 0.2,0.4,0.9")


# -- magnitude -----------------------------------------------------------------------------------------------


def magnitude_values(abs_sorted: np.ndarray, levels) -> dict:
    """SparseML's magnitude sensitivity of one layer.

    ``abs_sorted``: ``|w|`` flattened and sorted ascending (shape (n,)). ``levels``: ascending sparsities.
    Returns ``{level_key: mean |w| removed since the previous level}`` (float). The prefix sums needed
    at the level boundaries come from one ``np.add.reduceat`` pass in float64 (no n-sized cumsum).
    """
    n = int(abs_sorted.size)
    if n == 0:
        return {level_key(s): 0.0 for s in levels}
    # SparseML's walk over the levels: (key, start, stop) segments, or (key, idx, None) single values
    plan, prev = [], 0
    for s in levels:
        idx = min(pruned_count(n, s), n - 1)
        if s <= 1e-9:
            plan.append((level_key(s), None, None))
        elif idx > prev:
            plan.append((level_key(s), prev, idx))
            prev = idx
        else:
            plan.append((level_key(s), idx, None))
            prev = idx + 1
    cuts = sorted({k for _, a, b in plan if b is not None for k in (a, b) if 0 < k < n})
    prefix = {0: 0.0}
    if cuts:
        seg = np.add.reduceat(abs_sorted, [0] + cuts, dtype=np.float64)[:-1]
        prefix.update(zip(cuts, np.cumsum(seg).tolist()))
    if any(b == n for _, _, b in plan):
        prefix[n] = float(np.sum(abs_sorted, dtype=np.float64))
    out = {}
    for key, a, b in plan:
        if a is None:
            out[key] = 0.0
        elif b is None:
            out[key] = float(abs_sorted[a])
        else:
            out[key] = float((prefix[b] - prefix[a]) / (b - a))
    return out


def int8_weight_qdq(weight: np.ndarray, axis: Optional[int]) -> np.ndarray:
    """INT8 quantize-dequantize of a weight, per-channel symmetric on ``axis`` (per tensor when None), as
    ``quantize_static`` per_channel: scale = max|w| / 127.5, zero point 0, values rounded half-to-even and
    clipped to [-128, 127]. Same shape and dtype as ``weight``."""
    w = np.asarray(weight, dtype=np.float32)
    red = tuple(i for i in range(w.ndim) if i != axis)
    absmax = np.max(np.abs(w), axis=red, keepdims=True) if w.ndim else np.abs(w)
    scale = np.where(absmax > 0, absmax / 127.5, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -128, 127)
    return (q * scale).astype(weight.dtype)


def weight_int8_error(weight: np.ndarray, axis: Optional[int]) -> float:
    """``Σ(w − q(w))² / Σw²`` for the INT8 per-channel quantization of ``weight`` (1/SQNR, linear)."""
    w = np.asarray(weight, dtype=np.float64)
    den = float(np.sum(w * w))
    if den == 0:
        return 0.0
    return float(np.sum((w - int8_weight_qdq(weight, axis).astype(np.float64)) ** 2) / den)


def _layer_entry(model, ref: LayerRef, first: bool, sens: dict, zeros: int, int8=None) -> LossLayer:
    n = ref.prunable_params
    return LossLayer(
        id=ref.node_id,
        weight_name=ref.weight_name,
        op_type=ref.op_type,
        params=n + _initializer_size(model, ref.bias_name),
        prunable_params=n,
        sparsity=zeros / n if n else 0.0,
        sensitivity=sens,
        int8_sensitivity=int8,
        depthwise=ref.depthwise,
        first=first,
    )


def _initializer_size(model, name: Optional[str]) -> int:
    """Element count of main-graph initializer ``name`` (0 when absent)."""
    if not name:
        return 0
    for t in model.graph.initializer:
        if t.name == name:
            return int(np.prod(t.dims)) if t.dims else 1
    return 0


def _total_params(model) -> int:
    """The model's params by the one definition (:func:`sparsify_tui.analysis.nodes.param_count`), the same
    number the FLOPS profile and ``analyze`` show."""
    from sparsify_tui.analysis.nodes import param_count

    return param_count(model)


def _magnitude_layer(w: np.ndarray, levels, int8: bool, axis: Optional[int]) -> tuple:
    """(sensitivity dict, zero count, int8 error or None, NaN/Inf count) of one weight; releases the GIL in
    numpy. NaN and Inf sort last, so counting them costs one binary search."""
    flat = np.abs(np.asarray(w, dtype=np.float32).reshape(-1))
    flat.sort(kind="quicksort")
    zeros = int(np.searchsorted(flat, 0.0, side="right"))
    nonfinite = int(flat.size - np.searchsorted(flat, np.inf, side="left"))
    return magnitude_values(flat, levels), zeros, (weight_int8_error(w, axis) if int8 else None), nonfinite


def magnitude_profile(model_path, *, levels=None, int8=False, name="magnitude", progress=None, cancel=None) -> LossProfile:
    """Weight-magnitude loss profile of the model at ``model_path`` (module docstring for the definition).

    One sort and one pass of segment sums per layer, on 2 threads; weights are read one tensor at a time
    as zero-copy views of the memory-mapped file (:mod:`sparsify_tui.profiling.loss_protoscan`), or
    through the normal loader for external data / Constant-node weights. Raises ``ModelError`` for an
    unreadable model or one without prunable layers.
    """
    from concurrent.futures import ThreadPoolExecutor

    from sparsify_tui.analysis.loading import weight_warnings
    from sparsify_tui.settings import available_cores
    from sparsify_tui.profiling.loss_protoscan import scan_model

    t0 = time.perf_counter()
    levels = _check_levels(MAGNITUDE_LEVELS if levels is None else levels)
    scanned = scan_model(model_path)
    if scanned is not None:
        model = scanned.model

        def get(ref):
            return scanned.array(ref.weight_name)
    else:
        model = load_model(model_path, load_external_data=False)
        inits = {t.name: t for t in model.graph.initializer}
        from sparsify_tui.analysis.loading import tensor_array

        def get(ref):
            return tensor_array(inits[ref.weight_name], Path(model_path).parent)
    refs = find_layers(model)
    if not refs:
        raise ModelError(f"{Path(model_path).name} has no prunable layers (Conv/Gemm/MatMul with a weight initializer)")

    def work(ref):
        maybe_check(cancel)
        return _magnitude_layer(get(ref), levels, int8, ref.channel_axis)

    out = []
    nonfinite: dict = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(2, available_cores()))) as pool:
            for i, (ref, (sens, zeros, i8, bad)) in enumerate(zip(refs, pool.map(work, refs))):
                out.append(_layer_entry(model, ref, i == 0, sens, zeros, i8))
                if bad:
                    nonfinite[ref.weight_name] = bad
                if progress:
                    progress("weight magnitudes", (i + 1) / len(refs))
    finally:
        if scanned is not None:
            scanned.close()
    return LossProfile.of_model(
        model, out, model_path=model_path, started=t0, name=name, method="magnitude",
        settings={"levels": levels, "int8": bool(int8)}, metric="magnitude", levels=levels,
        warnings=weight_warnings(nonfinite, Path(model_path).name),
    )


# -- approximated --------------------------------------------------------------------------------------------


def _approx_curve(s: float) -> float:
    return s * s / (1.05 - s)


def approximated_profile(analysis, *, name="Approximated", levels=APPROX_LEVELS) -> LossProfile:
    """The architecture-only profile (module docstring) from a ``ModelAnalysis`` or its ``to_dict()``.

    Never runs the model and never stores anything. Layers follow
    :func:`sparsify_tui.analysis.nodes.prunable_layers` (main graph and subgraphs).
    """
    from sparsify_tui.analysis.nodes import ModelAnalysis, prunable_layers

    if isinstance(analysis, dict):
        analysis = ModelAnalysis.from_dict(analysis)
    levels = _check_levels(levels)
    nodes = prunable_layers(analysis)
    bases = []
    for i, n in enumerate(nodes):
        wsize = int(np.prod(n.weight_shape)) if n.weight_shape else 0
        ins = [s for s in (n.input_shapes[:1] or []) if s]
        outs = [s for s in (n.output_shapes[:1] or []) if s]
        vin = float(np.prod(ins[0])) if ins else 0.0
        vout = float(np.prod(outs[0])) if outs else 0.0
        base = (vin + vout) / wsize if wsize else 0.0
        if vin and vout:
            base *= max(vin / vout, vout / vin)
        depthwise = n.op_type == "Conv" and int(n.attrs.get("group", 1) or 1) > 1
        if i == 0 or depthwise:
            base *= 2.0
        bases.append((n, wsize, depthwise, base))
    top = max((b for *_, b in bases), default=0.0) * _approx_curve(max(levels))
    layers = []
    for i, (n, wsize, depthwise, base) in enumerate(bases):
        sens = {level_key(s): (base * _approx_curve(s) / top if top else 0.0) for s in levels}
        layers.append(
            LossLayer(
                id=n.id,
                weight_name=n.weight_name,
                op_type=n.op_type,
                params=int(n.params),
                prunable_params=wsize,
                sparsity=(n.zero_params / n.params) if n.params else 0.0,
                sensitivity=sens,
                int8_sensitivity=None,
                depthwise=depthwise,
                first=i == 0,
            )
        )
    totals = analysis.totals or {}
    return LossProfile(
        name=name,
        method="approximated",
        settings={"levels": levels},
        metric="approximated",
        levels=levels,
        total_params=int(totals.get("params", 0)),
        prunable_params=sum(x.prunable_params for x in layers),
        layers=layers,
        model_path=analysis.path,
    )
