"""Optimization records: build, re-evaluate, override, edit. Pure: typed data in and out, no workspace (the
project's "optimizations" table is read and written by :mod:`sparsify_tui.services.optimizations`, which
reads the stored JSON with :func:`~sparsify_tui.optimization.structures.load_optimization` and writes
:meth:`Optimization.to_dict`).

The record is :class:`~sparsify_tui.optimization.record.Optimization`; it holds everything needed to
re-evaluate and export without the profiles. What depends on the pruning structure (curves, allocation,
estimates, recipe modifiers) is asked of the record's structure (:func:`~sparsify_tui.optimization.structures.
structure_of`).
Every function that changes a record changes it in place and returns it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui.optimization import schedule
from sparsify_tui.optimization.layer_curves import default_int8_excluded, perf_int8_ms, perf_model_ms
from sparsify_tui.optimization.record import (
    APPROXIMATED, DEFAULT_INIT_SPARSITY, FLOPS, Epochs, ModelSummary, NodeTime, Optimization, QuantizationSettings,
    Settings,
)
from sparsify_tui.optimization.structures import get_structure, structure_of

if TYPE_CHECKING:
    from sparsify_tui.analysis.nodes import ModelAnalysis
    from sparsify_tui.profiling.loss import LossProfile
    from sparsify_tui.profiling.perf import PerfProfile

__all__ = ["FLOPS", "APPROXIMATED", "DEFAULT_INIT_SPARSITY", "build_optimization", "evaluate", "layer_sparsities",
           "change_settings", "override", "change_schedule", "change_training"]


def _quant_epochs(ep: Epochs) -> Dict[str, float]:
    """QAT in the second half of fine-tuning: start, observers frozen and BN stats frozen near the end."""
    total, end = ep.total_epochs, ep.pruning_end_epoch
    span = max(0.0, total - end)
    start = round(end + span / 2.0, 1) if span >= 2 else round(end, 1)
    tail = max(0.0, total - start)
    return {"start_epoch": start,
            "disable_quantization_observer_epoch": round(start + tail * 0.5, 1),
            "freeze_bn_stats_epoch": round(start + tail * 0.5, 1)}


def _model_summary(analysis: "ModelAnalysis", perf: Optional["PerfProfile"], model_file: str) -> ModelSummary:
    nodes = perf.nodes if perf is not None else []
    return ModelSummary(
        file=model_file, baseline_ms=perf_model_ms(perf), int8_ms=perf_int8_ms(perf),
        # node times scaled to the unprofiled medians (PerfProfile.node_ms), as every screen shows them
        nodes_total_ms=sum(float(perf.node_ms(n) or 0) for n in nodes) or None if perf is not None else None,
        totals=dict(analysis.totals or {}),
        perf_nodes=[NodeTime(id=n.id, time_ms=perf.node_ms(n), int8_time_ms=perf.node_ms(n, "int8"))
                    for n in nodes if n.int8_time_ms is not None],
        int8_round_ratios=(perf.int8.round_ratios or None) if perf is not None else None,
        noise=(perf.noise or None) if perf is not None else None,
    )


def build_optimization(name: str, analysis: "ModelAnalysis", perf: Optional["PerfProfile"],
                       loss: Optional["LossProfile"], *, training: Optional[Dict[str, Any]] = None,
                       sparsity: float = 0.85, balance: float = 0.5, quantize: bool = False,
                       perf_ref: str = FLOPS, perf_name: str = "FLOPS", loss_ref: str = APPROXIMATED,
                       loss_name: str = "Approximated", settings: Optional[Settings] = None,
                       model_file: str = "", extras: Optional[Dict[str, Any]] = None) -> Optimization:
    """A new, evaluated optimization of the model of ``analysis`` (its typed
    :class:`~sparsify_tui.analysis.nodes.ModelAnalysis`) from a typed perf profile (None = the FLOPS profile: time
    proportional to FLOPs) and a typed loss profile (None = a generic ``s**3`` curve per layer).

    ``settings`` (its ``structure`` picks the pruning structure) gets ``sparsity`` and ``balance``;
    ``training``: the project's training settings (``epochs`` sets the epoch plan, ``init_lr`` / ``final_lr``
    the LR modifiers); ``perf_ref`` / ``loss_ref``: the profiles' record ids (or :data:`FLOPS` /
    :data:`APPROXIMATED`) and display names; ``extras``: what the structure's
    :meth:`~sparsify_tui.optimization.structures.PruningStructure.analysis_extras` read from the model. Raises :class:`ProjectError` when the model has no prunable layer
    or a setting is out of range.
    """
    st = settings or Settings()
    st.sparsity, st.balance = float(sparsity), float(balance)
    try:
        st.validate()
    except ValueError as err:
        raise ProjectError(f"{err}: fix the optimization setting") from None
    kind = get_structure(st.structure)
    layers = kind.build_layers(analysis, perf, loss, st, extras or {})
    if not layers:
        raise ProjectError("the model has no prunable layer (Conv/Gemm/MatMul with a weight initializer): "
                           "nothing to optimize")
    training = dict(training or {})
    ep = Epochs.from_dict({**schedule.default_epochs(float(training.get("epochs") or 100)),
                           "init_sparsity": DEFAULT_INIT_SPARSITY})
    rec = Optimization(
        name=name, perf_profile=perf_ref, perf_profile_name=perf_name, loss_profile=loss_ref,
        loss_profile_name=loss_name, settings=st, overrides={}, layers=layers,
        quantization=QuantizationSettings(enabled=bool(quantize), bits=8, excluded=default_int8_excluded(layers),
                                          **_quant_epochs(ep)),
        epochs=ep, lr_modifiers=schedule.default_lr_modifiers(training, ep.to_dict()), training=training,
        model=_model_summary(analysis, perf, model_file), copied_from=None,
    )
    rec.model.extra.update(kind.summary_extras(analysis, perf, loss, st, extras or {}))
    return evaluate(rec)


def evaluate(rec: Optimization) -> Optimization:
    """Re-run the allocation and estimates of a record in place (overrides of known layers kept; the others
    dropped) and return it. Warnings: the allocation's, and measured INT8 slower than FP32 when quantizing. The
    estimates carry the noise of the measurements they come from (:meth:`Optimization.noise_sources`)."""
    st = type(rec.settings).from_dict(rec.settings.to_dict())  # a copy: allocation validates it
    kind = structure_of(rec)
    known = {l.weight_name for l in rec.layers}
    overrides = {k: float(v) for k, v in rec.overrides.items() if k in known}
    alloc = kind.allocate_record(rec, st, overrides)
    for l, e in zip(rec.layers, kind.estimates_record(rec, alloc.sparsities)):
        l.sparsity = alloc.sparsities[l.weight_name]
        l.override = l.weight_name in overrides
        l.reason = alloc.reasons.get(l.weight_name)
        e.apply_to(l)
    rec.overrides = overrides
    rec.estimates = kind.model_estimates(rec, alloc.sparsities)
    rec.warnings = list(alloc.warnings)
    f = rec.estimates.int8_factor
    if rec.quantization.enabled and rec.quantization.calibration_method != "dynamic" and f and f > 1.0:
        engine, precision = rec.target_runtime
        rec.warnings.append(f"measured INT8 is slower than FP32 on this server ({1 / f:.2f}x) on {engine} "
                            f"{precision}: consider turning quantization off")
    rec.estimates.max_reachable = alloc.max_reachable
    rec.estimates.noise = rec.noise_sources() or None
    return rec


def layer_sparsities(rec: Optimization) -> Dict[str, float]:
    """weight name -> sparsity of every layer with sparsity > 0 (what the recipe prunes and apply uses)."""
    return {l.weight_name: float(l.sparsity) for l in rec.layers if float(l.sparsity or 0) > 0}


def change_settings(rec: Optimization, **fields: Any) -> Optimization:
    """Apply setting changes (names of :class:`Settings`; None values skipped) and re-evaluate.

    ``dense_first_layer`` / ``dense_grouped`` changes also refresh each layer's ``excluded`` reason. Raises
    :class:`ProjectError` on an unknown name, a bad value, or a change of ``structure`` (the rows are built
    for one structure: create a new optimization instead).
    """
    new = fields.get("structure")
    if new is not None and new != rec.settings.structure:
        raise ProjectError(f"the pruning structure of optimization {rec.name!r} is {rec.settings.structure!r}: "
                           f"create a new optimization to use {new!r}")
    st = rec.settings.with_changes(**fields)
    rec.settings = st
    for i, l in enumerate(rec.layers):
        l.excluded = structure_of(rec).excluded_reason(st, i, l)
    return evaluate(rec)


def override(rec: Optimization, weight_name: str, sparsity: Optional[float]) -> Optimization:
    """Fix one layer's sparsity (``weight_name``, or a node id; ``None`` removes the override) and re-evaluate
    the others. Raises :class:`RecordNotFound` for an unknown layer, :class:`ProjectError` outside 0..0.99."""
    layer = rec.layer(weight_name)
    if layer is None:
        what, key = ("channel group", "group id") if rec.settings.structure == "channel" else \
            ("prunable layer", "weight name")
        raise RecordNotFound(f"no {what} {weight_name!r} in optimization {rec.name!r}: use a {key} from the "
                             f"layer table")
    ov = dict(rec.overrides)
    if sparsity is None:
        ov.pop(layer.weight_name, None)
    else:
        s = float(sparsity)
        if not 0.0 <= s <= 0.99 or math.isnan(s):
            raise ProjectError(f"sparsity {s} is out of range: use 0 to 0.99")
        structure_of(rec).check_override(layer, s)
        ov[layer.weight_name] = round(s, 4)
    rec.overrides = ov
    return evaluate(rec)


def change_training(rec: Optimization, training: Dict[str, Any]) -> Optimization:
    """Take the project's training settings again (``optimizer``, ``epochs``, ``init_lr``, ``final_lr``): an
    optimization keeps its own copy from when it was made, so a later change to the project leaves it alone
    until this is called. The epoch plan and the LR modifiers are rebuilt from them as for a new optimization
    (edits to either are replaced; ``init_sparsity`` is kept), and QAT moves with the epochs."""
    rec.training = dict(training or {})
    ep = Epochs.from_dict({**schedule.default_epochs(float(rec.training.get("epochs") or 100)),
                           "init_sparsity": rec.epochs.init_sparsity})
    rec.epochs = ep
    rec.lr_modifiers = schedule.default_lr_modifiers(rec.training, ep.to_dict())
    for k, v in _quant_epochs(ep).items():
        setattr(rec.quantization, k, v)
    return evaluate(rec)


def changed_epochs(rec: Optimization, epochs: Dict[str, Any]) -> Dict[str, Any]:
    """``rec``'s epoch plan (as a dict) with ``epochs`` changed (None values skipped), checked: raises
    :class:`ProjectError` (one line, the rule) unless 0 <= pruning start < pruning end <= total epochs, 0 < update
    frequency <= the pruning epochs and 0 <= init_sparsity < 1. ``rec`` is not changed (a form checks a value with
    it before storing it)."""
    ep = rec.epochs.to_dict()
    try:
        ep.update({k: float(v) for k, v in epochs.items() if v is not None})
    except (TypeError, ValueError):
        raise ProjectError(f"epochs must be numbers, got {epochs}") from None
    if not (0 <= ep["pruning_start_epoch"] < ep["pruning_end_epoch"] <= ep["total_epochs"]):
        raise ProjectError(f"epochs must satisfy 0 <= pruning start < pruning end <= total epochs "
                           f"({ep['total_epochs']:g})")
    if not 0 < ep["update_frequency"] <= ep["pruning_end_epoch"] - ep["pruning_start_epoch"]:
        raise ProjectError("update frequency must be > 0 and at most the pruning epochs")
    if not 0 <= ep["init_sparsity"] < 1:
        raise ProjectError("init_sparsity must be in [0, 1)")
    return ep


def change_schedule(rec: Optimization, *, epochs: Optional[Dict[str, Any]] = None,
                    lr_modifiers: Optional[List[Dict[str, Any]]] = None,
                    quantization: Optional[Dict[str, Any]] = None) -> Optimization:
    """Edit the epoch plan (``pruning_start_epoch``, ``pruning_end_epoch``, ``total_epochs``,
    ``update_frequency``, ``init_sparsity``), the LR modifiers (replaced as a list, shapes of
    :func:`schedule.validate_lr_modifier`) or the quantization modifier (``enabled``, ``excluded``, epochs).
    Without quantization epochs, an epoch change moves QAT to the second half of fine-tuning. Raises
    :class:`ProjectError` on inconsistent values."""
    if epochs:
        ep = changed_epochs(rec, epochs)
        ep["stabilization_epochs"] = ep["pruning_start_epoch"]
        ep["pruning_epochs"] = round(ep["pruning_end_epoch"] - ep["pruning_start_epoch"], 3)
        ep["fine_tune_epochs"] = round(ep["total_epochs"] - ep["pruning_end_epoch"], 3)
        rec.epochs = Epochs.from_dict(ep)
        if not quantization or "start_epoch" not in quantization:
            for k, v in _quant_epochs(rec.epochs).items():
                setattr(rec.quantization, k, v)
    if lr_modifiers is not None:
        try:
            rec.lr_modifiers = [schedule.validate_lr_modifier(m) for m in lr_modifiers]
        except (ValueError, KeyError, TypeError) as err:
            raise ProjectError(f"bad learning-rate modifier: {err}") from None
    if quantization:
        q = rec.quantization
        for k, v in quantization.items():
            if k == "enabled":
                q.enabled = bool(v)
            elif k == "excluded":
                ids = {l.node_id for l in rec.layers}
                if q.search is not None:  # the search's groups also hold the nodes feeding each layer
                    ids |= {n for g in q.search.groups for n in g.nodes}
                q.excluded = [str(x) for x in v if str(x) in ids]
            elif k in ("start_epoch", "disable_quantization_observer_epoch", "freeze_bn_stats_epoch"):
                setattr(q, k, float(v))
    return evaluate(rec)
