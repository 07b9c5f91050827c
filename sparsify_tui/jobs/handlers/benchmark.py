"""Job ``benchmark``: measure the baseline against optimizations and store the result."""

from __future__ import annotations

from typing import Any, Dict


def check(ws, project: Dict[str, Any], args: Dict[str, Any]) -> None:
    """Refuse bad arguments before a job record exists (the benchmark settings with the model's inputs, and
    every optimization exists)."""
    from sparsify_tui.services.benchmarks import benchmark_settings
    from sparsify_tui.services.optimizations import get_optimization

    benchmark_settings(project, args, model_path=ws.model_path(project["id"]))
    for ref in args.get("optimizations") or []:
        get_optimization(ws, project["id"], str(ref))


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, optimizations: [ids or names], batch_sizes, core_counts, warmup, iterations}`` (+ optional
    ``dims``, ``data``); see :func:`sparsify_tui.services.benchmarks.benchmark_project`. Returns
    ``{benchmark, name, results}``."""
    from sparsify_tui.services.benchmarks import benchmark_project

    result = benchmark_project(ctx.ws, ctx.project_id, ctx.args or {}, progress=ctx.progress, cancel=ctx.cancel)
    return {"benchmark": result.id, "name": result.name, "results": len(result.runs)}
