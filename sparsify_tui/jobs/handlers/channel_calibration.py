"""Job ``channel_calibration``: measure the channel time model of the project's model and store it with a perf
profile (:mod:`sparsify_tui.profiling.channel_calibration`)."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui.services.job_settings import calibration_settings


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
    cal = calibrate_channels(ws.model_path(pid), s["run"], ratios=s["ratios"], dims=s["dims"], data=s["data"],
                             warmup=s["warmup"], iterations=s["iterations"], progress=ctx.progress, cancel=ctx.cancel)
    store_channel_calibration(ws, pid, s["perf"], cal.to_dict())
    return {"record_id": s["perf"], "name": s["perf_name"], "seconds": cal.seconds, "ratios": cal.ratios}
