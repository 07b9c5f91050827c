"""Job ``int8_search``: create an optimization whose INT8 exclusions are chosen by the accuracy-controlled search."""

from __future__ import annotations

from typing import Any, Dict


def run(ctx) -> Dict[str, Any]:
    """Args: see :func:`sparsify_tui.services.int8.int8_settings` (``name``, ``max_drop``, ``metric``, ``data``,
    ``labels``, ``calibration``, ...). Stores the optimization; returns ``{optimization, name, status, chosen,
    trials, metric, seconds}``."""
    from sparsify_tui.services.int8 import search_int8_optimization

    rec = search_int8_optimization(ctx.ws, ctx.project_id, dict(ctx.args or {}), progress=ctx.progress,
                                   cancel=ctx.cancel)
    search = rec["quantization"]["search"]
    return {"optimization": rec["id"], "name": rec["name"], "status": search["status"], "chosen": search["chosen"],
            "trials": len(search["trials"]), "metric": search["metric"], "seconds": search["seconds"]}
