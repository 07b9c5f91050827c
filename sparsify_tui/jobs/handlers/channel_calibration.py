"""Job ``channel_calibration``: measure the channel time model of the project's model and store it with a perf
profile (:mod:`sparsify_tui.profiling.channel_calibration`)."""

from __future__ import annotations

from typing import Any, Dict


def calibration_settings(ws, project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments: ``perf`` (the perf profile record id: ``args["perf"]`` id or name, default the newest
    completed one), ``ratios`` (list or ``"0.25,0.5"``), and the perf profile's ``batch_size``, ``core_count``
    (capped at the cores available now), ``dims``, ``warmup``, ``iterations``, ``data``. Raises
    ``SparsifyError`` / ``RecordNotFound`` (one line)."""
    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.profiling.channel_calibration import DEFAULT_RATIOS
    from sparsify_tui.services.profiles import FLOPS, resolve_perf_profile

    ref = args.get("perf")
    if ref is not None and str(ref).lower() == FLOPS:
        raise SparsifyError("a channel calibration is stored with a measured perf profile, not FLOPS: "
                            "give --perf NAME or run sparsify-tui profile perf first")
    prof, rec_id, name = resolve_perf_profile(ws, project["id"], ref)
    if prof is None:
        raise SparsifyError(f"project {project['name']!r} has no perf profile: run sparsify-tui profile perf "
                            f"{project['name']!r} first (the calibration is stored with it)")
    ratios = args.get("ratios") or list(DEFAULT_RATIOS)
    if isinstance(ratios, str):
        try:
            ratios = [float(x) for x in ratios.replace(" ", "").split(",") if x]
        except ValueError:
            raise SparsifyError(f"--ratios {ratios!r} is not allowed: --ratios must be numbers, e.g. 0.25,0.5") from None
    if not ratios or any(not 0 < float(r) < 1 for r in ratios):
        raise SparsifyError(f"--ratios {ratios} is not allowed: --ratios must be fractions of channels in (0, 1), "
                           "e.g. 0.25,0.5")
    return {
        "perf": rec_id, "perf_name": name, "ratios": sorted(float(r) for r in ratios),
        "batch_size": settings.batch_size(prof.batch_size or 1),
        "core_count": settings.core_count(min(int(prof.core_count or settings.available_cores()),
                                              settings.available_cores())),
        "dims": dict(prof.dims or {}), "warmup": settings.warmup(prof.warmup),
        "iterations": settings.iterations(prof.iterations), "data": (prof.inputs or {}).get("path"),
    }


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`calibration_settings`)."""
    calibration_settings(ws, project, args)


def run(ctx) -> Dict[str, Any]:
    """Args: ``{perf: id or name (default newest), ratios}``. Stores the calibration with the perf profile;
    returns ``{"record_id": perf profile id, "name", "seconds", "ratios"}``."""
    from sparsify_tui.profiling.channel_calibration import calibrate_channels
    from sparsify_tui.services.profiles import store_channel_calibration

    ws, pid = ctx.ws, ctx.project_id
    s = calibration_settings(ws, ws.get_project(pid), dict(ctx.args or {}))
    cal = calibrate_channels(ws.model_path(pid), ratios=s["ratios"], batch_size=s["batch_size"],
                             core_count=s["core_count"], dims=s["dims"], data=s["data"], warmup=s["warmup"],
                             iterations=s["iterations"], progress=ctx.progress, cancel=ctx.cancel)
    store_channel_calibration(ws, pid, s["perf"], cal.to_dict())
    return {"record_id": s["perf"], "name": s["perf_name"], "seconds": cal.seconds, "ratios": cal.ratios}
