"""Channel pruning: whole channels removed from channel groups, giving a smaller dense model that onnxruntime runs
faster with the same kernels (``Settings.structure`` = ``"channel"``).

* **Rows** are the model's channel groups (:mod:`sparsify_tui.analysis.channels`): ``weight_name`` is the group
  id (the weight name of its first producer), ``sparsity`` the fraction of its channels removed (the *effective*
  ratio ``1 - kept/channels``: kept counts round to ``round_to``, the CPU's NCHWc block). Groups that are not
  prunable (they reach a graph output, meet LayerNorm, a grouped conv...) are rows kept dense with their reason;
  the first layer's group stays dense by default (``dense_first_layer``).
* **Curves.** Loss: a channel loss profile (``profile loss --structure channel``, magnitude or one-shot) by
  group id, else the group L2 norm of the channels removed (:func:`sparsify_tui.profiling.loss_channel.
  channel_magnitude`, computed when the optimization is created). Time: the channel time model
  (:mod:`sparsify_tui.optimization.channel_model`): a channel calibration stored with the perf profile, else the
  perf profile's per-node times scaled by MACs, else MACs (FLOPS profile), and every estimate names which.
* **Allocation:** :func:`sparsify_tui.optimization.channel_model.allocate_channels`, to ``target``: ``uniform``
  (R of every free group), ``sparsity`` (R of all prunable channels), ``macs`` (X times fewer MACs) or
  ``speedup`` (X times faster, estimated), at the least summed sensitivity (balance as in unstructured), with a
  per-group cap ``max_sparsity`` (0.7) and overrides (group id -> ratio) kept across re-evaluation.
* **Estimates** (:class:`ChannelEstimates`): onnxruntime ms per batch and speedup of the thinned FP32 model and,
  when quantizing, times the INT8 gain measured on the dense model (an approximation: the INT8 gain of the thinned
  model is measured once it is benchmarked); MACs reduction, params, and the estimated output change (the
  per-group loss summed, in the loss profile's metric).
* **Recipe:** one SparseML 1.x ``!StructuredPruningModifier`` per distinct final ratio (``param_groups``: the
  groups' producer and depthwise weights, ``mask_type: filter``) and a ``!LayerThinningModifier`` whose
  ``param_group_dependency_map`` maps each group to the tensors that shrink with it (consumer weights on their
  input axis, biases, BatchNorm parameters).
* **Code:** :mod:`sparsify_tui.optimization.integration_channel` (Torch-Pruning for plain PyTorch).
* **Apply:** the whole model is thinned (:func:`sparsify_tui.engine.thinning.thin_model`, exact), then INT8
  when quantizing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from sparsify_tui.errors import ProjectError
from sparsify_tui.optimization.channel_model import (
    KIND_TEXT, TARGETS, ChannelTimeModel, GroupInput, TimedNode, allocate_channels, loss_at, measure,
)
from sparsify_tui.optimization.layer_curves import GRID_LEVELS, levels, loss_curve
from sparsify_tui.optimization.modifiers import Modifier, pruning_schedule, recipe_float
from sparsify_tui.optimization.record import (
    Estimates, GroupTime, LayerEstimate, LayerRow, Optimization, Settings,
)
from sparsify_tui.optimization.structures.base import GroupRun, PruningStructure

if TYPE_CHECKING:
    from sparsify_tui.analysis.nodes import ModelAnalysis
    from sparsify_tui.optimization.allocation import Allocation
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.perf import PerfProfile

CHANNEL = "channel"
EXTRA_KEY = "channel_model"
"""Key of the channel inputs :meth:`ChannelPruning.analysis_extras` reads from the model (in the ``extras`` that
:meth:`ChannelPruning.build_layers` gets)."""
TIME_MODEL_KEY = "channel_time_model"
"""``rec.model.extra`` key of the stored :class:`~sparsify_tui.optimization.channel_model.ChannelTimeModel`."""
PARAM_ROLES = ("producer", "depthwise")
"""Member roles pruned on their output (filter) axis: SparseML ``param_groups``."""
DEPENDENT_ROLES = ("consumer", "bias", "batchnorm_scale", "batchnorm", "per_channel")
"""Member roles that shrink with a group: SparseML ``param_group_dependency_map`` values."""
LAYERS_KEY = "channel_layers"
"""``rec.model.extra`` key of the model's prunable layers in graph order (for the integration code)."""
MAGNITUDE_NAME = "Channel magnitude (group L2 norm)"
IMPORTANCES = ("auto", "l2", "bn_scale", "activation", "thinet")
"""Channel importances a channel optimization may name (:class:`ChannelSettings`)."""
"""Display name of the loss curves computed on the fly when no channel loss profile is chosen."""


@dataclass
class ChannelSettings(Settings):
    """Settings of a channel optimization (:class:`Settings` plus the fields below; ``sparsity`` is the ratio R
    of channels removed, ``max_sparsity`` the per-group cap, ``min_sparsity`` unused).

    ``target``: ``"uniform"`` (R of every free group), ``"sparsity"`` (R of all prunable channels, allocated),
    ``"macs"`` (``macs_reduction`` times fewer MACs) or ``"speedup"`` (``target_speedup`` times faster on
    onnxruntime, estimated); ``round_to``: kept counts round to this multiple (0 = this CPU's NCHWc block,
    :func:`~sparsify_tui.analysis.channels.default_round_to`, set when the optimization is created);
    ``importance``: which channels go: ``"auto"`` (ThiNet's greedy choice on the calibration data when apply has
    data, else the group L2 norm), ``"l2"``, ``"bn_scale"``, ``"activation"`` or ``"thinet"``
    (:func:`~sparsify_tui.engine.channel_prune.resolve_importance`); ``data`` / ``data_sha256`` / ``labels_key``:
    the sample data the optimization was built with (apply calibrates, reconstructs and scores on it when not given
    other data).
    """

    sparsity: float = 0.3
    min_sparsity: float = 0.0
    max_sparsity: float = 0.7
    structure: str = CHANNEL
    target: str = "uniform"
    target_speedup: float = 1.5
    macs_reduction: float = 2.0
    round_to: int = 0
    importance: str = "auto"
    data: Optional[str] = None
    data_sha256: Optional[str] = None
    labels_key: Optional[str] = None

    def validate(self):
        super().validate()
        if self.target not in TARGETS:
            raise ValueError(f"unknown channel target {self.target!r}: use one of {', '.join(TARGETS)}")
        if self.sparsity > 0.99:
            raise ValueError("the channel ratio must be below 1 (a group keeps at least one block)")
        for key in ("target_speedup", "macs_reduction"):
            v = float(getattr(self, key))
            if not v >= 1.0:
                raise ValueError(f"{key} must be at least 1, got {v}")
            setattr(self, key, v)
        if int(self.round_to) < 0:
            raise ValueError(f"round_to must be 0 (this CPU's default) or more, got {self.round_to}")
        if self.importance not in IMPORTANCES:
            raise ValueError(f"unknown channel importance {self.importance!r}: use {', '.join(IMPORTANCES)}")
        return self

    def target_value(self) -> float:
        """The number the target asks for: R, the speedup or the MACs reduction."""
        return {"speedup": self.target_speedup, "macs": self.macs_reduction}.get(self.target, self.sparsity)


@dataclass
class ChannelRow(LayerRow):
    """One channel group (:class:`LayerRow` plus; ``params`` counts its channels, the unit a ratio counts):
    ``channels``; ``kept`` (after evaluation); ``prunable`` and
    ``not_prunable`` (the reason); ``param_group`` (weights pruned on their output axis: producers, depthwise
    convs); ``dependents`` (tensors that shrink with the group: consumers' input axis, biases, BatchNorm and
    per-channel constants); ``producers`` / ``consumers`` (node ids); ``macs`` (MACs of the layers the group
    touches); ``est_loss`` (the loss curve at the group's ratio, in the loss profile's metric)."""

    channels: int = 0
    kept: Optional[int] = None
    prunable: bool = True
    not_prunable: Optional[str] = None
    param_group: List[str] = field(default_factory=list)
    dependents: List[str] = field(default_factory=list)
    producers: List[str] = field(default_factory=list)
    consumers: List[str] = field(default_factory=list)
    macs: int = 0
    est_loss: Optional[float] = None


@dataclass
class ChannelEstimate(LayerEstimate):
    """Per-group display values: :class:`LayerEstimate` (``est_ms``: ms per batch of the nodes the group owns on
    onnxruntime; ``est_speedup`` their dense / thinned time) plus ``kept`` and ``est_loss``."""

    kept: Optional[int] = None
    est_loss: Optional[float] = None


@dataclass
class ChannelEstimates(Estimates):
    """Estimates of a channel optimization (:class:`Estimates` plus the fields below). ``ort_ms`` /
    ``ort_speedup`` are onnxruntime on the thinned model, times the measured INT8 factor when quantizing."""

    time_model: str = ""
    """``calibrated`` | ``per-node`` | ``macs`` (:mod:`sparsify_tui.optimization.channel_model`)."""
    time_model_note: str = ""
    ort_ms_fp32: Optional[float] = None
    """Thinned FP32 model on onnxruntime, ms per batch (None with the FLOPS profile)."""
    ort_speedup_fp32: Optional[float] = None
    macs: Optional[float] = None
    """Per batch, dense."""
    macs_pruned: Optional[float] = None
    macs_reduction: Optional[float] = None
    est_output_change: Optional[float] = None
    """Σ over groups of the loss curve at the group's ratio (additive approximation), in ``loss_metric``."""
    loss_metric: str = ""
    target: str = ""
    target_value: Optional[float] = None
    achieved: Optional[float] = None
    """The target's measure reached (fraction of channels, MACs reduction or speedup)."""
    channels: int = 0
    """Channels of the prunable groups."""
    kept_channels: int = 0
    groups_thinned: int = 0


def _calibrated_time_model(nodes: list, perf: "PerfProfile", calib: dict, common: dict) -> ChannelTimeModel:
    """The ``calibrated`` time model: each node's fitted ``t0, c0, c1`` and points from the channel calibration
    (a node it did not fit: its profiled time, proportional to its work), onnxruntime's rows and the latency line
    as fitted."""
    by_id = {p.id: p for p in perf.nodes}
    fit = calib["nodes"]
    timed = []
    for n in nodes:
        c = fit.get(n.id)
        if c is not None:
            timed.append(TimedNode(n, float(c["t0"]), float(c["c0"]), float(c["c1"]), c.get("pts")))
        else:
            p = by_id.get(n.id)
            timed.append(TimedNode(n, float(p.time_ms or 0.0) if p else 0.0, 0.0, 1.0))
    summary = {k: calib.get(k) for k in ("ratios", "seconds", "created", "round_to", "fit_rel_error",
                                         "latency_ms", "load_average", "warnings")}
    return ChannelTimeModel(kind="calibrated", nodes=timed, special=[dict(s) for s in calib.get("special") or []],
                            a=float(calib["latency"]["a"]), g_ms=float(calib["latency"]["g_ms"]),
                            calibration=summary, **common)


def _per_node_time_model(nodes: list, perf: "PerfProfile", common: dict) -> ChannelTimeModel:
    """The ``per-node`` time model: each node's profiled time, proportional to its work; onnxruntime's own rows
    fixed; ``a`` scales the node sum to the measured median."""
    by_id = {p.id: p for p in perf.nodes}
    timed = [TimedNode(n, float(by_id[n.id].time_ms or 0.0) if n.id in by_id else 0.0, 0.0, 1.0) for n in nodes]
    special = [{"id": p.id, "t0": float(p.time_ms or 0.0), "c0": 1.0, "c1": 0.0}
               for p in perf.nodes if p.id.startswith("[")]
    total = sum(t.t0 for t in timed) + sum(s["t0"] for s in special)
    a = (common["baseline_ms"] / total) if (common["baseline_ms"] and total > 0) else 1.0
    return ChannelTimeModel(kind="per-node", nodes=timed, special=special, a=a, **common)


class ChannelPruning(PruningStructure):
    """Channel-group thinning with a per-group ratio (see the module docstring)."""

    name = CHANNEL
    description = "whole channels (a smaller dense model: faster on onnxruntime)"
    settings_type = ChannelSettings
    layer_type = ChannelRow
    estimates_type = ChannelEstimates
    model_level = True
    loss_structure = CHANNEL
    computed_loss_name = MAGNITUDE_NAME
    calibrated_perf = True  # the channel time model is stored with a perf profile (profile channel-calibration)

    # -- inputs read from the model ------------------------------------------------------------------------
    def analysis_extras(self, model_path: Any, analysis: "ModelAnalysis", *, batch_size: int = 1,
                        dims: Optional[Dict[str, int]] = None,
                        perf_extras: Optional[Dict[str, Any]] = None,
                        settings: Optional[Settings] = None) -> Dict[str, Any]:
        """``{"channel_model": {...}}``: the groups (with members and roles), every node's channel factors
        (:func:`~sparsify_tui.analysis.channels.node_channel_factors`), the group-norm magnitude curves, the
        ``round_to`` they were computed at (``settings.round_to`` when set, else this CPU's) and the channel
        calibration stored with the perf profile (or None)."""
        from sparsify_tui.analysis.channels import analyze_channels, default_round_to, node_channel_factors
        from sparsify_tui.profiling.loss_channel import channel_magnitude

        path = Path(model_path)
        model, an, groups = analyze_channels(path, batch_size, dims or {})
        round_to = int(getattr(settings, "round_to", 0) or 0) or default_round_to()
        magnitude = channel_magnitude(model, groups, round_to=round_to, base_dir=path.parent)
        rows = []
        for g in groups.groups:
            rows.append({**g.to_dict(), "first_layer": bool(g.first_layer),
                         "member_roles": [m.to_dict() for m in g.members]})
        layers = [{"weight": n.weight_name, "shape": n.weight_shape, "node": n.id, "op_type": n.op_type}
                  for n in an.nodes if not n.graph and n.prunable and n.weight_name]
        return {EXTRA_KEY: {
            "groups": rows, "layers": layers, "nodes": [n.to_dict() for n in node_channel_factors(groups, an)],
            "magnitude": magnitude, "round_to": round_to, "batch_size": int(batch_size), "dims": dict(dims or {}),
            "calibration": (perf_extras or {}).get("channel_calibration"),
            "prunable_macs_share": groups.prunable_macs_share,
        }}

    @staticmethod
    def _inputs(extras: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        data = (extras or {}).get(EXTRA_KEY)
        if not data:
            raise ProjectError("a channel optimization needs the model's channel groups: create it through "
                               "sparsify-tui (services.optimizations.create_optimization), which reads them")
        return data

    def _time_model(self, analysis: "ModelAnalysis", extras: Optional[Dict[str, Any]], perf: Optional["PerfProfile"],
                    settings: ChannelSettings) -> ChannelTimeModel:
        from sparsify_tui.analysis.channels import NodeChannels, group_round_to
        from sparsify_tui.optimization.layer_curves import perf_model_ms

        data = self._inputs(extras)
        groups = {g["id"]: int(g["channels"]) for g in data["groups"] if g["prunable"]}
        totals = analysis.totals or {}
        nodes = [NodeChannels.from_dict(n) for n in data["nodes"]]
        calib = data.get("calibration") if perf is not None else None
        round_to = int(settings.round_to) or int(data.get("round_to") or 8)
        own = {g["id"]: group_round_to(round_to, int(g.get("channel_size") or 1), g.get("unit") or "channel")
               for g in data["groups"] if g["prunable"]}
        common = dict(groups=groups, round_to=round_to,
                      group_round_to={k: v for k, v in own.items() if v != round_to},
                      macs_total=float(totals.get("macs") or sum(n.macs for n in nodes)),
                      params_total=float(totals.get("params") or 0.0), batch_size=int(data.get("batch_size") or 1))
        if perf is None:
            timed = [TimedNode(n, float(n.macs) if n.kind != "other" else 0.0, 0.0, 1.0) for n in nodes]
            return ChannelTimeModel(kind="macs", nodes=timed, **common)
        common.update(baseline_ms=perf_model_ms(perf), core_count=perf.core_count,
                      batch_size=int(perf.batch_size or 1))
        if calib and calib.get("nodes"):
            return _calibrated_time_model(nodes, perf, calib, common)
        return _per_node_time_model(nodes, perf, common)

    def summary_extras(self, analysis, perf, loss, settings, extras=None) -> Dict[str, Any]:
        """The time model (:data:`TIME_MODEL_KEY`) and the prunable layers in graph order (``channel_layers``:
        weight name, shape, node id, op type; the integration code maps them to the training model's modules)."""
        return {TIME_MODEL_KEY: self._time_model(analysis, extras, perf, settings).to_dict(),
                LAYERS_KEY: list(self._inputs(extras).get("layers") or [])}

    @staticmethod
    def model_of(rec: Optimization) -> ChannelTimeModel:
        """The record's stored time model; :class:`ProjectError` when missing."""
        d = rec.model.extra.get(TIME_MODEL_KEY)
        if not d:
            raise ProjectError(f"optimization {rec.name!r} has no channel time model: create it again")
        return ChannelTimeModel.from_dict(d)

    # -- rows --------------------------------------------------------------------------------------------
    def build_layers(self, analysis: "ModelAnalysis", perf: Optional["PerfProfile"], loss: Optional["LossProfile"],
                     settings: Settings, extras: Optional[Dict[str, Any]] = None) -> List[LayerRow]:
        data = self._inputs(extras)
        if not int(getattr(settings, "round_to", 0) or 0):
            settings.round_to = int(data.get("round_to") or 8)  # resolved once, stored with the record
        if loss is not None and (loss.settings or {}).get("structure") != CHANNEL:
            raise ProjectError(f"loss profile {loss.name!r} is per layer: a channel optimization reads a channel "
                               f"loss profile (sparsify-tui profile loss PROJECT --structure channel) or "
                               f"'approximated' for the group-norm magnitude")
        if not any(g["prunable"] for g in data["groups"]):
            reasons = "; ".join(sorted({str(g.get("reason")) for g in data["groups"]})[:3])
            raise ProjectError(f"the model has no prunable channel group ({reasons or 'no Conv/Gemm/MatMul'}): "
                               "nothing to thin; see `sparsify-tui analyze MODEL --channel-groups`")
        tm = self._time_model(analysis, extras, perf, settings)
        sens = {l.id: levels(l.sensitivity) for l in loss.layers} if loss is not None else \
            {gid: levels(v) for gid, v in (data.get("magnitude") or {}).items()}
        scale = tm.scale_ms()
        dense_groups = tm.group_ms({})
        dense_lat = tm.latency({})
        rows: List[LayerRow] = []
        first_id = next((g["id"] for g in data["groups"] if g.get("first_layer")), None)
        for i, g in enumerate(data["groups"]):
            gid = g["id"]
            roles = g.get("member_roles") or []
            param_group = list(dict.fromkeys(m["tensor"] for m in roles if m["role"] in PARAM_ROLES))
            dependents = list(dict.fromkeys(m["tensor"] for m in roles
                                            if m["role"] in DEPENDENT_ROLES and m["tensor"] not in param_group))
            time_curve, gain_curve = [], []
            for s in GRID_LEVELS:
                kf = tm.kept_fraction({gid: s}) if (g["prunable"] and s > 0) else {}
                time_curve.append(round(tm.group_ms(kf).get(gid, 0.0), 6) if g["prunable"] else 0.0)
                gain_curve.append(round(scale * (dense_lat - tm.latency(kf)), 6) if kf else 0.0)
            row = ChannelRow(
                weight_name=gid, node_id=(g.get("producers") or [gid])[0], op_type="channel group",
                params=int(g["channels"]), weight_shape=None, flops=2.0 * float(g.get("macs") or 0),
                baseline_ms=dense_groups.get(gid) if tm.baseline_ms else None, time_curve=time_curve,
                loss_curve=loss_curve(sens.get(gid, {})) if g["prunable"] else [0.0] * len(GRID_LEVELS),
                gain_curve=gain_curve, channels=int(g["channels"]), prunable=bool(g["prunable"]),
                not_prunable=g.get("reason"), param_group=param_group, dependents=dependents,
                producers=list(g.get("producers") or []), consumers=list(g.get("consumers") or []),
                macs=int(g.get("macs") or 0))
            row.extra["first_layer"] = bool(g.get("first_layer") or gid == first_id)
            row.excluded = self.excluded_reason(settings, i, row)
            rows.append(row)
        return rows

    def excluded_reason(self, settings: Settings, index: int, layer: LayerRow) -> Optional[str]:
        """"not prunable: <reason>" for a group that cannot be thinned, "first layer" for the group of the first
        layer's output channels (with ``dense_first_layer``), else None."""
        if isinstance(layer, ChannelRow) and not layer.prunable:
            return f"not prunable: {layer.not_prunable}"
        if settings.dense_first_layer and layer.extra.get("first_layer"):
            return "first layer"
        return None

    def check_override(self, layer: LayerRow, value: float) -> None:
        if value > 0 and isinstance(layer, ChannelRow) and not layer.prunable:
            raise ProjectError(f"channel group {layer.weight_name!r} is not prunable ({layer.not_prunable}): "
                               f"its override can only be 0")

    # -- allocation and estimates ----------------------------------------------------------------------------
    def allocate(self, layers, settings, overrides):
        raise ProjectError("channel allocation needs the whole optimization record (allocate_record)")

    def layer_estimates(self, layers, sparsities):
        raise ProjectError("channel estimates need the whole optimization record (estimates_record)")

    def allocate_record(self, rec: Optimization, settings: Settings, overrides: Dict[str, float]) -> "Allocation":
        from sparsify_tui.optimization.allocation import Allocation

        settings.validate()
        tm = self.model_of(rec)
        rows = []
        reasons: Dict[str, Optional[str]] = {}
        for l in rec.layers:
            gid = l.weight_name
            if gid in overrides:
                rows.append(GroupInput(gid, l.channels, False, float(overrides[gid]), l.loss_curve, l.gain_curve))
                reasons[gid] = "override"
            elif l.excluded:
                rows.append(GroupInput(gid, l.channels, False, 0.0, l.loss_curve, l.gain_curve))
                reasons[gid] = l.excluded
            else:
                rows.append(GroupInput(gid, l.channels, True, 0.0, l.loss_curve, l.gain_curve))
                reasons[gid] = None
        res = allocate_channels(tm, rows, target=settings.target, value=settings.target_value(),
                                balance=settings.balance, cap=settings.max_sparsity)
        ratios = {g: round(float(r), 6) for g, r in res.ratios.items()}
        for l in rec.layers:
            if reasons.get(l.weight_name) is None and ratios.get(l.weight_name, 0.0) == 0.0:
                reasons[l.weight_name] = "dense: not needed for the target" if settings.target != "uniform" \
                    else "dense: no rounded count below all channels"
        chans = sum(l.channels for l in rec.layers if l.prunable) or 1
        avg = sum(l.channels * ratios.get(l.weight_name, 0.0) for l in rec.layers if l.prunable) / chans
        return Allocation(sparsities=ratios, reasons=reasons, avg_sparsity=avg, max_reachable=res.reachable,
                          warnings=res.warnings)

    def estimates_record(self, rec: Optimization, sparsities: Dict[str, float]) -> List[LayerEstimate]:
        tm = self.model_of(rec)
        kf = tm.kept_fraction(sparsities)
        now, dense = tm.group_ms(kf), tm.group_ms({})
        top = max((max(l.loss_curve) for l in rec.layers if l.loss_curve), default=0.0)
        lsum = sum(loss_at(l.loss_curve, 0.5) for l in rec.layers) or 1.0
        gsum = sum(float(np.interp(0.5, GRID_LEVELS, l.gain_curve)) for l in rec.layers) or 1.0
        out = []
        for l in rec.layers:
            r = float(sparsities.get(l.weight_name, 0.0))
            est, d0 = now.get(l.weight_name, 0.0), dense.get(l.weight_name, 0.0)
            lr = loss_at(l.loss_curve, r)
            out.append(ChannelEstimate(
                est_ms=est, est_speedup=(d0 / est) if est > 0 else 1.0,
                recoverability=max(0.0, min(1.0, 1.0 - lr / top)) if top > 0 else 1.0,
                loss_sensitivity=loss_at(l.loss_curve, 0.5) / lsum,
                perf_sensitivity=float(np.interp(0.5, GRID_LEVELS, l.gain_curve)) / gsum,
                kept=tm.kept_count(l.weight_name, r) if (l.weight_name in tm.groups and r > 0) else l.channels,
                est_loss=lr))
        return out

    def model_estimates(self, rec: Optimization, sparsities: Dict[str, float]) -> Estimates:
        from sparsify_tui.optimization.estimates import int8_factor

        tm = self.model_of(rec)
        st = rec.settings
        kf = tm.kept_fraction(sparsities)
        speed = tm.speedup(kf)
        quantize = bool(rec.quantization.enabled)
        base = rec.model.baseline_ms if not rec.flops_profile else None
        factor = None if rec.flops_profile else int8_factor(rec.model.baseline_ms, rec.model.int8_ms,
                                                            list(rec.quantization.excluded or []),
                                                            rec.model.perf_nodes)
        q = factor if (quantize and factor) else 1.0
        fp32_ms = base / speed if base else None
        ort_ms = fp32_ms * q if fp32_ms else None
        macs0, macs1 = tm.macs_total, tm.macs(kf)
        totals = rec.model.totals or {}
        flops0 = float(totals.get("flops") or 2 * macs0)
        params0 = float(totals.get("params") or tm.params_total)
        params1 = max(1.0, tm.params(kf))
        prunable = [l for l in rec.layers if l.prunable]
        chans = sum(l.channels for l in prunable)
        kept = sum(tm.kept_count(l.weight_name, sparsities.get(l.weight_name, 0.0))
                   if sparsities.get(l.weight_name, 0.0) > 0 else l.channels for l in prunable)
        pruned = [(l.channels, l.recoverability if l.recoverability is not None else 1.0)
                  for l in prunable if sparsities.get(l.weight_name, 0.0) > 0]
        recov = (sum(a * b for a, b in pruned) / sum(a for a, _ in pruned)) if pruned else 1.0
        value = st.target_value() if isinstance(st, ChannelSettings) else st.sparsity
        target = getattr(st, "target", "uniform")
        achieved = measure(tm, "sparsity" if target == "uniform" else target, kf, chans)
        note = ("channel thinning gives a smaller dense model that onnxruntime runs with the same kernels; time "
                "from the " + KIND_TEXT.get(tm.kind, tm.kind))
        if quantize:
            note += "; INT8 factor measured on the dense model (the thinned model's INT8 gain is measured when it " \
                    "is benchmarked)"
        return ChannelEstimates(
            label="estimates", sparse_runtime="onnxruntime (thinned dense model)", ort_note=note,
            time_units="relative (FLOPS profile)" if base is None else "ms",
            baseline_ms=base, sparse_ms=None, sparse_speedup=None, ort_ms=ort_ms,
            ort_speedup=(base / ort_ms) if (base and ort_ms) else (speed / q if q else speed),
            int8_factor=factor, int8_measured=factor is not None,
            flops=flops0, flops_pruned=flops0 - 2.0 * (macs0 - macs1),
            flops_reduction=macs0 / macs1 if macs1 > 0 else None,
            params=params0, params_nonzero=params1, params_compression=params0 / params1,
            size_mb_fp32=params0 * 4 / 1e6, est_size_mb=params1 * (1 if quantize else 4) / 1e6,
            avg_sparsity=(1.0 - kept / chans) if chans else 0.0, est_recovery=recov,
            time_model=tm.kind, time_model_note=tm.description, ort_ms_fp32=fp32_ms, ort_speedup_fp32=speed,
            macs=macs0, macs_pruned=macs1, macs_reduction=macs0 / macs1 if macs1 > 0 else None,
            est_output_change=float(sum(loss_at(l.loss_curve, sparsities.get(l.weight_name, 0.0)) for l in prunable)),
            loss_metric=rec.loss_profile_name, target=target, target_value=value, achieved=achieved,
            channels=int(chans), kept_channels=int(kept),
            groups_thinned=sum(1 for l in prunable if sparsities.get(l.weight_name, 0.0) > 0),
        )

    # -- recipe and code -------------------------------------------------------------------------------------
    def recipe_modifiers(self, rec: Optimization) -> List[Modifier]:
        """One ``!StructuredPruningModifier`` per distinct final ratio (4 decimals), increasing: ``param_groups``
        (one list per group: its producer and depthwise weights, pruned on their filter axis together),
        ``params`` (the same names, flat, so nothing else is pruned), ``init_sparsity`` (min of the plan's and the
        final), ``final_sparsity``, the pruning epochs, ``update_frequency``, ``inter_func: cubic``,
        ``mask_type: filter``, ``leave_enabled: true``; then one ``!LayerThinningModifier`` at the end of pruning
        with ``param_group_dependency_map`` (``"w1,w2"`` -> tensors that shrink with the group) and
        ``structure_type: filter``. Names and fields as SparseML 1.x defines them
        (``sparseml/pytorch/sparsification/pruning/modifier_pruning_structured.py``,
        ``sparseml/pytorch/sparsification/modifier_thinning.py``)."""
        ep = rec.epochs
        by_ratio: Dict[float, List[ChannelRow]] = {}
        for l in rec.layers:
            s = round(float(l.sparsity or 0.0), 4)
            if s > 0 and isinstance(l, ChannelRow) and l.param_group:
                by_ratio.setdefault(s, []).append(l)
        mods = []
        for s in sorted(by_ratio):
            groups = [list(l.param_group) for l in by_ratio[s]]
            mods.append(Modifier("StructuredPruningModifier", {
                "param_groups": groups,
                "params": [w for g in groups for w in g],
                **pruning_schedule(ep, s, "filter"),
            }))
        if by_ratio:
            dep_map = {",".join(l.param_group): list(l.dependents)
                       for s in sorted(by_ratio) for l in by_ratio[s]}
            mods.append(Modifier("LayerThinningModifier", {
                "param_group_dependency_map": dep_map,
                "structure_type": "filter",
                "start_epoch": recipe_float(ep.pruning_end_epoch),
            }))
        return mods

    @staticmethod
    def target_text(st: Settings) -> str:
        """What the settings ask for: a uniform ratio R, R of all channels, X times fewer MACs or X times faster."""
        return {"uniform": f"uniform ratio {st.sparsity:.3f} of every free group's channels",
                "sparsity": f"{st.sparsity:.3f} of all prunable channels (allocated)",
                "macs": f"{getattr(st, 'macs_reduction', 0):.2f}x fewer MACs",
                "speedup": f"{getattr(st, 'target_speedup', 0):.2f}x estimated speedup on onnxruntime",
                }[getattr(st, "target", "uniform")]

    def settings_rows(self, settings: Settings) -> List[Tuple[str, Any]]:
        """The target (one row: the speedup, the MACs reduction or the ratio it asks for), the balance, the
        per-group cap, the rounding and the channel importance; not the unstructured filters it ignores."""
        st = settings
        return [("target", self.target_text(st)), ("balance (0 time saved, 1 loss)", st.balance),
                ("max ratio removed per group", st.max_sparsity),
                ("kept channels round to", getattr(st, "round_to", 0) or "this CPU's block"),
                ("channel importance", {"l2": "group L2 norm", "bn_scale": "BatchNorm scale"}.get(
                    getattr(st, "importance", "l2"), getattr(st, "importance", "l2"))),
                ("first layer kept whole", st.dense_first_layer)]

    def rows_summary(self, rec: Optimization) -> str:
        """``"5 of 18 groups thinned"``."""
        return f"{sum(1 for l in rec.layers if (l.sparsity or 0) > 0)} of {len(rec.layers)} groups thinned"

    def recipe_summary(self, rec: Optimization) -> str:
        """The target (uniform R, R of all channels, X times fewer MACs or X times faster, estimated) and what
        was reached: groups thinned, channels kept, the estimated speedup and MACs reduction."""
        st, e = rec.settings, rec.estimates
        asked = self.target_text(st)
        if not isinstance(e, ChannelEstimates):
            return f"channel pruning: {asked}; balance {st.balance:.2f}"
        return (f"channel pruning: {asked}; {e.groups_thinned} groups thinned, {e.kept_channels} of {e.channels} "
                f"channels kept, est. {e.ort_speedup_fp32 or 1:.2f}x faster ({e.time_model} time model), "
                f"{e.macs_reduction or 1:.2f}x fewer MACs; balance {st.balance:.2f}")

    def integration_code(self, rec: Optimization, framework: str, recipe_path: str) -> str:
        from sparsify_tui.optimization.integration_channel import generate_channel_code

        return generate_channel_code(rec, framework, recipe_path)

    # -- measured ------------------------------------------------------------------------------------------
    has_measured_groups = True

    def measured_reference(self, rec: Optimization) -> tuple:
        """The batch size and core count of the record's channel time model (its estimate's)."""
        tm = rec.model.extra.get(TIME_MODEL_KEY) or {}
        return tm.get("batch_size"), tm.get("core_count")

    def measured_groups(self, rec: Optimization, applied: GroupRun, baseline: GroupRun, *, dims=None, data=None,
                        cancel=None) -> Dict[str, GroupTime]:
        """Each group's measured ms per batch in the thinned (``ms``) and the baseline model (``baseline_ms``): one
        profiled pass of each (:func:`sparsify_tui.profiling.channel_calibration.profile_node_ms`), attributed as
        a perf profile is, the node times summed per group as the estimate sums them
        (:meth:`ChannelTimeModel.group_sums`) and scaled to the benchmark's median of that model."""
        from sparsify_tui.profiling.channel_calibration import profile_node_ms

        tm = ChannelTimeModel.from_dict(rec.model.extra[TIME_MODEL_KEY])
        sums = []
        for run in (applied, baseline):
            p = profile_node_ms(run.path, run.run, dims=dims, data=data, cancel=cancel)
            scale = run.median_ms / p["kernel_total_ms"] if p["kernel_total_ms"] else 1.0
            sums.append({g: v * scale for g, v in tm.group_sums(p["node_ms"]).items()})
        return {g: GroupTime(ms=sums[0].get(g), baseline_ms=sums[1].get(g)) for g in tm.groups}

    # -- apply -----------------------------------------------------------------------------------------------
    def apply_model(self, model_path, out_path, sparsities, *, settings=None, batch_size=1, dims=None, feeds=None,
                    calibration=None, reconstruct=True, real_data=True, engine=None, progress=None,
                    cancel=None) -> Dict[str, Any]:
        """Thin the model at the record's per-group ratios, the channels chosen by its importance, then refit the
        consumers on ``calibration`` items when ``reconstruct``
        (:func:`sparsify_tui.engine.channel_prune.thin_and_reconstruct`); returns its report
        (:meth:`~sparsify_tui.engine.channel_prune.ChannelPruneResult.to_dict`: the thinning and
        ``reconstruction``). ``feeds``: the exactness check's inputs; ``real_data``: the calibration items are
        the user's (else synthetic: they never choose channels)."""
        from sparsify_tui.engine.channel_prune import thin_and_reconstruct

        ratios = {g: float(r) for g, r in sparsities.items() if float(r) > 0}
        round_to = int(getattr(settings, "round_to", 0) or 0) or None
        res = thin_and_reconstruct(model_path, out_path, ratios=ratios, round_to=round_to,
                                   importance=getattr(settings, "importance", None) or "auto",
                                   calibration=list(calibration or []), reconstruct_model=bool(reconstruct),
                                   real_data=bool(real_data),
                                   batch_size=batch_size, dims=dims or {}, check_feeds=list(feeds or [])[:4] or None,
                                   engine=engine, progress=progress, cancel=cancel)
        return res.to_dict()



__all__ = ["CHANNEL", "ChannelSettings", "ChannelRow", "ChannelEstimate", "ChannelEstimates", "ChannelPruning"]
