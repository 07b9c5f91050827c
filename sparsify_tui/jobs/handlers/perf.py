"""Job ``perf_profile``: measure a perf profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui.services.job_settings import perf_settings


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`perf_settings` with the model's inputs)."""
    perf_settings(project, args, model_path=ws.model_path(project["id"]))


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, engine, precision, batch_size, core_count, warmup, iterations, data, int8, dims}`` (see
    :func:`perf_settings`); ``record_id`` reruns that record. Stores the profile (data file, then record);
    returns the record fields with ``record_id``."""
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services.profiles import store_perf_profile

    ws, pid, args = ctx.ws, ctx.project_id, dict(ctx.args or {})
    model_path = ws.model_path(pid)
    s = perf_settings(ws.get_project(pid), args, model_path=model_path)
    prof = profile_performance(model_path, s["run"], dims=s["dims"], warmup=s["warmup"], iterations=s["iterations"],
                               data=s["data"], int8=s["int8"], name=s["name"], progress=ctx.progress,
                               cancel=ctx.cancel)
    return store_perf_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"), record_id=args.get("record_id"))
