"""Job ``perf_profile``: measure a perf profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from sparsify_tui import settings

#: How the CLI names each argument in its errors; a TUI dialog passes its own field labels as ``flags``.
FLAGS = {"batch_size": "--batch-size", "core_count": "--cores", "warmup": "--warmup", "iterations": "--iterations"}


def perf_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                  flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of a perf profile: ``name, batch_size, core_count, warmup, iterations, data, int8,
    dims``. Missing ones default from the project's ``setup`` (its core count capped at the cores available
    now; ``dims`` given add to the setup's), then from :mod:`sparsify_tui.settings`. ``flags``: the label of each argument in error messages
    (default :data:`FLAGS`, the CLI's). With ``model_path`` the inputs are checked too, before anything runs
    (:func:`sparsify_tui.analysis.inputs.check_run_inputs`: the model, dim names, memory, sample data).
    Raises ``SparsifyError`` (one line)."""
    f = {**FLAGS, **(flags or {})}
    setup = project.get("setup") or {}
    dims = {**(setup.get("dims") or {}), **(args.get("dims") or {})}  # --dim adds to / overrides the setup's
    cores = args.get("core_count")
    if cores is None:
        cores = min(int(setup.get("core_count") or settings.available_cores()), settings.available_cores())
    out = {
        "name": args.get("name") or setup.get("perf_name") or "baseline",
        "batch_size": settings.batch_size(args["batch_size"] if args.get("batch_size") is not None
                                            else setup.get("batch_size") or 1, f["batch_size"]),
        "core_count": settings.core_count(cores, f["core_count"]),
        "warmup": settings.warmup(args.get("warmup"), f["warmup"]),
        "iterations": settings.iterations(args.get("iterations"), f["iterations"]),
        "data": args.get("data") or None,
        "int8": bool(args.get("int8", True)),
        "dims": settings.dims(dims),
    }
    if model_path is not None:
        from sparsify_tui.analysis.inputs import check_run_inputs

        check_run_inputs(model_path, out["batch_size"], out["dims"], out["data"], user_dims=args.get("dims"))
    return out


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`perf_settings` with the model's inputs)."""
    perf_settings(project, args, model_path=ws.model_path(project["id"]))


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, batch_size, core_count, warmup, iterations, data, int8, dims}`` (see
    :func:`perf_settings`); ``record_id`` reruns that record. Stores the profile (data file, then record);
    returns the record fields with ``record_id``."""
    from sparsify_tui.profiling.perf import profile_performance
    from sparsify_tui.services.profiles import store_perf_profile

    ws, pid, args = ctx.ws, ctx.project_id, dict(ctx.args or {})
    model_path = ws.model_path(pid)
    s = perf_settings(ws.get_project(pid), args, model_path=model_path)
    prof = profile_performance(model_path, batch_size=s["batch_size"], core_count=s["core_count"],
                               dims=s["dims"], warmup=s["warmup"], iterations=s["iterations"], data=s["data"],
                               int8=s["int8"], name=s["name"], progress=ctx.progress, cancel=ctx.cancel)
    return store_perf_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"), record_id=args.get("record_id"))
