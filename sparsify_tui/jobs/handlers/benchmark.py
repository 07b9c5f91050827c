"""Job ``benchmark``: measure the baseline against optimizations and store the result."""

from __future__ import annotations

from typing import Any, Dict


def run(ctx) -> Dict[str, Any]:
    """Args: ``{name, optimizations: [ids or names], batch_sizes, core_counts, warmup, iterations}`` (+ optional
    ``dims``, ``data``); see :func:`sparsify_tui.services.benchmarks.benchmark_project`. Returns
    ``{benchmark, name, results}``."""
    from sparsify_tui.services.benchmarks import benchmark_project

    rec, result = benchmark_project(ctx.ws, ctx.project_id, ctx.args or {}, progress=ctx.progress, cancel=ctx.cancel)
    return {"benchmark": rec["id"], "name": rec["name"], "results": len(result.runs)}
