"""Job ``apply``: write the optimized model of an optimization and record the result on it."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

#: How the CLI names each argument in its errors; a TUI dialog passes its own field labels as ``flags``.
FLAGS = {"optimization": "OPTIMIZATION", "out_path": "-o", "data": "--data", "labels": "--labels"}


def apply_settings(project: Dict[str, Any], args: Dict[str, Any], *, model_path=None, project_dir=None,
                   flags: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Validated arguments of an apply: ``optimization`` (required), ``out_path`` (optional; its folder must
    exist, :func:`sparsify_tui.settings.output_path`, except the project's own ``optimized/`` folder under
    ``project_dir``, created on demand), ``data`` (optional calibration data), ``labels`` (the key of its
    labels array, :mod:`sparsify_tui.analysis.labels`). With ``model_path`` the
    calibration inputs are checked too (the project's dims, 16 batches of one item, the sample data), before
    anything runs. Raises ``SparsifyError`` (one line)."""
    from pathlib import Path

    from sparsify_tui import settings
    from sparsify_tui.errors import SparsifyError

    f = {**FLAGS, **(flags or {})}
    if not args.get("optimization"):
        raise SparsifyError(f"apply needs an optimization ({f['optimization']}): give its name or id")
    out_path = args.get("out_path") or None
    if out_path:
        own = project_dir is not None and \
            Path(out_path).expanduser().absolute().parent == (Path(project_dir) / "optimized").absolute()
        out_path = str(Path(out_path).expanduser()) if own else settings.output_path(out_path, f["out_path"],
                                                                                     allow_dir=True)
    out = {"optimization": str(args["optimization"]), "out_path": out_path, "data": args.get("data") or None,
           "labels": args.get("labels") or None}
    if model_path is not None:
        from sparsify_tui.analysis.inputs import check_run_inputs

        # calibration: 16 batches of one item (optimization.apply.calibration_inputs)
        check_run_inputs(model_path, 1, settings.dims((project.get("setup") or {}).get("dims") or {}), out["data"],
                         batches=16, labels_key=out["labels"], scores_outputs=True)
    return out


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`apply_settings`, and the optimization exists)."""
    from sparsify_tui.services.optimizations import get_optimization

    s = apply_settings(project, args, model_path=ws.model_path(project["id"]), project_dir=ws.project_dir(project["id"]))
    get_optimization(ws, project["id"], s["optimization"])


def run(ctx) -> Dict[str, Any]:
    """Args: ``{optimization: id or name, out_path: optional export path, data: optional sample data, labels: its
    labels key}`` (:func:`apply_settings`). Stores ``applied`` on the optimization record; returns a summary."""
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.optimizations import get_optimization

    s = apply_settings(ctx.ws.get_project(ctx.project_id), dict(ctx.args or {}),
                       model_path=ctx.ws.model_path(ctx.project_id), project_dir=ctx.ws.project_dir(ctx.project_id))
    opt = get_optimization(ctx.ws, ctx.project_id, s["optimization"])
    applied = apply_record(ctx.ws, ctx.project_id, opt.id, out_path=s["out_path"],
                           data=s["data"], labels_key=s["labels"], progress=ctx.progress, cancel=ctx.cancel)
    return {"optimization": opt.id, "name": opt.name, "path": applied.path, "exported_to": applied.exported_to,
            "quantized": applied.quantized, "layers_exact": applied.layers_exact, "output_diff": applied.output_diff}
