"""Job ``apply``: write the optimized model of an optimization and record the result on it."""

from __future__ import annotations

from typing import Any, Dict


def run(ctx) -> Dict[str, Any]:
    """Args: ``{optimization: id or name, out_path: optional export path, data: optional sample data, labels: its labels key}``.
    Stores ``applied`` on the optimization record; returns a summary."""
    from sparsify_tui.errors import SparsifyError
    from sparsify_tui.services.apply import apply_record
    from sparsify_tui.services.optimizations import get_optimization

    args = ctx.args or {}
    if not args.get("optimization"):
        raise SparsifyError("apply needs an optimization: give its name or id")
    opt = get_optimization(ctx.ws, ctx.project_id, str(args["optimization"]))
    applied = apply_record(ctx.ws, ctx.project_id, opt["id"], out_path=args.get("out_path"),
                           data=args.get("data"), labels_key=args.get("labels"), progress=ctx.progress,
                           cancel=ctx.cancel)
    return {"optimization": opt["id"], "name": opt.get("name"), "path": applied["path"],
            "exported_to": applied["exported_to"], "quantized": applied["quantized"],
            "layers_exact": applied["layers_exact"], "output_diff": applied["output_diff"]}
