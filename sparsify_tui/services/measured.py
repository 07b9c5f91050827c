"""Measured figures of an optimization, recorded on it when a benchmark includes it, so its estimate and its
measurement are shown side by side (``measured`` on the optimization record; ``estimates.ort_speedup`` vs
``measured.speedup``).

``measured``: ``{"benchmark", "benchmark_name", "batch_size", "core_count", "speedup", "median_ms", "baseline_ms",
"estimated_speedup" (the record's estimate when it was benchmarked), "fingerprint" (of the applied file), "stale"
(the optimization changed since), "runs": [{batch_size, core_count, speedup, median_ms}], "groups"}``. The
reference (batch, cores) is the one the estimate is for (its perf profile's), else the smallest batch on the most
cores; the text names the other runs too (:func:`sparsify_tui.text.optimization.measured_fact`).

A structure with per-group measured times (channel: the ms per batch of each group's nodes in the thinned and the
baseline model) adds ``groups`` through its hook
:meth:`~sparsify_tui.optimization.structures.PruningStructure.measured_groups`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Optional

from sparsify_tui.progress import CancelToken, ProgressFn


def record_measured(ws, project_id: str, result, opt_ids: list, *, baseline_path: str, data=None,
                    progress: Optional[ProgressFn] = None, cancel: Optional[CancelToken] = None) -> None:
    """Store ``measured`` on every optimization of ``opt_ids`` that benchmark ``result`` measured (module
    docstring). Per-group times cost what the structure's hook costs (channel: two profiled passes each)."""
    from sparsify_tui.optimization.apply import optimization_fingerprint
    from sparsify_tui.optimization.record import Measured
    from sparsify_tui.optimization.structures import GroupRun, structure_of
    from sparsify_tui.services.optimizations import get_optimization, store_fields

    for k, oid in enumerate(opt_ids):
        opt = get_optimization(ws, project_id, oid)
        runs = [r for r in result.runs if r.optimization_id == oid]
        if not runs:
            continue
        kind = structure_of(opt)
        want_b, want_c = kind.measured_reference(opt)
        # the estimate's (batch, cores), else the deployment's: the smallest batch on the most cores (the first run,
        # 1 core, made two optimizations of one benchmark quote different core counts)
        ref = next((r for r in runs if r.batch_size == want_b and r.core_count == want_c),
                   min(runs, key=lambda r: (r.batch_size or 0, -(r.core_count or 0))))
        base = next((r for r in result.runs if r.optimization_id is None and r.batch_size == ref.batch_size
                     and r.core_count == ref.core_count), None)
        est = opt.estimates
        opt.measured = Measured.from_dict({  # every key a benchmark writes, null or not (the stored shape)
            "benchmark": result.id, "benchmark_name": result.name, "batch_size": ref.batch_size,
            "core_count": ref.core_count, "speedup": ref.speedup, "median_ms": ref.median_ms,
            "baseline_ms": base.median_ms if base else None,
            "estimated_speedup": est.ort_speedup if est else None, "estimated_ms": est.ort_ms if est else None,
            "fingerprint": optimization_fingerprint(opt), "stale": False,
            "runs": [{"batch_size": r.batch_size, "core_count": r.core_count, "speedup": r.speedup,
                      "median_ms": r.median_ms} for r in runs],
            "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        })
        if base is not None and opt.applied is not None and kind.has_measured_groups:
            if progress:
                progress(f"per-group times of {opt.name}", k / max(1, len(opt_ids)))
            opt.measured.groups = kind.measured_groups(
                opt, GroupRun(opt.applied.path, ref.batch_size, ref.core_count, ref.median_ms),
                GroupRun(baseline_path, base.batch_size, base.core_count, base.median_ms),
                dims=result.dims, data=data, cancel=cancel)
        store_fields(ws, project_id, opt, "measured")
