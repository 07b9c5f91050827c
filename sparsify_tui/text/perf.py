"""A perf profile's summary (:class:`~sparsify_tui.profiling.perf.PerfProfile`): ``sparsify-tui perf`` prints it
above its slowest-nodes table, the Performance Profiles screen shows it as the Model Summary."""

from __future__ import annotations

from typing import Optional

from sparsify_tui.formatting import format_ms, plural
from sparsify_tui.text import Fact


def _int8_fact(prof) -> Fact:
    """The measured INT8 model: ms per batch, items/s and speedup over FP32; why it failed; or not measured."""
    i8 = prof.int8
    if i8.error:
        return Fact("INT8", f"failed: {i8.error}")
    if not i8.enabled:
        return Fact("INT8", "not measured")
    return Fact("INT8 measured", f"{format_ms(i8.median)} ms/batch · {(i8.items_per_second or 0):.1f} items/s · "
                                 f"{(i8.speedup or 0):.2f}× FP32")


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
    """What the per-node ms are: the profiled times scaled to the unprofiled median (the factor), and the
    profiler's overhead (the profiled kernels' total over that median)."""
    ratio = prof.overhead_ratio
    if ratio is None:
        return Fact("per-node ms", "as profiled (no unprofiled median to scale to)")
    why = "profiler overhead" if ratio >= 1 else "the rest of the median is spent between kernels"
    return Fact("per-node ms", f"profiled times scaled ×{prof.scale:.3g} to the measured median (the profiled "
                               f"kernels took {ratio:.1f}× it: {why}; the raw figures are in 'raw ms')")


def inputs_fact(prof) -> Fact:
    """The shapes the model ran at (the first batch, by input: a model with symbolic dims says which sizes it was
    measured at, ``x 1×3×320×320``), where they came from (synthetic or the sample data) and the dims set."""
    shapes = prof.inputs.shapes or {}
    shown = " · ".join(f"{name} {'×'.join(str(d) for d in shape) or 'scalar'}" for name, shape in shapes.items())
    dims = ", ".join(f"{k}={v}" for k, v in (prof.dims or {}).items())
    source = prof.inputs.source or "synthetic"
    return Fact("inputs", f"{shown or 'not recorded'} ({source}{'; dims ' + dims if dims else ''})")


def summary_facts(prof, level: Optional[str] = None) -> list:
    """The summary of a perf profile: name, batch, cores and onnxruntime; the input shapes it ran at; the instruction
    sets; the measured latency
    (median, p90, mean, min ms per batch) and items/s; the measured INT8 model; the pruned estimates (``level``:
    one sparsity level such as ``"0.9"``, or None for every level); what the per-node ms are; and why onnxruntime
    gains nothing from unstructured sparsity (the last fact)."""
    lat = prof.latency_ms
    return [
        Fact("perf profile", f"{prof.name} · batch {prof.batch_size} · {plural(prof.core_count, 'core')} · "
                             f"onnxruntime {prof.ort_version or '?'}"),
        inputs_fact(prof),
        Fact("instruction sets", ", ".join(prof.instruction_sets) or "unknown"),
        Fact("measured", f"{format_ms(lat.median)} ms/batch (p90 {format_ms(lat.p90)}, mean {format_ms(lat.mean)}, "
                         f"min {format_ms(lat.min)}) · {prof.items_per_second:.1f} items/s"),
        _int8_fact(prof),
        _estimate_fact(prof, level),
        overhead_fact(prof),
        Fact("note", "onnxruntime gets no speedup from unstructured sparsity (1.0×): pruned times are estimates "
                     "for a sparse-kernel runtime, calibrated on measured DeepSparse speedups"),
    ]


__all__ = ["inputs_fact", "overhead_fact", "summary_facts"]
