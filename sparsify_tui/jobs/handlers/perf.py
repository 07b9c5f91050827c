"""Job ``perf_profile``: measure a perf profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui import settings


def perf_settings(project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments of a perf profile: ``name, batch_size, core_count, warmup, iterations, data, int8,
    dims``. Missing ones default from the project's ``setup`` (its core count capped at the cores available
    now), then from :mod:`sparsify_tui.settings`. Raises ``SparsifyError`` (one line)."""
    setup = project.get("setup") or {}
    dims = args.get("dims")
    if dims is None:
        dims = setup.get("dims") or {}
    cores = args.get("core_count")
    if cores is None:
        cores = min(int(setup.get("core_count") or settings.available_cores()), settings.available_cores())
    return {
        "name": args.get("name") or setup.get("perf_name") or "baseline",
        "batch_size": settings.batch_size(args.get("batch_size") or setup.get("batch_size") or 1),
        "core_count": settings.core_count(cores),
        "warmup": settings.warmup(args.get("warmup")),
        "iterations": settings.iterations(args.get("iterations")),
        "data": args.get("data") or None,
        "int8": bool(args.get("int8", True)),
        "dims": {str(k): int(v) for k, v in dict(dims).items()},
    }


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, batch_size, core_count, warmup, iterations, data, int8, dims}`` (see
    :func:`perf_settings`); ``record_id`` reruns that record. Stores the profile (data file, then record);
    returns the record fields with ``record_id``."""
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services.profiles import store_perf_profile

    ws, pid, args = ctx.ws, ctx.project_id, dict(ctx.args or {})
    s = perf_settings(ws.get_project(pid), args)
    prof = profile_performance(ws.model_path(pid), batch_size=s["batch_size"], core_count=s["core_count"],
                               dims=s["dims"], warmup=s["warmup"], iterations=s["iterations"], data=s["data"],
                               int8=s["int8"], name=s["name"], progress=ctx.progress, cancel=ctx.cancel)
    return store_perf_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"), record_id=args.get("record_id"))
