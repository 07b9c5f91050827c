"""Job ``loss_profile``: measure a loss profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui.services.job_settings import loss_settings


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (:func:`loss_settings` with the model's inputs)."""
    loss_settings(project, args, model_path=ws.model_path(project["id"]))


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, method, levels, data, batches, int8, metric, dims, batch_size}`` (see
    :func:`loss_settings`); ``record_id`` reruns that record (its data is replaced). Stores the profile (data
    file, then record); returns ``{"record_id", "name", "method", "seconds"}``."""
    from sparsify_tui.profiling.loss_methods import profile_loss
    from sparsify_tui.services.profiles import store_loss_profile

    ws, pid = ctx.ws, ctx.project_id
    model_path = ws.model_path(pid)
    s = loss_settings(ws.get_project(pid), dict(ctx.args or {}), model_path=model_path)
    prof = profile_loss(model_path, progress=ctx.progress, cancel=ctx.cancel, **s)
    return store_loss_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"),
                              record_id=(ctx.args or {}).get("record_id"))
