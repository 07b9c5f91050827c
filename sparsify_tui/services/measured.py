"""Measured figures of an optimization, recorded on it when a benchmark includes it, so its estimate and its
measurement are shown side by side (``measured`` on the optimization record; ``estimates.ort_speedup`` vs
``measured.speedup``).

``measured`` (on the runtime the optimization targets; its speedup against the reference, the baseline on onnxruntime
fp32): ``{"benchmark", "benchmark_name", "batch_size", "core_count", "speedup", "median_ms", "baseline_ms",
"estimated_speedup" (the record's estimate when it was benchmarked), "fingerprint" (of the applied file), "stale"
(the optimization changed since), "runs": [{batch_size, core_count, speedup, median_ms}], "groups", "noise" (why
the runs at the reference are noisy, when they are)}``. The
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
    from sparsify_tui.engine.run import RunSpec
    from sparsify_tui.optimization.apply import optimization_fingerprint
    from sparsify_tui.optimization.record import Measured
    from sparsify_tui.optimization.structures import GroupRun, structure_of
    from sparsify_tui.services.optimizations import get_optimization, store_fields

    for k, oid in enumerate(opt_ids):
        opt = get_optimization(ws, project_id, oid)
        mine = [r for r in result.runs if r.optimization_id == oid]
        # the runs on the runtime it targets (a benchmark across runtimes measures it on others too)
        runs = [r for r in mine if r.runtime == opt.target_runtime] or mine
        if not runs:
            continue
        kind = structure_of(opt)
        want_b, want_c = kind.measured_reference(opt)
        # the estimate's (batch, cores), else the deployment's: the smallest batch on the most cores (the first run,
        # 1 core, made two optimizations of one benchmark quote different core counts)
        ref = next((r for r in runs if r.batch_size == want_b and r.core_count == want_c),
                   min(runs, key=lambda r: (r.batch_size or 0, -(r.core_count or 0))))
        base = next((r for r in result.runs if r.optimization_id is None and r.batch_size == ref.batch_size
                     and r.core_count == ref.core_count and r.model == result.baseline_label), None)
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
        noise = [f"{label}: {n}" for label, r in ((opt.name, ref), ("baseline", base)) if r is not None
                 for n in r.noise(result.rounds)]
        opt.measured.noise = noise or None
        # per-group times compare the two models on the same runtime: the baseline's run on the optimization's
        same = next((r for r in result.runs if r.optimization_id is None and r.runtime == ref.runtime
                     and r.batch_size == ref.batch_size and r.core_count == ref.core_count), None)
        if same is not None and opt.applied is not None and kind.has_measured_groups:
            if progress:
                progress(f"per-group times of {opt.name}", k / max(1, len(opt_ids)))
            run = RunSpec(engine=ref.engine, precision=ref.precision, batch_size=ref.batch_size,
                          core_count=ref.core_count)
            opt.measured.groups = kind.measured_groups(
                opt, GroupRun(opt.applied.path, run, ref.median_ms), GroupRun(baseline_path, run, same.median_ms),
                dims=result.dims, data=data, cancel=cancel)
        store_fields(ws, project_id, opt, "measured")
