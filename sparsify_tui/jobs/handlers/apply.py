"""Job ``apply``: write the optimized model of an optimization and record the result on it."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui.services.job_settings import apply_settings


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`apply_settings`, and the optimization exists)."""
    from sparsify_tui.services.optimizations import get_optimization

    s = apply_settings(project, args, model_path=ws.model_path(project["id"]), project_dir=ws.project_dir(project["id"]))
    get_optimization(ws, project["id"], s["optimization"])


def run(ctx) -> Dict[str, Any]:
    """Args: ``{optimization: id or name, out_path: optional export path, data: optional sample data, labels: its
    labels key, reconstruct: true/false/unset, calibration_size: items, metric: optional}`` (:func:`apply_settings`). Stores ``applied`` on the optimization record; returns a summary."""
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.optimizations import get_optimization

    s = apply_settings(ctx.ws.get_project(ctx.project_id), dict(ctx.args or {}),
                       model_path=ctx.ws.model_path(ctx.project_id), project_dir=ctx.ws.project_dir(ctx.project_id))
    opt = get_optimization(ctx.ws, ctx.project_id, s["optimization"])
    applied = apply_record(ctx.ws, ctx.project_id, opt.id, out_path=s["out_path"],
                           data=s["data"], labels_key=s["labels"], reconstruct=s["reconstruct"],
                           calibration_items=s["calibration_size"], metric=s["metric"], progress=ctx.progress,
                           cancel=ctx.cancel)
    return {"optimization": opt.id, "name": opt.name, "path": applied.path, "exported_to": applied.exported_to,
            "quantized": applied.quantized, "layers_exact": applied.layers_exact, "output_diff": applied.output_diff}
