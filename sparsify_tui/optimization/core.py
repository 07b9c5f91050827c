"""Optimization records as plain data: build, re-evaluate, override, edit (pure: no workspace; the project's
"optimizations" table is read and written by :mod:`sparsify_tui.services.optimizations`).

A record (plain JSON) holds everything needed to re-evaluate and export without the profiles:

``{"name", "perf_profile": record id | "flops", "perf_profile_name", "loss_profile": record id |
"approximated", "loss_profile_name", "settings": Settings.to_dict(), "overrides": {weight_name: s},
"layers": [{"weight_name", "node_id", "op_type", "params", "flops", "sparsity", "override", "reason",
"est_ms", "est_speedup", "baseline_ms", "recoverability", "loss_sensitivity", "perf_sensitivity",
"time_curve", "loss_curve", "gain_curve", "int8_sensitivity", "int8_time_ms", "excluded"}],
"quantization": {"enabled", "bits": 8, "excluded": [node ids], "start_epoch",
"disable_quantization_observer_epoch", "freeze_bn_stats_epoch"}, "epochs": schedule.default_epochs(..) +
"init_sparsity", "lr_modifiers": [...], "training": the project's training settings, "model": {"file",
"baseline_ms", "int8_ms", "totals"}, "estimates": estimates.model_estimates(..), "warnings": [...],
"copied_from": id | None}``
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui.optimization import schedule
from sparsify_tui.optimization.allocation import allocate
from sparsify_tui.optimization.config import (
    Settings, build_layers, default_int8_excluded, perf_int8_ms, perf_model_ms,
)
from sparsify_tui.optimization.estimates import layer_estimates, model_estimates

FLOPS = "flops"
APPROXIMATED = "approximated"
DEFAULT_INIT_SPARSITY = 0.05


def _quant_epochs(ep: Dict[str, float]) -> Dict[str, float]:
    """QAT in the second half of fine-tuning: start, observers frozen and BN stats frozen near the end."""
    total, end = ep["total_epochs"], ep["pruning_end_epoch"]
    span = max(0.0, total - end)
    start = round(end + span / 2.0, 1) if span >= 2 else round(end, 1)
    tail = max(0.0, total - start)
    return {"start_epoch": start,
            "disable_quantization_observer_epoch": round(start + tail * 0.5, 1),
            "freeze_bn_stats_epoch": round(start + tail * 0.5, 1)}


def build_optimization(name: str, analysis: Dict[str, Any], perf: Optional[Dict[str, Any]],
                       loss: Optional[Dict[str, Any]], *, training: Optional[Dict[str, Any]] = None,
                       sparsity: float = 0.85, balance: float = 0.5, quantize: bool = False,
                       perf_ref: str = FLOPS, perf_name: str = "FLOPS", loss_ref: str = APPROXIMATED,
                       loss_name: str = "Approximated", settings: Optional[Settings] = None,
                       model_file: str = "") -> Dict[str, Any]:
    """A new, evaluated optimization record from plain dicts (no workspace). ``perf=None`` = FLOPS profile.

    Raises :class:`ProjectError` when the model has no prunable layer or a setting is out of range.
    """
    st = settings or Settings()
    st.sparsity, st.balance = float(sparsity), float(balance)
    try:
        st.validate()
    except ValueError as err:
        raise ProjectError(f"{err}: fix the optimization setting") from None
    layers = build_layers(analysis, perf, loss, st)
    if not layers:
        raise ProjectError("the model has no prunable layer (Conv/Gemm/MatMul with a weight initializer): "
                           "nothing to optimize")
    training = dict(training or {})
    ep = schedule.default_epochs(float(training.get("epochs") or 100))
    ep["init_sparsity"] = DEFAULT_INIT_SPARSITY
    rec: Dict[str, Any] = {
        "name": name, "perf_profile": perf_ref, "perf_profile_name": perf_name,
        "loss_profile": loss_ref, "loss_profile_name": loss_name,
        "settings": st.to_dict(), "overrides": {}, "layers": layers,
        "quantization": {"enabled": bool(quantize), "bits": 8, "excluded": default_int8_excluded(layers),
                         **_quant_epochs(ep)},
        "epochs": ep, "lr_modifiers": schedule.default_lr_modifiers(training, ep), "training": training,
        "model": {"file": model_file, "baseline_ms": perf_model_ms(perf), "int8_ms": perf_int8_ms(perf),
                  "nodes_total_ms": sum(float(n.get("time_ms") or 0) for n in (perf or {}).get("nodes", [])) or None,
                  "totals": dict(analysis.get("totals") or {}),
                  "perf_nodes": [{"id": n.get("id"), "time_ms": n.get("time_ms"),
                                  "int8_time_ms": n.get("int8_time_ms")}
                                 for n in (perf or {}).get("nodes", []) if n.get("int8_time_ms") is not None]},
        "copied_from": None,
    }
    return evaluate(rec)


def evaluate(rec: Dict[str, Any]) -> Dict[str, Any]:
    """Re-run the allocation and estimates of a record in place (overrides kept) and return it."""
    st = Settings.from_dict(rec.get("settings"))
    overrides = {k: float(v) for k, v in (rec.get("overrides") or {}).items()}
    layers = rec["layers"]
    known = {l["weight_name"] for l in layers}
    overrides = {k: v for k, v in overrides.items() if k in known}
    alloc = allocate(layers, st, overrides)
    per = layer_estimates(layers, alloc.sparsities)
    for l, e in zip(layers, per):
        l["sparsity"] = alloc.sparsities[l["weight_name"]]
        l["override"] = l["weight_name"] in overrides
        l["reason"] = alloc.reasons.get(l["weight_name"])
        l.update(e)
    q = rec["quantization"]
    m = rec["model"]
    rec["overrides"] = overrides
    rec["estimates"] = model_estimates(
        layers, alloc.sparsities, totals=m.get("totals") or {}, baseline_ms=m.get("baseline_ms"),
        int8_ms=m.get("int8_ms"), quantize=bool(q.get("enabled")), excluded=list(q.get("excluded") or []),
        perf_nodes=m.get("perf_nodes"), flops_profile=rec.get("perf_profile") == FLOPS,
        nodes_total_ms=m.get("nodes_total_ms"))
    rec["warnings"] = list(alloc.warnings)
    f = rec["estimates"].get("int8_factor")
    if q.get("enabled") and f and f > 1.0:
        rec["warnings"].append(f"measured INT8 is slower than FP32 on this server ({1 / f:.2f}x): "
                               f"consider turning quantization off for onnxruntime")
    rec["estimates"]["max_reachable"] = alloc.max_reachable
    return rec


def layer_sparsities(opt_record: Dict[str, Any]) -> Dict[str, float]:
    """weight name -> sparsity of every layer with sparsity > 0 (what the recipe prunes and apply uses)."""
    return {l["weight_name"]: float(l["sparsity"]) for l in opt_record.get("layers", [])
            if float(l.get("sparsity") or 0) > 0}


def change_settings(rec: Dict[str, Any], **fields: Any) -> Dict[str, Any]:
    """Apply setting changes (names of :class:`Settings`) and re-evaluate; raises ProjectError on bad values.

    ``dense_first_layer`` / ``dense_grouped`` changes also refresh each layer's ``excluded`` reason.
    """
    st = Settings.from_dict(rec.get("settings"))
    for k, v in fields.items():
        if v is None:
            continue
        if k not in Settings.__dataclass_fields__:
            raise ProjectError(f"unknown optimization setting {k!r}: use one of "
                               f"{', '.join(Settings.__dataclass_fields__)}")
        setattr(st, k, type(getattr(st, k))(v))
    try:
        st.validate()
    except ValueError as err:
        raise ProjectError(f"{err}: fix the optimization setting") from None
    rec["settings"] = st.to_dict()
    for i, l in enumerate(rec["layers"]):
        ex = None
        if st.dense_first_layer and i == 0:
            ex = "first layer"
        elif st.dense_grouped and int(l.get("group") or 1) > 1 and l.get("op_type") == "Conv":
            ex = "depthwise/grouped conv"
        l["excluded"] = ex
    return evaluate(rec)


def override(rec: Dict[str, Any], weight_name: str, sparsity: Optional[float]) -> Dict[str, Any]:
    """Fix one layer's sparsity (``None`` removes the override) and re-evaluate the others."""
    names = {l["weight_name"]: l for l in rec["layers"]}
    layer = names.get(weight_name) or next((l for l in rec["layers"] if l["node_id"] == weight_name), None)
    if layer is None:
        raise RecordNotFound(f"no prunable layer {weight_name!r} in optimization {rec.get('name')!r}: "
                             f"use a weight name from the layer table")
    ov = dict(rec.get("overrides") or {})
    if sparsity is None:
        ov.pop(layer["weight_name"], None)
    else:
        s = float(sparsity)
        if not 0.0 <= s <= 0.99 or math.isnan(s):
            raise ProjectError(f"sparsity {s} is out of range: use 0 to 0.99")
        ov[layer["weight_name"]] = round(s, 4)
    rec["overrides"] = ov
    return evaluate(rec)


def change_schedule(rec: Dict[str, Any], *, epochs: Optional[Dict[str, Any]] = None,
                    lr_modifiers: Optional[List[Dict[str, Any]]] = None,
                    quantization: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Edit the epoch plan (``pruning_start_epoch``, ``pruning_end_epoch``, ``total_epochs``,
    ``update_frequency``, ``init_sparsity``), the LR modifiers (replaced as a list) or the quantization
    modifier (``enabled``, ``excluded``, epochs). Raises ProjectError on inconsistent values."""
    if epochs:
        ep = dict(rec["epochs"])
        ep.update({k: float(v) for k, v in epochs.items() if v is not None})
        if not (0 <= ep["pruning_start_epoch"] < ep["pruning_end_epoch"] <= ep["total_epochs"]):
            raise ProjectError("epochs must satisfy 0 <= pruning start < pruning end <= total epochs")
        if not 0 < ep["update_frequency"] <= ep["pruning_end_epoch"] - ep["pruning_start_epoch"]:
            raise ProjectError("update frequency must be > 0 and at most the pruning epochs")
        if not 0 <= ep["init_sparsity"] < 1:
            raise ProjectError("init_sparsity must be in [0, 1)")
        ep["stabilization_epochs"] = ep["pruning_start_epoch"]
        ep["pruning_epochs"] = round(ep["pruning_end_epoch"] - ep["pruning_start_epoch"], 3)
        ep["fine_tune_epochs"] = round(ep["total_epochs"] - ep["pruning_end_epoch"], 3)
        rec["epochs"] = ep
        q = rec["quantization"]
        if not quantization or "start_epoch" not in quantization:
            q.update(_quant_epochs(ep))
    if lr_modifiers is not None:
        try:
            rec["lr_modifiers"] = [schedule.validate_lr_modifier(m) for m in lr_modifiers]
        except (ValueError, KeyError, TypeError) as err:
            raise ProjectError(f"bad learning-rate modifier: {err}") from None
    if quantization:
        q = rec["quantization"]
        for k, v in quantization.items():
            if k == "enabled":
                q[k] = bool(v)
            elif k == "excluded":
                ids = {l["node_id"] for l in rec["layers"]}
                q[k] = [str(x) for x in v if str(x) in ids]
            elif k in ("start_epoch", "disable_quantization_observer_epoch", "freeze_bn_stats_epoch"):
                q[k] = float(v)
    return evaluate(rec)
