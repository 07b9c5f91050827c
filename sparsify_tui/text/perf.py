"""A perf profile's summary (:class:`~sparsify_tui.profiling.perf.PerfProfile`): ``sparsify-tui perf`` prints it
above its slowest-nodes table, the Performance Profiles screen shows it as the Model Summary."""

from __future__ import annotations

from typing import Optional

from sparsify_tui.engine.run import display_name, runtime_label
from sparsify_tui.formatting import format_ms, format_ratio, plural
from sparsify_tui.text import Fact


def int8_ratio_text(prof) -> str:
    """The one INT8 ratio of a profile (:attr:`~sparsify_tui.profiling.perf.Int8Profile.ratio`) with its spread and
    how it was timed: ``"0.84× (rounds 0.80–0.88×) FP32, timed interleaved with it"``; a profile measured before the
    interleaved timing says its two blocks were timed apart."""
    i8 = prof.int8
    if not i8.speedup_interleaved:
        return f"{format_ratio(i8.ratio)} FP32, timed apart from it (rerun the profile for the interleaved ratio)"
    return f"{format_ratio(i8.ratio, i8.round_ratios)} FP32, timed interleaved with it"


def _int8_fact(prof) -> Fact:
    """The measured INT8 model: ms per batch and items/s (:attr:`~sparsify_tui.profiling.perf.PerfProfile.int8_ms`)
    and the one INT8 ratio (:func:`int8_ratio_text`); why it failed; or not measured."""
    i8 = prof.int8
    if i8.error:
        return Fact("INT8", f"failed: {i8.error}")
    if not i8.enabled:
        return Fact("INT8", "not measured")
    ms = prof.int8_ms
    ips = 1000.0 * prof.batch_size / ms if ms else 0.0
    return Fact("INT8 measured", f"{format_ms(ms)} ms/batch · {ips:.1f} items/s · {int8_ratio_text(prof)}")


def _estimate_fact(prof, level: Optional[str]) -> Fact:
    """The pruned estimates: every level's speedup (``level`` None), or one level's ms per batch and speedup."""
    pe = prof.pruned_estimate
    if level is None:
        est = "  ".join(f"{k}: {v.speedup:.2f}×" for k, v in pe.levels.items() if v.speedup)
        return Fact("est. pruned speedup", f"{est or '-'} (est., sparse-kernel runtime)")
    est_ms = prof.estimated_ms(level)
    if est_ms is None:
        return Fact(f"est. pruned {level}", "not estimated")
    lv = pe.levels.get(level)
    return Fact(f"est. pruned {level}", f"{est_ms:.3f} ms/batch · {(lv.speedup if lv else None) or 1:.2f}× "
                                        "(est., sparse-kernel runtime)")


def overhead_fact(prof) -> Fact:
    """What the per-node ms are: each node's median over the profiled runs (the mean in profiles measured before),
    scaled to the unprofiled median (the factor) so the rows add up to it, and why the raw rows do not (the
    profiler's overhead: the rows' sum over that median)."""
    runs = plural(prof.profiled.runs, "profiled run") if prof.profiled.runs else "the profiled runs"
    what = {"median": f"each node's median over {runs} (mean and IQR beside it)",
            "engine": f"each node's time over {runs} as the runtime's counters give it (they keep no single run)",
            }.get(prof.profiled.node_time or "", f"each node's mean over {runs} (measured before medians were "
                                                  "kept: rerun the profile)")
    ratio = prof.overhead_ratio
    if ratio is None:
        return Fact("per-node ms", f"{what}, as profiled (no unprofiled median to scale to)")
    why = "profiler overhead" if ratio >= 1 else "the rest of the median is spent between kernels"
    return Fact("per-node ms", f"{what}, scaled ×{prof.scale:.3g} so the rows add up to the measured median (the "
                               f"raw rows add up to {ratio:.1f}× it: {why}; the raw figures are in 'raw ms')")


def inputs_fact(prof) -> Fact:
    """The shapes the model ran at (the first batch, by input: a model with symbolic dims says which sizes it was
    measured at, ``x 1×3×320×320``), where they came from (synthetic or the sample data) and the dims set."""
    shapes = prof.inputs.shapes or {}
    shown = " · ".join(f"{name} {'×'.join(str(d) for d in shape) or 'scalar'}" for name, shape in shapes.items())
    dims = ", ".join(f"{k}={v}" for k, v in (prof.dims or {}).items())
    source = prof.inputs.source or "synthetic"
    return Fact("inputs", f"{shown or 'not recorded'} ({source}{'; dims ' + dims if dims else ''})")


def summary_facts(prof, level: Optional[str] = None) -> list:
    """The summary of a perf profile: name, batch, cores and the runtime (engine, version, precision); the input
    shapes it ran at; the instruction sets; the measured latency
    (median, p90, mean, min ms per batch) and items/s; the measured INT8 model; the pruned estimates (``level``:
    one sparsity level such as ``"0.9"``, or None for every level); what the per-node ms are; and why onnxruntime
    gains nothing from unstructured sparsity (the last fact)."""
    lat = prof.latency_ms
    return [
        Fact("perf profile", f"{prof.name} · batch {prof.batch_size} · {plural(prof.core_count, 'core')} · "
                             f"{runtime_label(prof.engine, prof.engine_version or '?', prof.precision)}"),
        inputs_fact(prof),
        Fact("instruction sets", ", ".join(prof.instruction_sets) or "unknown"),
        Fact("measured", f"{format_ms(lat.median)} ms/batch (p90 {format_ms(lat.p90)}, mean {format_ms(lat.mean)}, "
                         f"min {format_ms(lat.min)}) · {prof.items_per_second:.1f} items/s"),
        _int8_fact(prof),
        _estimate_fact(prof, level),
        overhead_fact(prof),
        Fact("note", f"{display_name(prof.engine)} gets no speedup from "
                     "unstructured sparsity (1.0×): pruned times are estimates for a sparse-kernel runtime, "
                     "calibrated on measured DeepSparse speedups"),
    ]


__all__ = ["inputs_fact", "overhead_fact", "summary_facts"]
