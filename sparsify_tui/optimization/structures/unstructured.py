"""Unstructured pruning: individual weights, the smallest magnitudes first (``Settings.structure`` =
``"unstructured"``).

* **Curves.** Time: with a measured perf profile, the layer's measured ms and its ``est_pruned_ms`` (the
  sparse-kernel runtime estimate of :mod:`sparsify_tui.profiling.perf_estimate`) interpolated on
  :data:`~sparsify_tui.optimization.layer_curves.GRID_LEVELS`, never above the dense time; with the FLOPS profile,
  the same rule on times proportional to FLOPs: the layer's share of the model FLOPs, estimated at each
  level by ``perf_estimate.estimate_node_ms`` with ``d = perf_estimate.depthwise_share`` of the prunable
  FLOPs (one calibration for both profiles). Loss:
  :func:`sparsify_tui.optimization.layer_curves.loss_curve` of the loss profile's sensitivity. Gain (for ranking):
  the time saved, or FLOPs-proportional when the profile predicts no saving at all.
* **Allocation:** :func:`sparsify_tui.optimization.allocation.allocate` (params-weighted target sparsity).
* **Estimates:** :mod:`sparsify_tui.optimization.estimates` (sparse-kernel runtime and onnxruntime).
* **Recipe:** one ``!GMPruningModifier`` per distinct final sparsity (SparseML 1.x, ``mask_type:
  unstructured``, ``inter_func: cubic``).
* **Code:** :func:`sparsify_tui.optimization.integration.generate_code` (GMP in every framework).
* **Apply:** magnitude pruning exact to the weight count
  (:func:`sparsify_tui.engine.pruning.magnitude_prune`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from sparsify_tui.optimization import allocation, estimates, integration
from sparsify_tui.optimization.layer_curves import (
    GRID_LEVELS, by_weight_and_id, interp_curve, levels, loss_curve, node_group, weight_params,
)
from sparsify_tui.optimization.modifiers import Modifier, pruning_schedule
from sparsify_tui.optimization.record import UNSTRUCTURED, Estimates, LayerEstimate, LayerRow, Optimization, Settings
from sparsify_tui.optimization.structures.base import PruningStructure
from sparsify_tui.profiling.perf_estimate import depthwise_share, estimate_node_ms

if TYPE_CHECKING:
    import numpy as np

    from sparsify_tui.analysis.nodes import ModelAnalysis

    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.perf import PerfProfile


class UnstructuredPruning(PruningStructure):
    """Per-weight magnitude pruning with a per-layer sparsity (see the module docstring)."""

    name = UNSTRUCTURED
    description = "individual weights by magnitude (speedup only on sparse-kernel runtimes; INT8 for onnxruntime)"

    def build_layers(self, analysis: "ModelAnalysis", perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                     settings: Settings, extras: Optional[Dict[str, Any]] = None) -> List[LayerRow]:
        from sparsify_tui.analysis.nodes import prunable_layers

        nodes = prunable_layers(analysis)
        perf_rows = by_weight_and_id(perf.nodes) if perf is not None else {}
        loss_rows = by_weight_and_id(loss.layers) if loss is not None else {}
        total_flops = float((analysis.totals or {}).get("flops") or 0) or sum(float(n.flops or 0) for n in nodes) or 1.0
        dw_share = depthwise_share((n.op_type, n.attrs, float(n.flops or 0)) for n in nodes)
        layers: List[LayerRow] = []
        for i, n in enumerate(nodes):
            wname, nid = n.weight_name, n.id or n.weight_name
            flops = float(n.flops or 0)
            pn = perf_rows.get(nid) or perf_rows.get(wname)
            if perf is not None:
                # per-node times scaled to the unprofiled median (the Perf screen's "ms" column)
                base = float(perf.node_ms(pn) or 0.0) if pn else 0.0
                est = {k: v * perf.scale for k, v in levels(pn.est_pruned_ms).items()} if pn else {}
                pts = {0.0: base, **est}
                time_curve = [min(base, interp_curve(pts, s)) if base else 0.0 for s in GRID_LEVELS]
                int8_ms = perf.node_ms(pn, "int8") if pn else None
            else:
                base = flops / total_flops  # relative units: share of the model's FLOPs
                pruned = estimate_node_ms(base, True, dw_share, GRID_LEVELS)
                time_curve = [pruned[str(s)] for s in GRID_LEVELS]
                int8_ms = None
            ll = loss_rows.get(wname) or loss_rows.get(nid)
            row = LayerRow(
                weight_name=wname, node_id=nid, op_type=n.op_type, params=weight_params(n),
                weight_shape=n.weight_shape, flops=flops, group=node_group(n),
                baseline_ms=base if perf is not None else None, time_curve=[round(t, 6) for t in time_curve],
                loss_curve=loss_curve(levels(ll.sensitivity) if ll else {}),
                int8_sensitivity=ll.int8_sensitivity if ll else None, int8_time_ms=int8_ms,
            )
            row.excluded = self.excluded_reason(settings, i, row)
            layers.append(row)
        # Ranking gain: time saved; falls back to FLOPs-proportional when the profile predicts no saving at all.
        saved = sum(l.time_curve[0] - l.time_curve[-1] for l in layers)
        for l in layers:
            t0 = l.time_curve[0]
            if saved > 0 and perf is not None:
                l.gain_curve = [t0 - t for t in l.time_curve]
            else:
                ref = t0 if (perf is not None and t0) else l.flops / total_flops
                l.gain_curve = [ref * s for s in GRID_LEVELS]
        return layers

    def allocate(self, layers: List[LayerRow], settings: Settings,
                 overrides: Dict[str, float]) -> allocation.Allocation:
        return allocation.allocate(layers, settings, overrides)

    def layer_estimates(self, layers: List[LayerRow], sparsities: Dict[str, float]) -> List[LayerEstimate]:
        return estimates.layer_estimates(layers, sparsities)

    def model_estimates(self, rec: Optimization, sparsities: Dict[str, float]) -> Estimates:
        return estimates.model_estimates(rec.layers, sparsities, model=rec.model, quantization=rec.quantization,
                                         flops_profile=rec.flops_profile)

    def recipe_modifiers(self, rec: Optimization) -> List[Modifier]:
        """One ``!GMPruningModifier`` per distinct final sparsity (rounded to 4 decimals), in increasing order:
        ``params`` (weight names), ``init_sparsity`` (min of the plan's and the final), ``final_sparsity``,
        the pruning epochs, ``update_frequency``, ``inter_func: cubic``, ``mask_type: unstructured``,
        ``leave_enabled: true``."""
        ep = rec.epochs
        groups: Dict[float, List[str]] = {}
        for l in rec.layers:
            s = round(float(l.sparsity or 0.0), 4)
            if s > 0:
                groups.setdefault(s, []).append(l.weight_name)
        return [Modifier("GMPruningModifier", {"params": groups[s], **pruning_schedule(ep, s, "unstructured")})
                for s in sorted(groups)]

    def integration_code(self, rec: Optimization, framework: str, recipe_path: str) -> str:
        return integration.generate_code(rec, framework, recipe_path)

    def prune_weight(self, weight: "np.ndarray", sparsity: float) -> "np.ndarray":
        """A copy of ``weight`` with its ``round(sparsity * size)`` smallest-|w| entries zeroed (``sparsity`` 0
        returns ``weight`` itself). Raises ``ValueError`` for a sparsity outside [0, 1]."""
        from sparsify_tui.engine.pruning import magnitude_prune

        s = float(sparsity)
        return weight if s == 0.0 else magnitude_prune(weight, s)
