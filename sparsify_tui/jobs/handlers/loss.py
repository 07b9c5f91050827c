"""Job ``loss_profile``: measure a loss profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from sparsify_tui import settings

#: How the CLI names each argument in its errors; a TUI dialog passes its own field labels as ``flags``.
FLAGS = {"batches": "--batches", "batch_size": "--batch-size", "core_count": "--cores", "levels": "--levels",
         "method": "--method", "metric": "--metric", "data": "--data"}


def loss_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None,
                  flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of a loss profile: ``name, method, levels, data, batches, batch_size, dims, int8,
    metric, core_count, structure``; missing ones default from the project's ``setup``. ``flags``: the label of each
    argument in error messages (default :data:`FLAGS`, the CLI's). With ``model_path`` the model and the
    inputs are checked too, before anything runs: every method loads the model, checks the ``--dim`` names
    and onnx's strict shape check; one-shot (which runs the model) also checks dims, memory and sample data
    (:func:`sparsify_tui.analysis.inputs.check_run_inputs`). Raises ``SparsifyError`` (one line)."""
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.profiling.loss import METHODS, parse_levels

    f = {**FLAGS, **(flags or {})}
    setup = project.get("setup") or {}
    dims = dict(setup.get("dims") or {})
    dims.update(args.get("dims") or {})
    levels = args.get("levels")
    if levels is not None:
        text = levels if isinstance(levels, str) else ",".join(str(x) for x in levels)
        try:
            levels = parse_levels(text)
        except SparsifyError:
            raise SparsifyError(f"bad {f['levels']} {text!r}: give comma-separated sparsities in [0, 1), "
                                "e.g. 0.2,0.4,0.9") from None
    method = args.get("method") or "magnitude"
    if method not in METHODS:
        raise SparsifyError(f"unknown loss {f['method']} {method!r}: use one of {', '.join(METHODS)}")
    metric = args.get("metric")
    if metric not in (None, "auto", "kl", "nmse"):
        raise SparsifyError(f"unknown {f['metric']} {metric!r}: use kl, nmse or auto")
    cores = args.get("core_count")
    if cores is None:
        cores = min(int(setup.get("core_count") or settings.available_cores()), settings.available_cores())
    data = args.get("data") or None
    if data and method != "one-shot":
        raise SparsifyError(f"{f['data']} is used by the one-shot method only, not {method}: drop it or choose "
                            f"{f['method']} one-shot")
    out = {
        "name": args.get("name") or setup.get("loss_name") or "baseline",
        "method": method,
        "levels": levels,
        "data": data,
        "batches": settings.loss_batches(args.get("batches"), f["batches"]),
        "batch_size": settings.batch_size(args["batch_size"] if args.get("batch_size") is not None
                                            else setup.get("batch_size") or 1, f["batch_size"]),
        "dims": settings.dims(dims),
        "int8": bool(args.get("int8", False)),
        "metric": metric,
        "core_count": settings.core_count(cores, f["core_count"]),
        "structure": _structure(args.get("structure"), method, bool(args.get("int8", False))),
    }
    if model_path is not None:
        if method == "one-shot":
            from sparsify_tui.analysis.inputs import check_run_inputs

            check_run_inputs(model_path, out["batch_size"], out["dims"], out["data"], batches=out["batches"],
                             user_dims=args.get("dims"))
        else:
            from sparsify_tui.analysis.loading import load_model
            from sparsify_tui.analysis.shapes import check_shapes, check_user_dims, dim_keys

            model = load_model(model_path, load_external_data=False)
            check_user_dims(model, args.get("dims"))
            settings.dims(out["dims"], dim_keys(model))
            check_shapes(model, None)  # a model onnxruntime cannot load is refused even by weight magnitude
    return out


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`loss_settings` with the model's inputs)."""
    loss_settings(project, args, model_path=ws.model_path(project["id"]))


def _structure(value, method: str, int8: bool) -> str:
    """``"unstructured"`` (rows are layers) or ``"channel"`` (rows are channel groups: magnitude or one-shot, no
    INT8). Raises ``SparsifyError`` (one line)."""
    from sparsify_tui.errors import SparsifyError

    structure = str(value or "unstructured")
    if structure not in ("unstructured", "channel"):
        raise SparsifyError(f"--structure {structure!r} is not allowed: --structure must be unstructured or channel")
    if structure == "channel" and int8:
        raise SparsifyError("INT8 sensitivity is measured per layer: drop --int8 or use --structure unstructured")
    if structure == "channel" and method == "approximated":
        raise SparsifyError("channel loss profiles are magnitude or one-shot: use --method magnitude or one-shot")
    return structure


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, method, levels, data, batches, int8, metric, dims, batch_size}`` (see
    :func:`loss_settings`); ``record_id`` reruns that record (its data is replaced). Stores the profile (data
    file, then record); returns ``{"record_id", "name", "method", "seconds"}``."""
    from sparsify_tui.profiling.loss import profile_loss
    from sparsify_tui.services.profiles import store_loss_profile

    ws, pid = ctx.ws, ctx.project_id
    model_path = ws.model_path(pid)
    s = loss_settings(ws.get_project(pid), dict(ctx.args or {}), model_path=model_path)
    prof = profile_loss(model_path, progress=ctx.progress, cancel=ctx.cancel, **s)
    return store_loss_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"),
                              record_id=(ctx.args or {}).get("record_id"))
