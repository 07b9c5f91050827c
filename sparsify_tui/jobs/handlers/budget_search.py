"""Job ``budget_search``: create a channel optimization at the fastest measured configuration within an accuracy
budget (:mod:`sparsify_tui.optimization.budget_search`)."""

from __future__ import annotations

from typing import Any, Dict


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists: :func:`sparsify_tui.services.job_settings.budget_settings`, a
    free name, the sample data with its labels (:func:`sparsify_tui.analysis.inputs.check_run_inputs`) and enough
    items for the calibration and held-out split (:func:`sparsify_tui.optimization.budget_search.check_split`)."""
    from sparsify_tui.analysis.run_inputs import check_run_inputs
    from sparsify_tui.analysis.labels import item_count
    from sparsify_tui.optimization.budget_search import check_split
    from sparsify_tui.services.job_settings import budget_settings
    from sparsify_tui.services.optimizations import check_name_free

    s = budget_settings(project, args)
    check_name_free(ws, project["id"], s["name"])
    model = ws.model_path(project["id"])
    check_run_inputs(model, 1, s["dims"], s["data"], labels_key=s["labels"], metric=s["metric"], scores_outputs=True,
                     finite=bool(s.get("quantize")))
    check_split(item_count(model, s["data"], labels_key=s["labels"], dims=s["dims"]), s["calibration_size"])


def run(ctx) -> Dict[str, Any]:
    """Args: see :func:`sparsify_tui.services.job_settings.budget_settings` (``name``, ``max_drop``, ``data``,
    ``metric``, ``labels``, ``quantize``, ...). Stores the optimization; returns ``{optimization, name, status, chosen, trials,
    metric, speedup, seconds}``."""
    from sparsify_tui.services.budget import search_budget_optimization

    rec = search_budget_optimization(ctx.ws, ctx.project_id, dict(ctx.args or {}), progress=ctx.progress,
                                     cancel=ctx.cancel)
    search = rec.search
    chosen = search.chosen_trial
    return {"optimization": rec.id, "name": rec.name, "status": search.status, "chosen": search.chosen,
            "trials": len(search.trials), "metric": search.metric,
            "speedup": chosen.speedup if chosen is not None else None, "seconds": search.seconds}
