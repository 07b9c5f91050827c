"""Job ``loss_profile``: measure a loss profile of the project's model and store it."""

from __future__ import annotations

from typing import Any, Dict

from sparsify_tui import settings


def loss_settings(project: Dict[str, Any], args: Dict[str, Any]) -> Dict[str, Any]:
    """Validated arguments of a loss profile: ``name, method, levels, data, batches, batch_size, dims, int8,
    metric, core_count, structure``; missing ones default from the project's ``setup``. Raises ``SparsifyError``."""
    from sparsify_tui.profiling.loss import METHODS, parse_levels

    setup = project.get("setup") or {}
    dims = dict(setup.get("dims") or {})
    dims.update(args.get("dims") or {})
    levels = args.get("levels")
    if isinstance(levels, str):
        levels = parse_levels(levels)
    method = args.get("method") or "magnitude"
    if method not in METHODS:
        from sparsify_tui.errors import SparsifyError

        raise SparsifyError(f"unknown loss method {method!r}: use one of {', '.join(METHODS)}")
    cores = args.get("core_count")
    if cores is None:
        cores = min(int(setup.get("core_count") or settings.available_cores()), settings.available_cores())
    return {
        "name": args.get("name") or setup.get("loss_name") or "baseline",
        "method": method,
        "levels": levels,
        "data": args.get("data"),
        "batches": settings.loss_batches(args.get("batches")),
        "batch_size": settings.batch_size(args.get("batch_size") or setup.get("batch_size") or 1),
        "dims": dims,
        "int8": bool(args.get("int8", False)),
        "metric": args.get("metric"),
        "core_count": settings.core_count(cores),
        "structure": _structure(args.get("structure"), method, bool(args.get("int8", False))),
    }


def _structure(value, method: str, int8: bool) -> str:
    """``"unstructured"`` (rows are layers) or ``"channel"`` (rows are channel groups: magnitude or one-shot, no
    INT8). Raises ``SparsifyError`` (one line)."""
    from sparsify_tui.errors import SparsifyError

    structure = str(value or "unstructured")
    if structure not in ("unstructured", "channel"):
        raise SparsifyError(f"unknown loss structure {structure!r}: use unstructured or channel")
    if structure == "channel" and int8:
        raise SparsifyError("INT8 sensitivity is measured per layer: drop --int8 or use --structure unstructured")
    if structure == "channel" and method == "approximated":
        raise SparsifyError("channel loss profiles are magnitude or one-shot: use --method magnitude or one-shot")
    return structure


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, method, levels, data, batches, int8, metric, dims, batch_size}`` (see
    :func:`loss_settings`). Stores the profile (data file, then record); returns
    ``{"record_id", "name", "method", "seconds"}``."""
    from sparsify_tui.profiling.loss import profile_loss
    from sparsify_tui.services.profiles import store_loss_profile

    ws, pid = ctx.ws, ctx.project_id
    s = loss_settings(ws.get_project(pid), dict(ctx.args or {}))
    prof = profile_loss(ws.model_path(pid), progress=ctx.progress, cancel=ctx.cancel, **s)
    return store_loss_profile(ws, pid, prof, job_id=(ctx.job or {}).get("id"))
