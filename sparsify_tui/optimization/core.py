"""Optimization records: create, re-evaluate, override, edit, copy. Stored in the project's "optimizations" table.

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

import copy
import math
from typing import Any, Dict, List, Optional

from sparsify_tui.errors import ProjectError, RecordNotFound
from sparsify_tui.optimization import schedule
from sparsify_tui.optimization.allocation import allocate
from sparsify_tui.optimization.config import (
    Settings, build_layers, default_int8_excluded, perf_int8_ms, perf_model_ms,
)
from sparsify_tui.optimization.estimates import layer_estimates, model_estimates

TABLE = "optimizations"
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


# ---------------------------------------------------------------------------------------------- workspace


def _resolve_perf(ws, project_id: str, ref: Optional[str]):
    if ref is not None and str(ref).lower() == FLOPS:
        return None, FLOPS, "FLOPS"
    records = ws.list_records(project_id, "perf_profiles")
    if ref is None:
        records = [r for r in records if r.get("status", "completed") == "completed"]
        if not records:
            return None, FLOPS, "FLOPS"
        rec = sorted(records, key=lambda r: r.get("created", ""))[-1]
    else:
        rec = ws.find_record(project_id, "perf_profiles", ref)
    from sparsify_tui.profiling.perf import load_perf_profile

    prof = load_perf_profile(ws, project_id, rec["id"])
    return (prof.to_dict() if hasattr(prof, "to_dict") else prof), rec["id"], rec.get("name", rec["id"])


def _resolve_loss(ws, project_id: str, ref: Optional[str], analysis: Dict[str, Any]):
    if ref is None or str(ref).lower() == APPROXIMATED:
        records = ws.list_records(project_id, "loss_profiles") if ref is None else []
        records = [r for r in records if r.get("status", "completed") == "completed"]
        if not records:
            return approximated_loss(analysis), APPROXIMATED, "Approximated"
        rec = sorted(records, key=lambda r: r.get("created", ""))[-1]
    else:
        rec = ws.find_record(project_id, "loss_profiles", ref)
    from sparsify_tui.profiling.loss import load_loss_profile

    prof = load_loss_profile(ws, project_id, rec["id"])
    return (prof.to_dict() if hasattr(prof, "to_dict") else prof), rec["id"], rec.get("name", rec["id"])


def approximated_loss(analysis: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The Approximated loss profile dict, from ``profiling.loss.approximated_profile`` (None if unavailable,
    which makes every layer use a generic ``s**3`` curve)."""
    try:
        from sparsify_tui.profiling.loss import approximated_profile
    except ImportError:
        return None
    try:
        from sparsify_tui.analysis.nodes import ModelAnalysis

        arg: Any = ModelAnalysis.from_dict(analysis)
    except Exception:
        arg = analysis
    try:
        prof = approximated_profile(arg)
    except Exception:
        try:
            prof = approximated_profile(analysis)
        except Exception:
            return None
    return prof.to_dict() if hasattr(prof, "to_dict") else prof


def create_optimization(ws, project_id: str, name: str, perf: Optional[str] = None, loss: Optional[str] = None,
                        sparsity: float = 0.85, balance: float = 0.5, quantize: bool = False, *,
                        settings: Optional[Dict[str, Any]] = None,
                        overrides: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
    """Create, evaluate and store an optimization for a project; returns the stored record (with ``id``).

    ``settings``: extra :class:`Settings` fields (e.g. ``min_sparsity``); ``overrides``: weight name ->
    sparsity fixed from the start. Nothing is stored when any of them is invalid.

    ``perf``: perf profile id or name, ``"flops"`` for the FLOPS profile, None = the newest completed perf
    profile, else FLOPS. ``loss``: loss profile id or name, ``"approximated"``, None = the newest
    completed loss profile, else Approximated. Raises :class:`ProjectError` for a taken name or bad
    setting, :class:`RecordNotFound` for an unknown profile.
    """
    project = ws.get_project(project_id)
    pid = project["id"]
    name = (name or "").strip()
    if not name:
        raise ProjectError("an optimization needs a name: pass --name NAME")
    if any(r.get("name") == name for r in ws.list_records(pid, TABLE)):
        raise ProjectError(f"optimization {name!r} already exists in project {project['name']!r}: "
                           f"choose another name or copy it")
    analysis = ws.analysis_of(pid)
    perf_d, perf_ref, perf_name = _resolve_perf(ws, pid, perf)
    loss_d, loss_ref, loss_name = _resolve_loss(ws, pid, loss, analysis)
    rec = build_optimization(name, analysis, perf_d, loss_d, training=project.get("training"),
                             sparsity=sparsity, balance=balance, quantize=quantize, perf_ref=perf_ref,
                             perf_name=perf_name, loss_ref=loss_ref, loss_name=loss_name,
                             model_file=(project.get("model") or {}).get("file", ""))
    if settings:
        rec = change_settings(rec, **settings)
    for w, s in (overrides or {}).items():
        rec = override(rec, w, s)
    return ws.add_record(pid, TABLE, rec)


def get_optimization(ws, project_id: str, ref: str) -> Dict[str, Any]:
    """The stored optimization by id or name (RecordNotFound otherwise)."""
    return ws.find_record(project_id, TABLE, ref)


def _save(ws, project_id: str, rec: Dict[str, Any]) -> Dict[str, Any]:
    fields = {k: v for k, v in rec.items() if k not in ("id", "created", "modified")}
    return ws.update_record(project_id, TABLE, rec["id"], **fields)


def reevaluate(ws, project_id: str, ref: str, **settings: Any) -> Dict[str, Any]:
    """Change settings (see :class:`Settings`) of a stored optimization, re-evaluate (overrides kept), save."""
    rec = get_optimization(ws, project_id, ref)
    return _save(ws, project_id, change_settings(rec, **settings))


def set_override(ws, project_id: str, ref: str, weight_name: str, sparsity: Optional[float]) -> Dict[str, Any]:
    """Fix (or with None, release) one layer's sparsity of a stored optimization; re-evaluate and save."""
    rec = get_optimization(ws, project_id, ref)
    return _save(ws, project_id, override(rec, weight_name, sparsity))


def update_schedule(ws, project_id: str, ref: str, **changes: Any) -> Dict[str, Any]:
    """:func:`change_schedule` on a stored optimization, then save."""
    rec = get_optimization(ws, project_id, ref)
    return _save(ws, project_id, change_schedule(rec, **changes))


def copy_optimization(ws, project_id: str, ref: str, new_name: Optional[str] = None) -> Dict[str, Any]:
    """A new version of an optimization (same settings, overrides and schedules) named ``new_name`` (default
    ``"<name> v2"``, ``v3``... the first free one). Returns the stored copy."""
    rec = get_optimization(ws, project_id, ref)
    names = {r.get("name") for r in ws.list_records(project_id, TABLE)}
    if new_name:
        if new_name in names:
            raise ProjectError(f"optimization {new_name!r} already exists: choose another name")
    else:
        base = rec["name"].rsplit(" v", 1)[0] if rec["name"].rsplit(" v", 1)[-1].isdigit() else rec["name"]
        k = 2
        while f"{base} v{k}" in names:
            k += 1
        new_name = f"{base} v{k}"
    new = copy.deepcopy({k: v for k, v in rec.items() if k not in ("id", "created", "modified")})
    new["name"] = new_name
    new["copied_from"] = rec["id"]
    return ws.add_record(project_id, TABLE, new)


def delete_optimization(ws, project_id: str, ref: str) -> None:
    """Delete a stored optimization."""
    rec = get_optimization(ws, project_id, ref)
    ws.delete_record(project_id, TABLE, rec["id"])
