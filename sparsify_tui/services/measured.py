"""Measured figures of an optimization, recorded on it when a benchmark includes it, so its estimate and its
measurement are shown side by side (``measured`` on the optimization record; ``estimates.ort_speedup`` vs
``measured.speedup``).

``measured``: ``{"benchmark", "benchmark_name", "batch_size", "core_count", "speedup", "median_ms", "baseline_ms",
"estimated_speedup" (the record's estimate when it was benchmarked), "fingerprint" (of the applied file), "stale"
(the optimization changed since), "runs": [{batch_size, core_count, speedup, median_ms}], "groups"}``. The
reference (batch, cores) is the one the estimate is for (its perf profile's), else the benchmark's first.

For a channel optimization ``groups`` holds the measured ms per batch of each group's nodes in the thinned and
the baseline model: one profiled pass of each, attributed as a perf profile is, the node times summed per group
as the estimate sums them and scaled to the benchmark's medians.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict, Optional

from sparsify_tui.progress import CancelToken, ProgressFn

TABLE = "optimizations"


def _reference(opt: Dict[str, Any]) -> tuple:
    tm = ((opt.get("model") or {}).get("channel_time_model") or {})
    return tm.get("batch_size"), tm.get("core_count")


def record_measured(ws, project_id: str, result, opt_ids: list, *, baseline_path: str, data=None,
                    progress: Optional[ProgressFn] = None, cancel: Optional[CancelToken] = None) -> None:
    """Store ``measured`` on every optimization of ``opt_ids`` that benchmark ``result`` measured (module
    docstring). Per-group times of channel optimizations cost two profiled passes each."""
    from sparsify_tui.optimization.apply import optimization_fingerprint

    for k, oid in enumerate(opt_ids):
        opt = ws.get_record(project_id, TABLE, oid)
        runs = [r for r in result.runs if r.optimization_id == oid]
        if not runs:
            continue
        want_b, want_c = _reference(opt)
        ref = next((r for r in runs if r.batch_size == want_b and r.core_count == want_c), runs[0])
        base = next((r for r in result.runs if r.optimization_id is None and r.batch_size == ref.batch_size
                     and r.core_count == ref.core_count), None)
        est = opt.get("estimates") or {}
        measured: Dict[str, Any] = {
            "benchmark": result.id, "benchmark_name": result.name, "batch_size": ref.batch_size,
            "core_count": ref.core_count, "speedup": ref.speedup, "median_ms": ref.median_ms,
            "baseline_ms": base.median_ms if base else None,
            "estimated_speedup": est.get("ort_speedup"), "estimated_ms": est.get("ort_ms"),
            "fingerprint": optimization_fingerprint(opt), "stale": False,
            "runs": [{"batch_size": r.batch_size, "core_count": r.core_count, "speedup": r.speedup,
                      "median_ms": r.median_ms} for r in runs],
            "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        if (opt.get("settings") or {}).get("structure") == "channel" and base is not None:
            if progress:
                progress(f"per-group times of {opt.get('name')}", k / max(1, len(opt_ids)))
            measured["groups"] = _group_times(ws, project_id, opt, ref, base, baseline_path, data, result, cancel)
        ws.update_record(project_id, TABLE, oid, measured=measured)


def _group_times(ws, project_id: str, opt: dict, ref, base, baseline_path: str, data, result, cancel) -> dict:
    """``{group id: {"ms": thinned, "baseline_ms": dense}}`` (ms per batch, scaled to the medians)."""
    from sparsify_tui.optimization.channel_model import ChannelTimeModel
    from sparsify_tui.profiling.channel_calibration import profile_node_ms

    tm = ChannelTimeModel.from_dict(opt["model"]["channel_time_model"])
    out: Dict[str, Any] = {}
    sums = []
    for path, run in ((opt["applied"]["path"], ref), (baseline_path, base)):
        p = profile_node_ms(path, batch_size=run.batch_size, core_count=run.core_count, dims=result.dims, data=data,
                            cancel=cancel)
        scale = run.median_ms / p["kernel_total_ms"] if p["kernel_total_ms"] else 1.0
        sums.append({g: v * scale for g, v in tm.group_sums(p["node_ms"]).items()})
    for g in tm.groups:
        out[g] = {"ms": sums[0].get(g), "baseline_ms": sums[1].get(g)}
    return out


def mark_stale(rec_dict: Dict[str, Any]) -> None:
    """Flag ``measured`` stale (in place) when the optimization no longer matches the file that was measured."""
    from sparsify_tui.optimization.apply import optimization_fingerprint

    m = rec_dict.get("measured")
    if isinstance(m, dict) and m.get("fingerprint") and m["fingerprint"] != optimization_fingerprint(rec_dict):
        m["stale"] = True
