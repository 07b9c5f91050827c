"""Perf and loss profiles in a project: stored as a small record (the list columns) plus a JSON data file
with the whole typed profile, written before the record; loaded back as the typed profile.

Tables: ``perf_profiles`` and ``loss_profiles``; data files ``<table>/<record id>.json``
(:meth:`sparsify_tui.store.Workspace.record_blob_key`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

PERF_TABLE = "perf_profiles"
LOSS_TABLE = "loss_profiles"
FLOPS = "flops"
APPROXIMATED = "approximated"


# ----------------------------------------------------------------------------------------- perf profiles
def perf_record(prof) -> Dict[str, Any]:
    """The small record fields of a :class:`~sparsify_tui.profiling.perf.PerfProfile` (the list columns)."""
    i8 = prof.int8
    return {
        "name": prof.name,
        "engine": prof.engine,
        "precision": prof.precision,
        "batch_size": prof.batch_size,
        "core_count": prof.core_count,
        "latency_ms": prof.latency_ms.median,
        "p90_ms": prof.latency_ms.p90,
        "items_per_second": prof.items_per_second,
        "int8_ms": prof.int8_ms if i8.ok else None,  # on the FP32 median's clock: the one INT8 ratio
        "int8_error": i8.error,
        "warmup": prof.warmup,
        "iterations": prof.iterations,
        "dims": prof.dims,
        "int8_enabled": bool(i8.enabled),
        "data": prof.inputs.path,
        "status": prof.status,
    }


def store_perf_profile(ws, project_id: str, prof, *, job_id: Optional[str] = None,
                       record_id: Optional[str] = None, target: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Store a perf profile (a new record, or replacing record ``record_id`` for a rerun); returns the record
    fields with ``record_id``. ``target``: the fleet target it ran on (``{"label", "node_id", "hostname", "cpu_model",
    ...}``), kept on the record and in its data file; None for this machine (a rerun here drops an old tag)."""
    fields = {**perf_record(prof), "job_id": job_id, "target": target}
    blob = {**prof.to_dict(), **({"target": target} if target else {})}
    if record_id:
        fields["channel_calibration"] = None  # a rerun drops the calibration of the old measurements
        ws.replace_record_blob(project_id, PERF_TABLE, record_id, blob, **fields)
    else:
        record_id = ws.add_record_with_blob(project_id, PERF_TABLE, fields, blob)["id"]
    return {"record_id": record_id, **fields}


def load_perf_profile(ws, project_id: str, ref: str):
    """The stored :class:`~sparsify_tui.profiling.perf.PerfProfile` of record ``ref`` (id or name).
    Raises ``RecordNotFound``."""
    from sparsify_tui.profiling.perf import PerfProfile

    rec = ws.find_record(project_id, PERF_TABLE, ref)
    return PerfProfile.from_dict(ws.read_record_blob(project_id, PERF_TABLE, rec["id"]))


def _newest_readable(ws, project_id: str, table: str, load, skipped: Optional[list], keep=None):
    """``(record, profile)`` of the newest completed record of ``table`` whose data file loads, or None. A record
    whose data file is missing or damaged (a run killed before it was written, a file deleted by hand) is
    skipped, and reported in ``skipped`` (one line each), instead of failing the whole command. ``keep``: an
    optional filter on the records."""
    from sparsify_tui.errors import ProjectError

    records = [r for r in ws.list_records(project_id, table) if r.get("status", "completed") == "completed"
               and (keep is None or keep(r))]
    for rec in sorted(records, key=lambda r: r.get("created", ""), reverse=True):
        try:
            return rec, load(ws, project_id, rec["id"])
        except ProjectError as err:  # RecordNotFound (no data file) or a corrupt one
            if skipped is not None:
                kind = "perf profile" if table == PERF_TABLE else "loss profile"
                skipped.append(f"{kind} {rec.get('name', '')!r} ({rec['id']}) was skipped: {err}")
    return None


def is_calibrated(record: Dict[str, Any]) -> bool:
    """The perf profile record has a channel calibration stored with it (:func:`store_channel_calibration`)."""
    return bool(record.get("channel_calibration"))


def resolve_perf_profile(ws, project_id: str, ref: Optional[str], skipped: Optional[list] = None, *,
                         prefer_calibrated: bool = False):
    """``(profile or None, record id or "flops", display name)`` for an optimization's perf profile: ``ref`` an
    id or name, ``"flops"`` for the FLOPS profile, None = the newest completed perf profile whose data loads
    (records without data are skipped and reported in ``skipped``), else FLOPS. ``prefer_calibrated`` (a channel
    optimization): with ``ref`` None, the newest one with a channel calibration first."""
    if ref is not None and str(ref).lower() == FLOPS:
        return None, FLOPS, "FLOPS"
    if ref is None:
        found = _newest_readable(ws, project_id, PERF_TABLE, load_perf_profile, skipped,
                                 keep=is_calibrated) if prefer_calibrated else None
        found = found or _newest_readable(ws, project_id, PERF_TABLE, load_perf_profile, skipped)
        if found is None:
            return None, FLOPS, "FLOPS"
        rec, prof = found
        return prof, rec["id"], rec.get("name", rec["id"])
    rec = ws.find_record(project_id, PERF_TABLE, ref)
    return load_perf_profile(ws, project_id, rec["id"]), rec["id"], rec.get("name", rec["id"])


def perf_profile_extras(ws, project_id: str, ref: Optional[str]) -> Dict[str, Any]:
    """What is stored with perf profile ``ref`` besides the profile itself (``{"channel_calibration": ...}``);
    ``{}`` for the FLOPS profile or a profile without extras."""
    if not ref or str(ref).lower() == FLOPS:
        return {}
    rec = ws.find_record(project_id, PERF_TABLE, ref)
    blob = ws.read_record_blob(project_id, PERF_TABLE, rec["id"]) or {}
    return {k: v for k, v in blob.items() if k not in ("profile", "nodes")}


def store_channel_calibration(ws, project_id: str, ref: str, calibration: Dict[str, Any]) -> Dict[str, Any]:
    """Store a channel calibration (:meth:`~sparsify_tui.profiling.channel_calibration.ChannelCalibration.to_dict`)
    with perf profile ``ref``: in its data file (key ``channel_calibration``, replaced by a rerun of the profile)
    and a summary on its record (``channel_calibration``: ratios, seconds, created). Returns the record."""
    rec = ws.find_record(project_id, PERF_TABLE, ref)
    blob = dict(ws.read_record_blob(project_id, PERF_TABLE, rec["id"]) or {})
    blob["channel_calibration"] = calibration
    summary = {k: calibration.get(k) for k in ("ratios", "seconds", "created", "round_to", "fit_rel_error",
                                                "load_average", "warnings")}
    return ws.replace_record_blob(project_id, PERF_TABLE, rec["id"], blob, channel_calibration=summary)


# ----------------------------------------------------------------------------------------- loss profiles
def loss_record(prof) -> Dict[str, Any]:
    """The small record fields of a :class:`~sparsify_tui.profiling.loss.LossProfile`."""
    p = prof.to_dict()["profile"]
    return {
        "name": prof.name,
        "method": prof.method,
        "metric": prof.metric,
        "settings": p["settings"],
        "layer_count": p["layer_count"],
        "average_sensitivity": p["average_sensitivity"],
        "est_params_reduction": p["est_params_reduction"],
        "est_recovery": p["est_recovery"],
        "seconds": p["seconds"],
    }


def store_loss_profile(ws, project_id: str, prof, job_id: Optional[str] = None,
                       record_id: Optional[str] = None) -> Dict[str, Any]:
    """Store a loss profile (data file, then record), as a new record or replacing record ``record_id`` (a
    rerun); returns ``{"record_id", "name", "method", "seconds"}``."""
    fields = {**loss_record(prof), "job_id": job_id}
    if record_id:
        ws.replace_record_blob(project_id, LOSS_TABLE, record_id, prof.to_dict(), **fields)
    else:
        record_id = ws.add_record_with_blob(project_id, LOSS_TABLE, fields, prof.to_dict())["id"]
    return {"record_id": record_id, "name": prof.name, "method": prof.method, "seconds": prof.seconds}


def approximated_loss_profile(ws, project_id: str):
    """The Approximated loss profile, built from the project's stored analysis (no run)."""
    from sparsify_tui.profiling.loss import approximated_profile
    from sparsify_tui.services.projects import model_analysis

    return approximated_profile(model_analysis(ws, project_id))


def load_loss_profile(ws, project_id: str, ref: str):
    """The stored :class:`~sparsify_tui.profiling.loss.LossProfile` ``ref`` (record id or name);
    ``"approximated"`` (any case) builds the Approximated profile. Raises ``RecordNotFound``."""
    from sparsify_tui.profiling.loss import LossProfile

    if str(ref).lower() == APPROXIMATED:
        return approximated_loss_profile(ws, project_id)
    rec = ws.find_record(project_id, LOSS_TABLE, ref)
    prof = LossProfile.from_dict(ws.read_record_blob(project_id, LOSS_TABLE, rec["id"]))
    prof.extras.setdefault("record_id", rec["id"])
    # one definition of params: the project's analysis (profiles stored before counted every initializer)
    params = ((ws.analysis_of(project_id) or {}).get("totals") or {}).get("params")
    if params:
        prof.total_params = int(params)
    return prof


def loss_structure(record: Dict[str, Any]) -> str:
    """The structure a stored loss profile record measured: ``"channel"`` (rows are channel groups) or
    ``"unstructured"`` (rows are layers; every profile made before channel profiles existed)."""
    return str((record.get("settings") or {}).get("structure") or "unstructured")


def check_loss_structure(ws, project_id: str, ref: Optional[str], structure: str) -> None:
    """Refuse (:class:`ProjectError`, one line) an optimization of ``structure`` on the stored loss profile ``ref``
    (id or name) when that profile measured another structure: an unstructured optimization reads per-weight
    sensitivities, a channel one reads channel groups. None and ``"approximated"`` pass."""
    if ref is None or str(ref).lower() == APPROXIMATED:
        return
    rec = ws.find_record(project_id, LOSS_TABLE, ref)
    measured = loss_structure(rec)
    if measured != structure:
        from sparsify_tui.errors import ProjectError

        raise ProjectError(f"loss profile {rec.get('name', rec['id'])!r} measured {measured} pruning, but a "
                           f"{structure} optimization reads {structure} sensitivities: give --loss a {structure} loss "
                           f"profile (sparsify-tui profile loss PROJECT --structure {structure}), or --loss "
                           "approximated")


def loss_profile_structure(ws, project_id: str, ref: str) -> str:
    """:func:`loss_structure` of the stored loss profile ``ref`` (id or name); ``""`` when there is none."""
    from sparsify_tui.errors import RecordNotFound

    try:
        return loss_structure(ws.find_record(project_id, LOSS_TABLE, ref))
    except RecordNotFound:
        return ""


def resolve_loss_profile(ws, project_id: str, ref: Optional[str], skipped: Optional[list] = None,
                         structure: str = "unstructured", *, require: bool = False):
    """``(profile, record id or "approximated", display name)`` for an optimization's loss profile: ``ref`` an
    id or name, ``"approximated"``, None = the newest completed loss profile of ``structure``
    (:func:`loss_structure`) whose data loads (records without data are skipped and reported in ``skipped``),
    else Approximated. ``require``: a profile named by ``ref`` must have measured ``structure`` (an optimization
    reads the sensitivities of its own structure: per-weight rows for unstructured, channel groups for channel);
    :class:`ProjectError` (one line) otherwise."""
    if ref is None:
        found = _newest_readable(ws, project_id, LOSS_TABLE, load_loss_profile, skipped,
                                 keep=lambda r: loss_structure(r) == structure)
        if found is not None:
            rec, prof = found
            return prof, rec["id"], rec.get("name", rec["id"])
    if ref is None or str(ref).lower() == APPROXIMATED:
        return approximated_loss_profile(ws, project_id), APPROXIMATED, "Approximated"
    rec = ws.find_record(project_id, LOSS_TABLE, ref)
    if require:
        check_loss_structure(ws, project_id, rec["id"], structure)
    return load_loss_profile(ws, project_id, rec["id"]), rec["id"], rec.get("name", rec["id"])
