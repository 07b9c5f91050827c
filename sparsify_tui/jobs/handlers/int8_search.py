"""Job ``int8_search``: create an optimization whose INT8 exclusions are chosen by the accuracy-controlled search."""

from __future__ import annotations

from typing import Any, Dict


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists: :func:`sparsify_tui.services.job_settings.int8_settings`, a free
    name, a loss profile of unstructured pruning, and the sample data with its labels
    (:func:`sparsify_tui.analysis.run_inputs.check_run_inputs`)."""
    from sparsify_tui.analysis.run_inputs import check_run_inputs
    from sparsify_tui.services.int8 import check_name_free
    from sparsify_tui.services.job_settings import int8_settings
    from sparsify_tui.services.profiles import check_loss_structure

    s = int8_settings(project, args)
    check_name_free(ws, project["id"], s["name"])
    check_loss_structure(ws, project["id"], s["loss"], "unstructured")
    check_run_inputs(ws.model_path(project["id"]), 1, s["dims"], s["data"], labels_key=s["labels"],
                     metric=s["metric"], scores_outputs=True, finite=True)


def run(ctx) -> Dict[str, Any]:
    """Args: see :func:`sparsify_tui.services.job_settings.int8_settings` (``name``, ``max_drop``, ``metric``, ``data``,
    ``labels``, ``calibration``, ...). Stores the optimization; returns ``{optimization, name, status, chosen,
    trials, metric, seconds}``."""
    from sparsify_tui.services.int8 import search_int8_optimization

    rec = search_int8_optimization(ctx.ws, ctx.project_id, dict(ctx.args or {}), progress=ctx.progress,
                                   cancel=ctx.cancel)
    search = rec.quantization.search
    return {"optimization": rec.id, "name": rec.name, "status": search.status, "chosen": search.chosen,
            "trials": len(search.trials), "metric": search.metric, "seconds": search.seconds}
